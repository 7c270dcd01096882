"""The protocols cluster backends implement (docker, local netns, ssh, and test doubles).

Node names are short and stable within a cluster: a role's prefix and a number (the store's `m1`..`m3` for
masters, `t1`..`t5` for tablet servers). A role may give its nodes DNS names (the store's `master-1`..),
separate from node names so a name can be moved to another node (`set_dns`), which is the cname swap of
the permanent-master-failure procedure. What a role runs is a DB's ClusterSpec (cluster/base.py).

What a backend offers comes in small protocols, after Jepsen's (net/proto.clj's Net, db.clj's Kill and
Pause): code that needs one kind of fault asks for that protocol only, so a backend that cannot cut power or
shape packets still serves every fault it can, and a test double implements just what its test uses. Each
fault protocol includes `Nodes`, since a fault first picks its targets. `ClusterBackend` is all of them:
what the real backends (cluster/base.py's NodeBackend and its subclasses) implement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class PacketShape:
    """What a packet fault does to a node's outbound packets; all zero is a normal link. Delay and reorder
    need tc netem on the node; loss, duplication and a rate limit have fallbacks (cluster/base.py)."""

    delay_ms: float = 0
    jitter_ms: float = 0
    loss_pct: float = 0
    duplicate_pct: float = 0
    reorder_pct: float = 0
    rate_kbit: float = 0

    def wanted(self) -> dict[str, float]:
        """Each packet kind (cluster/base.py's PACKET_KINDS) by how much of it this shape asks for."""
        return {
            "delay": self.delay_ms or self.jitter_ms,
            "reorder": self.reorder_pct,
            "loss": self.loss_pct,
            "duplicate": self.duplicate_pct,
            "rate": self.rate_kbit,
        }


class Remote(Protocol):
    """Runs commands on a node. `argv` is a list, never a shell string built from data."""

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]: ...

    def put(self, node: str, path: str, data: bytes) -> None: ...

    def get(self, node: str, path: str) -> bytes: ...


class Nodes(Protocol):
    """The nodes of a cluster by role: what every fault needs first, to choose its targets."""

    def nodes(self, role: str | None = None) -> list[str]:
        """The nodes that run the DB (destroyed ones excluded), or those of one role."""
        ...


class Hosts(Nodes, Protocol):
    """Hosts brought up and down, reached by commands and addresses, and the evidence they keep: what the
    runner, a DB's setup and its clients need, and what node-level tools (`node_dir`, `expand`) run in."""

    @property
    def remote(self) -> Remote:
        """Runs commands on the nodes, and moves files to and from them."""
        ...

    def up(self, spec: Mapping[str, Any]) -> None:
        """Brings up the hosts of a ClusterSpec (as a mapping or the object) and starts their processes."""
        ...

    def down(self) -> None:
        """Removes every host and everything the cluster made on this machine."""
        ...

    def address(self, node: str) -> str:
        """The node's address, as this machine and the other nodes reach it."""
        ...

    def addresses(self, role: str) -> list[str]:
        """The role's `name:port` addresses inside the cluster."""
        ...

    def resolve(self, name: str) -> str:
        """The IP address a node name or DNS name stands for now."""
        ...

    def node_dir(self, node: str) -> str:
        """The folder on the node that holds the DB's data and logs."""
        ...

    def env_argv(self, node: str) -> list[str]:
        """The `env ...` prefix under which a command on the node imports Faultline."""
        ...

    def expand(self, node: str, template: Sequence[str]) -> list[str]:
        """An argv template (`{python}`, `{dir}`, `{addresses:ROLE}`, ...) filled in for `node`."""
        ...

    def logs(self, node: str) -> str:
        """The tail of the log of the node's process ("" when there is none yet)."""
        ...

    def collect(self, dest: str | Path) -> list[Path]:
        """Copies each node's logs and data into dest/<node>/."""
        ...


class Processes(Nodes, Protocol):
    """The DB's process on each node (after Jepsen's Kill and Pause): its lifecycle and the kill and pause
    faults. A start after a kill, pause or stop brings the same node back with its data."""

    def start(self, node: str) -> None: ...

    def stop(self, node: str) -> None: ...

    def kill(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def daemon_status(self, node: str) -> str:
        """running | paused | stopped"""
        ...


class Membership(Nodes, Protocol):
    """Nodes that come and go, and DNS names that move between them: the topology faults (a master
    destroyed for good and replaced, its DNS name moved to the replacement)."""

    def destroy(self, node: str) -> None:
        """Removes the node and its data for good; it leaves `nodes()`."""
        ...

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str:
        """A new node of `role`, with an empty data folder; returns its name."""
        ...

    def set_dns(self, name: str, node: str) -> None:
        """Points the DNS name at `node`, for every node and for clients on this machine."""
        ...

    def dns_holder(self, name: str) -> str | None:
        """The node a DNS name points at, if any."""
        ...


class Network(Nodes, Protocol):
    """Network faults (after Jepsen's Net): partitions and packet shaping, healed without residue."""

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """grudge[a] = the nodes whose traffic a drops (inbound), for each a."""
        ...

    def heal_network(self) -> None:
        """Undoes every partition and packet fault, and verifies nothing is left behind."""
        ...

    def packet_kinds(self, node: str) -> tuple[str, ...]:
        """The packet faults this node's kernel supports (of cluster/base.py's PACKET_KINDS)."""
        ...

    def packet(self, node: str, shape: PacketShape = ...) -> None:
        """Shapes the node's outbound packets (the default, all zero: back to normal)."""
        ...

    def netem(self, node: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        """Delay, jitter and loss only (the older form of `packet`)."""
        ...


class Clock(Nodes, Protocol):
    """Clock faults: the node's processes read their time through an offset the backend sets."""

    def set_clock_offset(self, node: str, offset_s: float) -> None:
        """Moves the node's clock by `offset_s` seconds from the host's (0: back in step)."""
        ...


class Power(Nodes, Protocol):
    """Power faults: a node loses what never reached stable storage."""

    def power_loss(self, node: str, restart: bool = True) -> dict[str, Any]:
        """SIGKILL, cut the data back to what reached fsync, start again (cluster/base.py)."""
        ...


class Disk(Nodes, Protocol):
    """Disk faults through the disk layer under a node's data directories (cluster/disklayer.py), mounted
    only for a cluster whose spec names `disk_dirs`."""

    def disk_layers(self, node: str) -> list[str]:
        """The node's data directories under a disk layer (empty: none)."""
        ...

    def lose_unfsynced(self, node: str) -> dict[str, Any]:
        """Drops what the node never fsynced (its process killed first); returns the files and bytes."""
        ...

    def disk_checkpoint(self, node: str) -> dict[str, Any]:
        """Writes everything held for the node through to the disk."""
        ...


class Observation(Protocol):
    """What faults left behind, for the runner's check after it heals."""

    def residue(self) -> list[str]:
        """What faults left behind, one line each; empty after a clean heal."""
        ...


class ClusterBackend(Hosts, Processes, Membership, Network, Clock, Power, Disk, Observation, Protocol):
    """Every protocol above: what the real backends implement (they share cluster/base.py's NodeBackend),
    and what a backend registered in cluster/backends.py is made as."""
