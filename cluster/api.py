"""The protocols every cluster backend implements (docker, local netns, ssh).

Node names are short and stable within a cluster: a role's prefix and a number (the store's `m1`..`m3` for
masters, `t1`..`t5` for tablet servers). A role may give its nodes DNS names (the store's `master-1`..),
separate from node names so a name can be moved to another node (`set_dns`), which is the cname swap of
the permanent-master-failure procedure. What a role runs is a DB's ClusterSpec (cluster/base.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class Remote(Protocol):
    """Runs commands on a node. `argv` is a list, never a shell string built from data."""

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]: ...

    def put(self, node: str, path: str, data: bytes) -> None: ...

    def get(self, node: str, path: str) -> bytes: ...


class ClusterBackend(Protocol):
    """What every backend offers: hosts by role, the processes a DB's ClusterSpec says they run, and
    fault primitives that heal without residue. The real backends share cluster/base.py's NodeBackend;
    the in-memory fake (faultline.testing.fake) implements the same methods."""

    remote: Remote

    # lifecycle
    def up(self, spec: Mapping[str, Any]) -> None: ...

    def down(self) -> None: ...

    def nodes(self, role: str | None = None) -> list[str]:
        """The nodes that run the DB, or those of one role."""
        ...

    def start(self, node: str) -> None: ...

    def stop(self, node: str) -> None: ...

    def kill(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def destroy(self, node: str) -> None: ...

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str: ...

    def logs(self, node: str) -> str: ...

    # naming: movable DNS names, and how the controller on the host reaches nodes
    def set_dns(self, name: str, node: str) -> None: ...

    def dns_holder(self, name: str) -> str | None: ...

    def resolve(self, name: str) -> str: ...

    def addresses(self, role: str) -> list[str]:
        """The role's `name:port` addresses inside the cluster."""
        ...

    # fault primitives the nemeses use; heal_network() verifies nothing is left behind
    def partition(self, grudge: Mapping[str, set[str]]) -> None:
        """grudge[a] = the nodes whose traffic a drops (inbound), for each a."""
        ...

    def heal_network(self) -> None: ...

    def netem(self, node: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None: ...

    def packet_kinds(self, node: str) -> tuple[str, ...]: ...

    def packet(self, node: str, *, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0,
               duplicate_pct: float = 0, reorder_pct: float = 0, rate_kbit: float = 0) -> None: ...

    def set_clock_offset(self, node: str, offset_s: float) -> None: ...

    def power_loss(self, node: str, restart: bool = True) -> dict[str, Any]:
        """SIGKILL, cut the data back to what reached fsync, start again (cluster/base.py)."""
        ...

    # observation and evidence
    def daemon_status(self, node: str) -> str:
        """running | paused | stopped"""
        ...

    def residue(self) -> list[str]:
        """What faults left behind, one line each; empty after a clean heal."""
        ...

    def collect(self, dest: Any) -> list[Any]:
        """Copies each node's logs and data into dest/<node>/."""
        ...
