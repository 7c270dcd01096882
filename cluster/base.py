"""What the three backends share: cluster specs as data, daemon management and fault primitives over a Remote.

A backend only has to say how to run a command on a node (its `Remote`), where a node keeps its state and
source, and how names resolve; everything else (start/stop/kill/pause of the node process, partitions
with iptables in a chain of our own, netem, the per-node clock offset) is the same argv on every backend.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import shlex
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultline.cluster import state
from faultline.cluster.api import PacketShape, Remote

HOSTS_ENV = "FAULTLINE_HOSTS_FILE"

CHAIN = "FL-PART"
LOSS_CHAIN = "FL-LOSS"
DUP_CHAIN = "FL-DUP"  # in the mangle table: packets cloned to their own destination (duplication)
# What `packet` can do to a node's traffic, and which kernel feature each needs (see `packet_kinds`).
PACKET_KINDS = ("delay", "reorder", "loss", "duplicate", "rate")
# `ip route ... proto 188` marks the fallback routes as ours, so heal removes exactly those.
ROUTE_PROTO = "188"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
LABEL = "org.faultline"
CLOCK_ENV = "FAULTLINE_CLOCK_OFFSET_FILE"
# `{word}` or `{word:ROLE}` in a role's argv templates (see RoleSpec.expand)
_TEMPLATE_RE = re.compile(r"\{(\w+)(?::([\w-]+))?\}")


def fill_template(
    template: Sequence[str], values: Mapping[str, str], addresses: Callable[[str], list[str]]
) -> list[str]:
    """A role template (RoleSpec) filled in: `{word}` from `values`, `{addresses:ROLE}` from `addresses`;
    any other placeholder is an error, never passed through."""

    def fill(m: re.Match[str]) -> str:
        word, arg = m.group(1), m.group(2)
        if word == "addresses" and arg:
            return ",".join(addresses(arg))
        if word in values and not arg:
            return values[word]
        raise ClusterError(f"unknown placeholder {m.group(0)!r} in a role's command")

    return [_TEMPLATE_RE.sub(fill, part) for part in template]


def _tc_root(dev: str, *qdisc: str) -> list[str]:
    """`tc qdisc replace` of the device's root qdisc."""
    return ["tc", "qdisc", "replace", "dev", dev, "root", *qdisc]


class ClusterError(RuntimeError):
    """A cluster operation failed on a node; the message names the node and the step."""


@contextlib.contextmanager
def disk_errors() -> Iterator[None]:
    """A disk layer's error raised on as a ClusterError (cluster/disklayer.py sits below this module)."""
    from faultline.cluster.disklayer import DiskLayerError

    try:
        yield
    except DiskLayerError as exc:
        raise ClusterError(str(exc)) from None


class UnknownName(OSError):
    """`resolve` of a name the cluster does not have."""


class RemoteTimeout(ClusterError, TimeoutError):
    """A remote command ran past its deadline (and was killed)."""


@dataclass
class NodeInfo:
    """One node as plain data: `host` is the backend's handle (container, namespace, ssh address)."""

    name: str
    role: str  # one of the spec's role names, or sshd
    address: str = ""
    host: str = ""
    dns: list[str] = field(default_factory=list)


@dataclass
class RoleSpec:
    """One kind of node and the process it runs, as plain data a DB writes and the cluster interprets.

    Nodes are named `prefix1..prefixN`; node i also carries the DNS name `dns` with `{i}` replaced (a
    name that can move to another node, see `set_dns`). `argv`, `prepare` and `power_cut` are templates:
    `{python}`, `{dir}` (the node's directory), `{name}`, `{address}`, `{port}`, `{advertise}` (first DNS
    name, else the address, with the port) and `{addresses:ROLE}` (every DNS name, else node name, of
    that role with its port, comma-separated). An empty argv runs nothing.
    """

    role: str
    count: int
    prefix: str
    port: int = 0
    dns: str = ""
    argv: list[str] = field(default_factory=list)
    prepare: list[str] = field(default_factory=list)  # once before the first start ...
    prepare_unless: str = ""  # ... unless this path exists on the node
    power_cut: list[str] = field(default_factory=list)  # after SIGKILL: drop what never reached fsync
    user: str = ""  # run the process as this user (the daemon manager drops root just before exec)

    def node_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.count + 1)]

    def dns_names(self) -> list[str]:
        return [self.dns.replace("{i}", str(i)) for i in range(1, self.count + 1)] if self.dns else []

    def addresses(self) -> list[str]:
        """Where the role's processes are reached inside the cluster: DNS names (which follow a moved
        node) when the role has them, else node names."""
        return [f"{n}:{self.port}" for n in (self.dns_names() or self.node_names())]


@dataclass
class ClusterSpec:
    """What `up` builds: hosts by role, the process each runs, and the Debian packages they need. A DB
    writes it (dbs/); the cluster layer knows nothing of what runs. `db` names the DB, `db_opts` holds
    its own plain facts (e.g. injected bugs), both kept so an attached cluster can be checked."""

    name: str = "default"
    roles: list[RoleSpec] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    python_packages: list[str] = field(default_factory=list)
    db: str = ""
    db_opts: dict[str, Any] = field(default_factory=dict)
    # libfaketime 0.9.10 (Debian bookworm) breaks CPython's time.sleep (EINVAL, or a hang when the
    # monotonic clock is faked too), so preloading it is opt-in; the offset file is always provided.
    faketime: bool = False
    # each node held to one CPU, round-robin over the host's (the Docker backend): a DB whose server holds a
    # global interpreter lock gains little from a second core and loses much to lock hand-offs between cores
    one_cpu_per_node: bool = False
    # role -> templates of the data directories that get a disk layer (cluster/disklayer.py), for a run
    # with a disk fault only: any other run mounts nothing and pays nothing
    disk_dirs: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any]) -> ClusterSpec:
        """A spec from plain data (test.json, docker labels, state files), validated."""
        known = set(cls.__dataclass_fields__)
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown cluster spec keys: {', '.join(sorted(unknown))}")
        data = dict(spec)
        data["roles"] = [r if isinstance(r, RoleSpec) else RoleSpec(**r) for r in data.get("roles") or []]
        out = cls(**data)
        if not NAME_RE.match(out.name):
            raise ValueError(f"cluster name {out.name!r}: use lowercase letters, digits and '-' (max 31)")
        prefixes = [r.prefix for r in out.roles]
        if len(set(prefixes)) != len(prefixes) or any(not re.match(r"^[a-z]+$", p) for p in prefixes):
            raise ValueError(f"role name prefixes must be distinct lowercase words, not {prefixes}")
        if any(r.count < 0 for r in out.roles) or not any(r.count for r in out.roles):
            raise ValueError("a cluster needs at least one node, and no role a negative count")
        return out

    def to_mapping(self) -> dict[str, Any]:
        return asdict(self)

    def role(self, name: str) -> RoleSpec:
        for r in self.roles:
            if r.role == name:
                return r
        raise ClusterError(
            f"no role {name!r} in cluster {self.name} (roles: "
            f"{', '.join(r.role for r in self.roles) or 'none'})"
        )

    def role_of(self, node: str) -> str:
        """The role a node name belongs to, by its prefix (`m4` is a master when masters are `m`)."""
        for r in self.roles:
            if re.fullmatch(rf"{r.prefix}\d+", node):
                return r.role
        raise ClusterError(
            f"node name {node!r} matches no role of cluster {self.name} "
            f"(prefixes: {', '.join(r.prefix for r in self.roles)})"
        )

    def node_names(self) -> list[tuple[str, str, list[str]]]:
        """(name, role, DNS names) of every node `up` creates, in role order."""
        out = []
        for r in self.roles:
            dns = r.dns_names()
            out += [(n, r.role, [dns[i]] if dns else []) for i, n in enumerate(r.node_names())]
        return out

    def dns_names(self) -> list[str]:
        return [d for r in self.roles for d in r.dns_names()]


def check_ip(ip: str) -> str:
    return str(ipaddress.IPv4Address(ip))


# Partition script: positional args only ("$@"), so no data is ever spliced into shell text.
_PARTITION_SH = (
    'ipt="$1"; shift; '
    f'"$ipt" -w -N {CHAIN} 2>/dev/null || "$ipt" -w -F {CHAIN} || exit 3; '
    f'"$ipt" -w -C INPUT -j {CHAIN} 2>/dev/null || "$ipt" -w -I INPUT 1 -j {CHAIN} || exit 4; '
    f'for ip in "$@"; do "$ipt" -w -A {CHAIN} -s "$ip" -j DROP || exit 5; done'
)
_ROUTE_SH = (
    f"ip route flush proto {ROUTE_PROTO} 2>/dev/null; "
    f'for ip in "$@"; do ip route replace prohibit "$ip/32" proto {ROUTE_PROTO} || exit 5; done'
)
_HEAL_SH = (
    'ipt="$1"; dev="$2"; '
    'if [ "$ipt" != route ]; then for c in FL-PART FL-LOSS; do '
    '  n=0; while "$ipt" -w -D INPUT -j $c 2>/dev/null && [ $n -lt 50 ]; do n=$((n+1)); done; '
    '  "$ipt" -w -F $c 2>/dev/null; "$ipt" -w -X $c 2>/dev/null; done; '
    '  if "$ipt" -w -S 2>/dev/null | grep -q -e FL-PART -e FL-LOSS; then echo "iptables rules left"; exit 6; fi; '
    "fi; "
    f"ip route flush proto {ROUTE_PROTO} 2>/dev/null; "
    f'if [ -n "$(ip route show proto {ROUTE_PROTO} 2>/dev/null)" ]; then echo "routes left"; exit 7; fi; '
    'tc qdisc del dev "$dev" root 2>/dev/null; '
    'if tc qdisc show dev "$dev" 2>/dev/null | grep -q -e netem -e tbf; then echo "netem or tbf left"; exit 8; fi; '
    'if [ "$ipt" != route ]; then '
    '  n=0; while "$ipt" -w -t mangle -D OUTPUT -j FL-DUP 2>/dev/null && [ $n -lt 50 ]; do n=$((n+1)); done; '
    '  "$ipt" -w -t mangle -F FL-DUP 2>/dev/null; "$ipt" -w -t mangle -X FL-DUP 2>/dev/null; '
    '  if "$ipt" -w -t mangle -S 2>/dev/null | grep -q FL-DUP; then echo "duplication rules left"; exit 9; fi; '
    "fi; exit 0"
)
# Duplication without netem: clone a random share of outbound packets to each peer, sent to the peer
# itself (iptables' TEE target), so the peer receives them twice.
_DUP_SH = (
    'ipt="$1"; p="$2"; shift 2; '
    f'"$ipt" -w -t mangle -N {DUP_CHAIN} 2>/dev/null || "$ipt" -w -t mangle -F {DUP_CHAIN} || exit 3; '
    f'"$ipt" -w -t mangle -C OUTPUT -j {DUP_CHAIN} 2>/dev/null || "$ipt" -w -t mangle -I OUTPUT 1 -j {DUP_CHAIN} || exit 4; '
    f'for ip in "$@"; do "$ipt" -w -t mangle -A {DUP_CHAIN} -d "$ip" -m statistic --mode random --probability "$p" '
    '-j TEE --gateway "$ip" || exit 5; done'
)
# Packet faults off, partitions left alone (packet faults and partitions come and go independently).
_CLEAR_PACKET_SH = (
    'ipt="$1"; dev="$2"; tc qdisc del dev "$dev" root 2>/dev/null; '
    'if [ "$ipt" != route ]; then '
    f'  "$ipt" -w -F {LOSS_CHAIN} 2>/dev/null; "$ipt" -w -t mangle -F {DUP_CHAIN} 2>/dev/null; '
    "fi; exit 0"
)
# Does this node's kernel have tc netem? (Replaced at once by nothing: a probe, not a fault.)
_NETEM_PROBE_SH = (
    'dev="$1"; if tc qdisc add dev "$dev" root netem delay 0ms 2>/dev/null; then tc qdisc del dev "$dev" root; '
    "echo netem; else echo none; fi"
)
# Loss without netem: drop a random share of inbound packets on the interface (xt_statistic).
_LOSS_SH = (
    'ipt="$1"; dev="$2"; p="$3"; '
    f'"$ipt" -w -N {LOSS_CHAIN} 2>/dev/null || "$ipt" -w -F {LOSS_CHAIN} || exit 3; '
    f'"$ipt" -w -C INPUT -j {LOSS_CHAIN} 2>/dev/null || "$ipt" -w -I INPUT 1 -j {LOSS_CHAIN} || exit 4; '
    f'"$ipt" -w -A {LOSS_CHAIN} -i "$dev" -m statistic --mode random --probability "$p" -j DROP || exit 5'
)
# Which iptables does this node's kernel use? Rules already present decide (Docker's DNS rules live in
# the container's nat table); else the first that works; else routes.
_DETECT_SH = (
    'for v in nft legacy; do if iptables-$v-save 2>/dev/null | grep -q "^-A"; then echo iptables-$v; exit 0; fi; done; '
    "for v in nft legacy; do if iptables-$v -w -S >/dev/null 2>&1; then echo iptables-$v; exit 0; fi; done; "
    "echo route"
)


class NodeBackend:
    """The backend-independent half of a ClusterBackend. Subclasses set `remote` and the hooks below."""

    kind = "base"
    remote: Remote

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.info: dict[str, NodeInfo] = {}
        self._ipt: dict[str, str] = {}
        self._kinds: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ saved state
    def _save_state(self, **extra: Any) -> None:
        """Record the cluster (cluster/state.py, under this backend's kind) for `attach` to find again."""
        state.save(
            self.kind,
            self.spec.name,
            {"spec": self.spec.to_mapping(), **extra, "nodes": {n: i.__dict__ for n, i in self.info.items()}},
        )

    @classmethod
    def _saved_state(cls, name: str) -> dict[str, Any]:
        """What `_save_state` recorded of the cluster `name`; a ClusterError if there is no such cluster."""
        data = state.load(cls.kind, name)
        if data is None:
            raise ClusterError(f"no {cls.kind} cluster named {name!r}")
        return data

    def _restore_nodes(self, data: Mapping[str, Any]) -> None:
        self.info = {n: NodeInfo(**i) for n, i in data["nodes"].items()}

    # ------------------------------------------------------------------ hooks
    def node_dir(self, node: str) -> str:
        """Where the node keeps logs/, run/, data/ and its faketime file."""
        raise NotImplementedError

    def python(self, node: str) -> str:
        return "python3"

    def source_dir(self, node: str) -> str:
        """Directory on the node that holds the `cluster` and `node` packages (PYTHONPATH)."""
        raise NotImplementedError

    def iface(self, node: str) -> str:
        return "eth0"

    def resolve(self, name: str) -> str:
        """Address of a node name or DNS name, as the host reaches it (an address passes through).
        An unknown name raises UnknownName, an OSError like a failed getaddrinfo, so it can be handed
        to a client library as its resolver."""
        try:
            return str(ipaddress.ip_address(name))
        except ValueError:
            pass
        if name in self.info:
            return self.info[name].address
        for n in self.info.values():
            if name in n.dns:
                return n.address
        raise UnknownName(f"unknown node or DNS name {name!r} in cluster {self.spec.name}")

    # ------------------------------------------------------------------ names
    def nodes(self, role: str | None = None) -> list[str]:
        """The nodes that run the DB (every role of the spec), or those of one role."""
        roles = {r.role for r in self.spec.roles} if role is None else {role}
        return [n for n, i in self.info.items() if i.role in roles]

    def addresses(self, role: str) -> list[str]:
        """The role's `name:port` addresses inside the cluster (DNS names when the role has them)."""
        return self.spec.role(role).addresses()

    def hosts_file(self) -> Path:
        """A hosts file on the controller's machine ("IP NAME..." lines) kept in step with the cluster:
        host-side clients set FAULTLINE_HOSTS_FILE to it and follow a moved master name."""
        from faultline.cluster import state

        return state.state_dir(self.kind) / f"{self.kind}-{self.spec.name}.hosts"

    def sync_hosts_file(self) -> Path:
        p = self.hosts_file()
        p.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(
            f"{i.address} {n} {' '.join(i.dns)}".rstrip() + "\n" for n, i in self.info.items() if i.address
        )
        tmp = p.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(p)
        return p

    def remove_hosts_file(self) -> None:
        self.hosts_file().unlink(missing_ok=True)

    def address(self, node: str) -> str:
        """The node's address (as the host and the other nodes reach it)."""
        return self._node(node).address

    def set_dns(self, name: str, node: str) -> None:
        """Moves the DNS name `name` to `node`: the cname swap of the permanent-master-failure procedure.
        Backends publish the new mapping in `_publish_dns` (hosts files here; Docker overrides it)."""
        target = self._node(node)
        old = self.dns_holder(name)
        if old == node:
            return
        if old is not None:
            self.info[old].dns.remove(name)
        target.dns.append(name)
        self._publish_dns(name, old, node)
        self.sync_hosts_file()

    def _publish_dns(self, name: str, old: str | None, new: str) -> None:
        """Hosts-file DNS (local namespaces, ssh hosts): rewrite every node's hosts file, keep the state."""
        self._write_hosts()
        self._save()

    def _write_hosts(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no hosts files")

    def _nodes_changed(self) -> None:
        """After a node came or went: every node's hosts file, the saved state, this host's hosts file."""
        self._write_hosts()
        self._save()
        self.sync_hosts_file()

    def _start_nodes(self, nodes: list[str], log: Callable[[str], None]) -> None:
        """The last step of `up`: every node's process, then this host's hosts file."""
        self._parallel(self.start, nodes)
        self.sync_hosts_file()
        log(f"node processes started ({self.spec.db or 'nothing'})")

    def _save(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no state file")

    def dns_holder(self, name: str) -> str | None:
        for n, i in self.info.items():
            if name in i.dns:
                return n
        return None

    def _node(self, node: str) -> NodeInfo:
        try:
            return self.info[node]
        except KeyError:
            raise ClusterError(
                f"no node {node!r} in cluster {self.spec.name} (nodes: {', '.join(self.info) or 'none'})"
            ) from None

    # ------------------------------------------------------------------ running things on a node
    def run(
        self, node: str, argv: Sequence[str], timeout: float = 30, check: bool = True, step: str = ""
    ) -> tuple[int, str, str]:
        rc, out, err = self.remote.exec(node, list(argv), timeout)
        if check and rc != 0:
            what = step or " ".join(shlex.quote(a) for a in argv[:4])
            raise ClusterError(f"{node}: {what} failed (exit {rc}): {(err or out).strip()[-500:]}")
        return rc, out, err

    def env_argv(self, node: str) -> list[str]:
        """The `env ...` prefix under which a command on `node` imports this package."""
        return ["env", f"PYTHONPATH={self.source_dir(node)}", "PYTHONDONTWRITEBYTECODE=1"]

    def _daemon_argv(self, node: str, action: str, extra: Sequence[str] = ()) -> list[str]:
        return [
            *self.env_argv(node),
            self.python(node),
            "-m",
            "faultline.cluster.daemon",
            action,
            "--dir",
            self.node_dir(node),
            *extra,
        ]

    def _daemon(self, node: str, action: str, extra: Sequence[str] = (), timeout: float = 30) -> str:
        return self.run(node, self._daemon_argv(node, action, extra), timeout, step=f"daemon {action}")[1]

    def _role(self, node: str) -> RoleSpec | None:
        role = self._node(node).role
        return next((r for r in self.spec.roles if r.role == role), None)

    def expand(self, node: str, template: Sequence[str]) -> list[str]:
        """A role template (RoleSpec) filled in for `node`."""
        info = self._node(node)
        role = self._role(node)
        port = role.port if role else 0
        values = {
            "python": self.python(node),
            "dir": self.node_dir(node),
            "name": node,
            "address": info.address,
            "port": str(port),
            "advertise": f"{info.dns[0] if info.dns else info.address}:{port}",
        }
        return fill_template(template, values, self.addresses)

    def process_argv(self, node: str) -> list[str] | None:
        """The process `node` runs (its role's argv, filled in), or None when its role runs nothing."""
        role = self._role(node)
        return self.expand(node, role.argv) if role and role.argv else None

    def start(self, node: str) -> None:
        """Starts the node's process (a no-op when it is running); the role's `prepare` step runs first,
        in the same round trip, unless its `prepare_unless` path exists (a restart keeps the data)."""
        argv = self.process_argv(node)
        if argv is None:
            return
        role = self._role(node)
        assert role is not None
        d = self.node_dir(node)
        env = [
            f"--env=PYTHONPATH={self.source_dir(node)}",
            "--env=PYTHONUNBUFFERED=1",
            "--env=PYTHONDONTWRITEBYTECODE=1",
            f"--env={CLOCK_ENV}={self.clock_file(node)}",
        ]
        ft = ["--faketime", self.clock_file(node)] if self.spec.faketime else []
        prep: list[str] = []
        if role.prepare:
            prep = ["--prepare", json.dumps(self.expand(node, role.prepare))]
            if role.prepare_unless:
                prep += ["--prepare-unless", self.expand(node, [role.prepare_unless])[0]]
        user = ["--user", role.user] if role.user else []
        self._daemon(
            node, "start", ["--name", role.role, *env, *ft, *prep, *user, "--cwd", d, "--", *argv], timeout=90
        )

    def stop(self, node: str) -> None:
        self._daemon(node, "stop", ["--name", self._node(node).role], timeout=40)

    def kill(self, node: str) -> None:
        self._daemon(node, "kill", ["--name", self._node(node).role])

    def power_loss(self, node: str, restart: bool = True) -> dict[str, Any]:
        """A power cut: SIGKILL the process, run the role's `power_cut` command (which drops the writes a
        real power cut discards: whatever never reached fsync), then start it again. Returns the JSON
        object the command printed last, or {} for a role without one."""
        self.kill(node)
        role = self._role(node)
        report: dict[str, Any] = {}
        if role and role.power_cut:
            argv = [*self.env_argv(node), *self.expand(node, role.power_cut)]
            deadline = time.monotonic() + 10
            while True:  # the killed process's lock can outlive it for a moment
                rc, out, err = self.run(node, argv, 60, check=False)
                if rc == 0 or "in use" not in err or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if rc != 0:
                raise ClusterError(
                    f"{node}: power cut of the data failed (exit {rc}): {(err or out).strip()[-500:]}"
                )
            report = json.loads(out.strip().splitlines()[-1])
        if restart:
            self.start(node)
        return report

    def disk_layers(self, node: str) -> list[str]:
        """The node's data directories under a disk layer (cluster/disklayer.py), as the node sees them."""
        role = self._role(node)
        return self.expand(node, self.spec.disk_dirs.get(role.role, [])) if role else []

    def lose_unfsynced(self, node: str) -> dict[str, Any]:
        """Drops every write the node's disk layers hold (what it never fsynced): call it with the node's
        process killed. Returns the files and bytes dropped."""
        return self._disk(node, "lose")

    def disk_checkpoint(self, node: str) -> dict[str, Any]:
        """Writes everything the node's disk layers hold through to the disk."""
        return self._disk(node, "checkpoint")

    def _disk(self, node: str, cmd: str) -> dict[str, Any]:
        """`cmd` (lose or checkpoint) to the node's layers; refused when it has none."""
        self._node(node)
        with disk_errors():
            return self.layer_command(node, cmd)

    def layer_command(self, node: str, cmd: str) -> dict[str, Any]:
        """`cmd` to the node's layers where they run: here, on this machine (Docker, local); the SSH
        backend runs the same control (cluster/layerctl.py) on its hosts."""
        from faultline.cluster import disklayer, layerctl

        if not disklayer.node_layers(self.kind, self.spec.name, node):
            raise ClusterError(f"{node}: no disk layer is mounted (the cluster was brought up without one)")
        return layerctl.command_node(disklayer.layer_root(self.kind, self.spec.name) / node, cmd)

    def pause(self, node: str) -> None:
        self._daemon(node, "pause", ["--name", self._node(node).role])

    def resume(self, node: str) -> None:
        self._daemon(node, "resume", ["--name", self._node(node).role])

    def daemon_status(self, node: str) -> str:
        """running | paused | stopped, as the node's pid file and /proc say. An answer that comes back
        empty (seen once under load from `docker exec`) is asked again, twice at most."""
        role = self._node(node).role
        for _ in range(3):
            lines = self._daemon(node, "status", ["--name", role]).strip().splitlines()
            if lines:
                return json.loads(lines[-1])[role]
            time.sleep(0.2)
        raise ClusterError(f"{node}: daemon status printed nothing, three times")

    def logs(self, node: str) -> str:
        path = f"{self.node_dir(node)}/logs/{self._node(node).role}.log"
        rc, out, _ = self.run(node, ["tail", "-c", "2000000", path], 30, check=False)
        if rc != 0:
            return ""
        return out

    def clock_file(self, node: str) -> str:
        return f"{self.node_dir(node)}/clock-offset"

    def set_clock_offset(self, node: str, offset_s: float) -> None:
        """Moves the node process's wall clock by `offset_s` seconds: the file named by the daemon's
        FAULTLINE_CLOCK_OFFSET_FILE holds the offset ("+3600.5"); the node's clock adds it, and with
        spec.faketime libfaketime reads the same file (within ~1 s)."""
        self.remote.put(node, self.clock_file(node), f"{offset_s:+.6f}\n".encode())

    # ------------------------------------------------------------------ network faults
    def iptables(self, node: str) -> str:
        if node not in self._ipt:
            self._ipt[node] = self.run(node, ["sh", "-c", _DETECT_SH], 20)[1].strip() or "route"
        return self._ipt[node]

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        """For each node a in `grudge`, a drops all inbound traffic from grudge[a] (replacing a's old set)."""
        plan = {}
        for a, others in grudge.items():
            self._node(a)
            plan[a] = sorted(check_ip(self._node(b).address) for b in others if b != a)

        def apply(a: str) -> None:
            ipt = self.iptables(a)
            if ipt == "route":
                self.run(a, ["sh", "-c", _ROUTE_SH, "sh", *plan[a]], 30, step="ip route prohibit")
            else:
                self.run(a, ["sh", "-c", _PARTITION_SH, "sh", ipt, *plan[a]], 30, step=f"{ipt} partition")

        self._parallel(apply, list(plan))

    def cut(self, a: str, b: str) -> None:
        """Blocks a<->b both ways (each drops the other's packets), leaving everyone else alone."""
        self.partition({a: self._blocked(a) | {b}, b: self._blocked(b) | {a}})

    def blocked(self, node: str) -> set[str]:
        """The nodes whose traffic `node` currently drops (from its FL-PART chain or fallback routes)."""
        return self._blocked(node)

    def residue(self) -> list[str]:
        """What faults left behind, one line each: partition rules, lossy links, netem, node processes
        not running, clock offsets. Empty after a clean heal; the runner reports anything else."""

        def check(n: str) -> list[str]:
            out = []
            blocked = self._blocked(n)
            if blocked:
                out.append(f"{n}: partition rules against {sorted(blocked)}")
            ipt = self.iptables(n)
            if ipt != "route":
                rc, rules, _ = self.run(n, [ipt, "-w", "-S", LOSS_CHAIN], 20, check=False)
                if rc == 0 and any(ln.startswith("-A") for ln in rules.splitlines()):
                    out.append(f"{n}: packet-loss rules")
                rc, rules, _ = self.run(n, [ipt, "-w", "-t", "mangle", "-S", DUP_CHAIN], 20, check=False)
                if rc == 0 and any(ln.startswith("-A") for ln in rules.splitlines()):
                    out.append(f"{n}: packet-duplication rules")
            rc, qd, _ = self.run(n, ["tc", "qdisc", "show", "dev", self.iface(n)], 20, check=False)
            for kind in ("netem", "tbf"):
                if rc == 0 and kind in qd:
                    out.append(f"{n}: {kind} qdisc")
            if self.process_argv(n) is not None:
                status = self.daemon_status(n)
                if status != "running":
                    out.append(f"{n}: node process {status}")
            rc, text, _ = self.run(n, ["cat", self.clock_file(n)], 10, check=False)
            try:
                if rc == 0 and float(text.strip() or 0) != 0:
                    out.append(f"{n}: clock offset {text.strip()} s")
            except ValueError:
                out.append(f"{n}: unreadable clock offset {text.strip()!r}")
            return out

        return [line for lines in self._parallel(check, self.nodes()) for line in lines]

    def _blocked(self, node: str) -> set[str]:
        ipt = self.iptables(node)
        if ipt == "route":
            out = self.run(node, ["ip", "route", "show", "proto", ROUTE_PROTO], 20)[1]
            ips = {line.split()[1].split("/")[0] for line in out.splitlines() if line.strip()}
        else:
            rc, out, _ = self.run(node, [ipt, "-w", "-S", CHAIN], 20, check=False)
            ips = {ln.split()[3].split("/")[0] for ln in out.splitlines() if ln.startswith("-A") and rc == 0}
        return {n for n, i in self.info.items() if i.address in ips}

    def heal_network(self, nodes: Iterable[str] | None = None) -> None:
        """Removes every partition rule, fallback route and netem qdisc, then verifies none is left."""
        targets = list(nodes) if nodes is not None else self.nodes()
        errors: list[str] = []

        def heal(n: str) -> None:
            rc, out, err = self.run(
                n, ["sh", "-c", _HEAL_SH, "sh", self.iptables(n), self.iface(n)], 30, check=False
            )
            if rc != 0:
                errors.append(f"{n}: {(out + err).strip()}")

        self._parallel(heal, targets)
        if errors:
            raise ClusterError("heal left residue: " + "; ".join(errors))

    def netem(self, node: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        """Slow or lossy links on the node's interface; all zeros removes them. `packet` with only these
        three: where the kernel has no netem, loss falls back to iptables and delay raises a ClusterError."""
        self.packet(node, PacketShape(delay_ms=delay_ms, jitter_ms=jitter_ms, loss_pct=loss_pct))

    def packet_kinds(self, node: str) -> tuple[str, ...]:
        """The packet faults this node's kernel can do (PACKET_KINDS): delay and reorder need tc netem;
        loss and duplication fall back to iptables (statistic, TEE), a rate limit to tc tbf."""
        if node not in self._kinds:
            netem = (
                self.run(node, ["sh", "-c", _NETEM_PROBE_SH, "sh", self.iface(node)], 20)[1].strip()
                == "netem"
            )
            ipt = self.iptables(node) != "route"
            self._kinds[node] = tuple(
                k for k in PACKET_KINDS if netem or (k in ("loss", "duplicate") and ipt) or k == "rate"
            )
        return self._kinds[node]

    def packet(self, node: str, shape: PacketShape = PacketShape()) -> None:
        """Delays, reorders, drops, duplicates or rate-limits the node's outbound packets (inbound, for
        loss without netem); all zeros restores the link. A kind the kernel cannot do (packet_kinds)
        raises a ClusterError before anything changes."""
        wanted = shape.wanted()
        missing = [k for k, v in wanted.items() if v and k not in self.packet_kinds(node)]
        if missing:
            raise ClusterError(
                f"{node}: {', '.join(missing)} needs tc netem, which this kernel lacks "
                "(CONFIG_NET_SCH_NETEM); it can do " + ", ".join(self.packet_kinds(node))
            )
        ipt, dev = self.iptables(node), self.iface(node)
        self.run(node, ["sh", "-c", _CLEAR_PACKET_SH, "sh", ipt, dev], 30, step="clear packet faults")
        if not any(wanted.values()):
            return
        if "delay" in self.packet_kinds(node):  # the kernel has netem: one qdisc does it all
            s = shape
            argv = _tc_root(dev, "netem", "delay", f"{float(s.delay_ms):.3f}ms")
            argv += [f"{float(s.jitter_ms):.3f}ms"] if s.jitter_ms else []
            argv += ["loss", f"{float(s.loss_pct):.3f}%"] if s.loss_pct else []
            argv += ["duplicate", f"{float(s.duplicate_pct):.3f}%"] if s.duplicate_pct else []
            argv += ["reorder", f"{float(s.reorder_pct):.3f}%", "50%"] if s.reorder_pct else []
            argv += ["rate", f"{int(s.rate_kbit)}kbit"] if s.rate_kbit else []
            self.run(node, argv, 20, step="tc netem")
            return
        self._packet_without_netem(node, ipt, dev, shape.loss_pct, shape.duplicate_pct, shape.rate_kbit)

    def _packet_without_netem(
        self, node: str, ipt: str, dev: str, loss_pct: float, duplicate_pct: float, rate_kbit: float
    ) -> None:
        """Loss and duplication by iptables (statistic, TEE), a rate limit by tc tbf."""
        if loss_pct:
            self.run(
                node,
                ["sh", "-c", _LOSS_SH, "sh", ipt, dev, f"{min(float(loss_pct), 100) / 100:.4f}"],
                20,
                step="iptables statistic loss",
            )
        if duplicate_pct:
            peers = sorted(check_ip(i.address) for n, i in self.info.items() if n != node and i.address)
            self.run(
                node,
                ["sh", "-c", _DUP_SH, "sh", ipt, f"{min(float(duplicate_pct), 100) / 100:.4f}", *peers],
                20,
                step="iptables TEE duplication",
            )
        if rate_kbit:
            self.run(
                node,
                _tc_root(dev, "tbf", "rate", f"{int(rate_kbit)}kbit", "burst", "32kbit", "latency", "400ms"),
                20,
                step="tc tbf rate limit",
            )

    # ------------------------------------------------------------------ helpers
    def _parallel(self, fn, items: list, workers: int = 8) -> list:
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
            return list(pool.map(fn, items))

    def wait_port(self, node: str, target: str, port: int, timeout: float = 20) -> bool:
        """Whether `node` can open a TCP connection to target:port, retried until `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.can_connect(node, target, port, 2):
                return True
            time.sleep(0.2)
        return False

    def can_connect(self, node: str, target: str, port: int, timeout: float = 2) -> bool:
        """One TCP connect from `node` to target:port (target: node name, DNS name or address)."""
        code = (
            "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), "
            "float(sys.argv[3])).close()\nexcept OSError as e:\n print(e); sys.exit(1)"
        )
        rc, _, _ = self.remote.exec(
            node, [self.python(node), "-c", code, target, str(port), str(timeout)], timeout + 10
        )
        return rc == 0

    def describe(self) -> dict[str, Any]:
        """Plain data for `status` and test.json: nodes, roles, addresses, DNS names, daemon states."""
        return {
            "name": self.spec.name,
            "backend": self.kind,
            "spec": asdict(self.spec),
            "addresses": {r.role: r.addresses() for r in self.spec.roles},
            "nodes": [asdict(i) for i in self.info.values()],
        }

    def collect(self, dest: str | Path) -> list[Path]:
        """Copies each node's logs and data into dest/<node>/ (the run directory's nodes/), every node at
        once: the copies wait mostly on the nodes' disks and the transport, not on our cores."""
        from concurrent.futures import ThreadPoolExecutor

        dest = Path(dest)

        def one(node: str) -> Path:
            target = dest / node
            target.mkdir(parents=True, exist_ok=True)
            try:
                self.fetch_dir(node, self.node_dir(node), target)
            except Exception as exc:
                (target / "collect-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
            return target

        nodes = list(self.info)
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(nodes))), thread_name_prefix="collect") as pool:
            return list(pool.map(one, nodes))

    def fetch_dir(self, node: str, remote_dir: str, local_dir: Path) -> None:
        raise NotImplementedError
