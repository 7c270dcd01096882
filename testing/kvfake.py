"""A generic in-memory key-value DB and its cluster, for testing the harness itself without any real DB.

`faultline run --db faultline.testing.kvfake:KVFakeDB --cluster kvfake` (hidden from `--help`; the kind
registers when this module is imported, which choosing the DB does) runs the whole lifecycle against
`KVFakeBackend`: one in-memory table store behind a client that speaks the key-value API of
workloads/common.py (get, put, cas, batch, scan, create_table). Its faults make operations fail or end
indeterminate (sometimes after taking effect, as a real timeout can), drawn from the seed. It is
linearizable by construction (every op applies atomically under one lock) unless a bug is injected:
`stale-reads` makes reads during a fault return an older value, and `lose-writes` acknowledges some
writes and creates without storing them (a batch loses its last row); the checkers must catch both.

The runner, the generic workloads and the generic nemeses are tested on it, so they depend on no DB
plug-in; the store's own fake (dbs/store/fake.py) builds on these classes and adds the store's admin.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from faultline.cluster.api import ClusterBackend, PacketShape
from faultline.cluster.backends import BackendKind, register
from faultline.cluster.base import PACKET_KINDS, ClusterSpec, RoleSpec, fill_template
from faultline.core import Run
from faultline.db.process import PROCESS_NEMESES, ProcessDB

T = TypeVar("T")

ROLE = "kv"
PORT = 7000


class KVFakeUnavailable(Exception):
    """The operation definitely did not happen (refused before sending)."""

    definite = True


class KVFakeIndeterminate(Exception):
    """The outcome of a write is unknown (it may or may not have been applied)."""

    indeterminate = True


class KVFakeNotFound(Exception):
    definite = True


class KVFakeExists(Exception):
    definite = True


class RecordingRemote:
    """Runs nothing: records each command (the node side of a fault) and answers success, except on a
    node that does not exist (destroyed); files put are kept in memory."""

    def __init__(self, backend: KVFakeBackend) -> None:
        self.backend = backend
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        with self.backend.lock:
            self.calls.append((node, tuple(argv)))
        if self.backend.state.get(node, "destroyed") == "destroyed":  # a container exists unless destroyed
            return 1, "", f"{node} does not exist"
        return 0, "", ""

    def put(self, node: str, path: str, data: bytes) -> None:
        self.backend.files[(node, path)] = data

    def get(self, node: str, path: str) -> bytes:
        return self.backend.files.get((node, path), b"")


class KVFakeBackend:
    """Implements the ClusterBackend protocol in memory; fault state degrades the fake store's clients.
    Nodes, roles and DNS names come from the cluster spec `up` is given."""

    kind = "kvfake"

    def __init__(self, seed: int = 0, error_rate: float = 0.15, latency_s: float = 0.0005) -> None:
        self.lock = threading.RLock()
        self.remote = RecordingRemote(self)
        self.rng = random.Random(seed)
        self.error_rate = error_rate
        self.latency_s = latency_s
        self.bugs: set[str] = set()
        self.members: dict[str, list[str]] = {}  # role -> its nodes, destroyed ones included
        self.state: dict[str, str] = {}  # node -> running | stopped | killed | paused | destroyed
        self.dns: dict[str, str] = {}
        self.grudge: dict[str, set[str]] = {}
        self.clock: dict[str, float] = {}
        self.netems: dict[str, tuple[float, float, float]] = {}
        self.packets: dict[str, dict[str, float]] = {}
        self.files: dict[tuple[str, str], bytes] = {}
        self.events: list[tuple[str, str]] = []
        self.tables: dict[str, dict[str, Any]] = {}
        self.history_of: dict[tuple[str, Any], list[Any]] = {}
        self.is_up = False
        self.heal_delay_s = float(os.environ.get("FAULTLINE_FAKE_HEAL_DELAY", "0") or 0)
        # a pause that takes this long to land (as `docker exec` can): lets tests race the heal against it
        self.pause_delay_s = float(os.environ.get("FAULTLINE_FAKE_PAUSE_DELAY", "0") or 0)

    # ------------------------------------------------------------ lifecycle
    def up(self, spec: ClusterSpec | Mapping[str, Any]) -> None:
        """Brings up the nodes of a cluster spec as a DB writes it."""
        with self.lock:
            self.spec = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(spec)
            self.members = {r.role: [] for r in self.spec.roles}
            self.dns = {}
            for name, role, dns in self.spec.node_names():
                self.members[role].append(name)
                self.dns.update({d: name for d in dns})
            self.state = {n: "running" for n in self._every_node()}
            self.bugs = set(self.spec.db_opts.get("bugs") or [])
            self.is_up = True
            self.events.append(("up", ""))

    def down(self) -> None:
        with self.lock:
            self.is_up = False
            self.events.append(("down", ""))

    def _every_node(self) -> list[str]:
        """Every node ever made, in role order (destroyed ones included)."""
        return [n for nodes in self.members.values() for n in nodes]

    def nodes(self, role: str | None = None) -> list[str]:
        with self.lock:
            of_role = self.members.get(role or "", self._every_node())
            return [n for n in of_role if self.state.get(n) != "destroyed"]

    def up_nodes(self) -> list[str]:
        with self.lock:
            return [n for n, s in self.state.items() if s == "running"]

    def _set(self, node: str, state: str) -> None:
        with self.lock:
            if node not in self.state:
                raise KeyError(f"no node {node}")
            self.state[node] = state
            self.events.append((state, node))

    def start(self, node: str) -> None:
        self._set(node, "running")

    def stop(self, node: str) -> None:
        self._set(node, "stopped")

    def kill(self, node: str) -> None:
        self._set(node, "killed")

    def power_loss(self, node: str, restart: bool = True) -> dict[str, Any]:
        """A power cut; the fake keeps no per-node files, so nothing is cut."""
        self._set(node, "killed")
        if restart:
            self._set(node, "running")
        return {"truncated": {}, "deleted": [], "restored": []}

    def disk_layers(self, node: str) -> list[str]:
        """The fake keeps no files: no node has a disk layer."""
        return []

    def lose_unfsynced(self, node: str) -> dict[str, Any]:
        return {"files": [], "bytes": 0}

    def disk_checkpoint(self, node: str) -> dict[str, Any]:
        return {"files": [], "bytes": 0}

    def pause(self, node: str) -> None:
        if self.pause_delay_s:
            time.sleep(self.pause_delay_s)
        self._set(node, "paused")

    def resume(self, node: str) -> None:
        with self.lock:
            if self.state.get(node) == "paused":
                self._set(node, "running")

    def destroy(self, node: str) -> None:
        self._set(node, "destroyed")

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str:
        """A fresh node; without `role`, the role whose prefix its name starts with (else the last)."""
        with self.lock:
            roles = self.spec.roles
            role = role or next((r.role for r in roles if name.startswith(r.prefix)), roles[-1].role)
            self.members.setdefault(role, []).append(name)
            self.state[name] = "running" if start else "stopped"
            self.events.append(("add", name))
            return name

    def logs(self, node: str) -> str:
        return f"fake node {node}: {self.state.get(node)}\n"

    def daemon_status(self, node: str) -> str:
        """running | paused | stopped, as the real backends answer (killed and destroyed are stopped)."""
        with self.lock:
            state = self.state.get(node, "stopped")
        return state if state in ("running", "paused") else "stopped"

    def collect(self, dest: str | Path) -> list[Path]:
        """Each node's (one-line) log under dest/<node>/node.log, as the real backends copy node files."""
        out = []
        for node in self.nodes():
            d = Path(dest) / node
            d.mkdir(parents=True, exist_ok=True)
            (d / "node.log").write_text(self.logs(node), encoding="utf-8")
            out.append(d)
        return out

    # ------------------------------------------------------------ naming
    def set_dns(self, name: str, node: str) -> None:
        with self.lock:
            self.dns[name] = node
            self.events.append(("dns", f"{name}->{node}"))

    def resolve(self, name: str) -> str:
        return self.address(self.dns.get(name, name))

    def dns_holder(self, name: str) -> str | None:
        return self.dns.get(name)

    def address(self, node: str) -> str:
        return f"10.0.0.{sorted(self._every_node()).index(node) + 2}"

    def node_dir(self, node: str) -> str:
        return "/var/lib/faultline"

    def env_argv(self, node: str) -> list[str]:
        return ["env", "PYTHONPATH=/opt/faultline"]

    def python(self, node: str) -> str:
        return "python3"

    def expand(self, node: str, template: Sequence[str]) -> list[str]:
        """A role template filled in as the real backends do (the fake runs no processes)."""
        values = {
            "python": self.python(node),
            "dir": self.node_dir(node),
            "name": node,
            "address": self.address(node),
        }
        return fill_template(template, values, self.addresses)

    def addresses(self, role: str) -> list[str]:
        port = next((r.port for r in self.spec.roles if r.role == role), 0)
        return [f"{n}:{port}" for n in self.nodes(role)]

    # ------------------------------------------------------------ faults
    def partition(self, grudge: Mapping[str, Iterable[str]]) -> None:
        with self.lock:
            self.grudge = {a: set(bs) for a, bs in grudge.items() if bs}
            self.events.append(("partition", str(sorted(self.grudge))))

    def heal_network(self) -> None:
        if self.heal_delay_s:  # lets tests land a second Ctrl-C while healing
            time.sleep(self.heal_delay_s)
        with self.lock:
            self.grudge = {}
            self.netems = {}
            self.packets = {}
            self.events.append(("heal", ""))

    def netem(self, node: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        with self.lock:
            self.netems[node] = (delay_ms, jitter_ms, loss_pct)

    def packet_kinds(self, node: str) -> tuple[str, ...]:
        return PACKET_KINDS

    def packet(self, node: str, shape: PacketShape = PacketShape()) -> None:
        """Recorded only: the fake's links do not slow down."""
        params = {k: v for k, v in dataclasses.asdict(shape).items() if v}
        with self.lock:
            if params:
                self.packets[node] = params
            else:
                self.packets.pop(node, None)
            self.events.append(("packet", f"{node} {sorted(params.items())}"))

    def set_clock_offset(self, node: str, offset_s: float) -> None:
        with self.lock:
            self.clock[node] = offset_s

    def degraded(self) -> bool:
        with self.lock:
            return (
                bool(self.grudge)
                or any(s != "running" for n, s in self.state.items() if s != "destroyed")
                or any(self.clock.values())
            )

    def residue(self) -> list[str]:
        """What a run left behind: rules, paused or stopped nodes, clock offsets (should be empty)."""
        with self.lock:
            out = [f"grudge {sorted(self.grudge)}"] if self.grudge else []
            out += [f"{n} {s}" for n, s in self.state.items() if s not in ("running", "destroyed")]
            out += [f"clock {n} {o}" for n, o in self.clock.items() if o]
            out += [f"packet faults on {n}" for n in self.packets]
            return out

    def leader(self, role: str | None = None) -> str | None:
        """The fake's leader among `role`'s nodes (elections are instant): the first running one that is
        cut off from no majority of them, else None."""
        with self.lock:
            members = [n for n in self.members.get(role or "", self._every_node()) if n in self.state]
            running = [n for n in members if self.state[n] == "running"]
            live = [n for n in members if self.state[n] != "destroyed"]
            for n in running:
                if 2 * len([m for m in running if m not in self.grudge.get(n, set())]) > len(live):
                    return n
            return None

    # ------------------------------------------------------------ the store
    def client(self, *args: Any, **kwargs: Any) -> KVFakeClient:
        return KVFakeClient(self)


class KVFakeClient:
    """The key-value API (workloads/common.py) over the fake store. Thread-safe; every op is atomic under
    one lock. Its errors and the names of its bugs are class attributes, so a DB's own fake can raise its
    client library's errors."""

    Unavailable: type[Exception] = KVFakeUnavailable
    Indeterminate: type[Exception] = KVFakeIndeterminate
    NotFound: type[Exception] = KVFakeNotFound
    Exists: type[Exception] = KVFakeExists
    stale_reads_bug = "stale-reads"

    def __init__(self, backend: KVFakeBackend) -> None:
        self.b = backend
        self.rng = random.Random(backend.rng.random())

    # fault model: a degraded cluster refuses some ops and leaves some writes indeterminate
    def _enter(self, write: bool) -> str:
        if self.b.latency_s:
            time.sleep(self.rng.uniform(0, 2 * self.b.latency_s))
        if not self.b.degraded() or self.rng.random() >= self.b.error_rate:
            return "normal"
        if not write:
            raise self.Unavailable("no leader reachable (fake)")
        return self.rng.choice(["refuse", "lost-before", "lost-after"])

    def _write(self, apply: Callable[[], T]) -> T:
        mode = self._enter(True)
        if mode == "refuse":
            raise self.Unavailable("not the leader (fake)")
        if mode == "lost-before":
            raise self.Indeterminate("deadline exceeded (fake)")
        with self.b.lock:
            result = apply()
        if mode == "lost-after":
            raise self.Indeterminate("connection lost after sending (fake)")
        return result

    def _rows(self, table: str) -> dict[Any, Any]:
        t = self.b.tables.get(table)
        if t is None:
            raise self.NotFound(f"table {table} not found")
        rows: dict[Any, Any] = t["rows"]
        return rows

    def _set_row(self, table: str, key: Any, value: Any) -> None:
        self._rows(table)[key] = value
        self.b.history_of.setdefault((table, key), []).append(value)

    def create_table(self, name: str, num_tablets: int = 3, replication: int = 3, **_: Any) -> str:
        """The client's create_table; its `timeout` and `wait` mean nothing here: the table is there at once."""

        def apply() -> str:
            if name in self.b.tables:
                raise self.Exists(f"table {name} already exists")
            if "lose-writes" in self.b.bugs and self.rng.random() < 0.2:
                return f"id-{name}"  # acknowledged, never stored
            self.b.tables[name] = {"rows": {}, "schema_version": 0, "num_tablets": num_tablets}
            return f"id-{name}"

        return self._write(apply)

    def list_tables(self, timeout: float | None = None) -> list[str]:
        self._enter(False)
        with self.b.lock:
            return sorted(self.b.tables)

    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        self._enter(False)
        with self.b.lock:
            rows = self._rows(table)
            value = rows.get(key)
            if self.stale_reads_bug in self.b.bugs and self.b.degraded():
                past = self.b.history_of.get((table, key), [])
                if len(past) >= 2 and self.rng.random() < 0.5:
                    value = self.rng.choice(past[:-1])
            return value

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        self.batch(table, [("put", key, value)], timeout)

    def delete(self, table: str, key: Any, timeout: float | None = None) -> None:
        self.batch(table, [("delete", key)], timeout)

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        applied: bool = self.batch(table, [("cas", key, expected, new)], timeout)[0][0]
        return applied

    def batch(
        self, table: str, ops: Sequence[tuple[Any, ...]], timeout: float | None = None
    ) -> list[tuple[bool, Any]]:
        """("put", k, v), ("delete", k), ("cas", k, expected, new): all apply or none (one tablet here)."""

        def apply() -> list[tuple[bool, Any]]:
            rows = self._rows(table)
            prev = [rows.get(o[1]) for o in ops]
            if any(o[0] == "cas" and rows.get(o[1]) != o[2] for o in ops):
                return [(False, p) for p in prev]
            if "lose-writes" in self.b.bugs and self.rng.random() < 0.1:
                ops_applied = list(ops)[:-1]  # acknowledge all, apply all but the last (a torn, lossy write)
            else:
                ops_applied = list(ops)
            for o in ops_applied:
                if o[0] == "put":
                    self._set_row(table, o[1], o[2])
                elif o[0] == "delete" or (o[0] == "cas" and o[3] is None):
                    rows.pop(o[1], None)
                    self.b.history_of.setdefault((table, o[1]), []).append(None)
                else:
                    self._set_row(table, o[1], o[3])
            return [(True, p) for p in prev]

        return self._write(apply)

    def scan(
        self, table: str, start: Any = None, end: Any = None, timeout: float | None = None
    ) -> list[tuple[Any, ...]]:
        self._enter(False)
        with self.b.lock:
            return sorted(self._rows(table).items(), key=lambda kv: (isinstance(kv[0], str), kv[0]))

    def close(self) -> None:
        pass


class KVFakeDB(ProcessDB):
    """The DB that runs on the `kvfake` cluster: the generic key-value workloads, the process and network
    faults (Kill, Pause, Primaries: its leader is the backend's), and two bugs for the checkers to catch."""

    name = "kvfake"
    workloads = frozenset({"register", "set", "bank"})
    nemeses: frozenset[str] | None = PROCESS_NEMESES | {"clock"}
    options = {"nodes": "how many nodes (default 5)"}
    bugs = {
        "stale-reads": "reads during a fault may return an older value",
        "lose-writes": "some acknowledged writes and creates are never stored",
    }

    def validate(self, opts: Mapping[str, Any]) -> None:
        if int(opts.get("nodes", 5)) < 1:
            raise ValueError("the kvfake DB needs at least one node")

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        return ClusterSpec.from_mapping(
            {
                "name": name,
                "roles": [RoleSpec(ROLE, int(opts.get("nodes", 5)), "n", PORT)],
                "db": self.name,
                "db_opts": {"bugs": sorted(map(str, opts.get("bugs") or []))},
            }
        )

    def setup(self, test: Run, node: str) -> None:
        """Nothing to wait for: the fake serves as soon as it is up."""

    def primaries(self, test: Run) -> list[str]:
        leader = _fake(test).leader()
        return [leader] if leader else []

    def log_files(self, test: Run, node: str) -> list[str]:
        return []

    def connector(self, test: Run) -> Callable[[], Any]:
        return _fake(test).client


def _fake(test: Run) -> KVFakeBackend:
    b = test.backend
    if not isinstance(b, KVFakeBackend):
        raise RuntimeError(f"the kvfake DB runs on the kvfake cluster only, not {type(b).__name__}")
    return b


def kv_spec(nodes: int = 5, bugs: Sequence[str] = ()) -> ClusterSpec:
    """The kvfake DB's cluster spec for `nodes` nodes (what `up` takes)."""
    return KVFakeDB().cluster_spec("kvfake", {"nodes": nodes, "bugs": list(bugs)})


def kv_run(backend: KVFakeBackend | None = None, nodes: int = 5, **spec: Any) -> Run:
    """A run of the kvfake DB on a fake cluster (brought up with `nodes` nodes and the spec's bugs when
    `backend` is None), for tests of nemeses and workloads: `spec` sets TestSpec fields."""
    from faultline.core import TestSpec

    fields = {"name": "kvfake", "db": DB_PATH, "workload": "register", "cluster": "kvfake", **spec}
    test = TestSpec(**fields)
    if backend is None:
        backend = KVFakeBackend(seed=test.seed)
        backend.up(kv_spec(nodes, list(test.bugs)))
    return Run(test, KVFakeDB(), backend, connect=backend.client)


def _make(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend:
    return KVFakeBackend(seed=seed)


DB_PATH = "faultline.testing.kvfake:KVFakeDB"  # what `--db` names it by
# `--cluster kvfake`: the generic fake, for testing the harness itself (hidden from --help)
register(BackendKind("kvfake", _make, hidden=True, default_quiet_period_s=0.2, dbs=frozenset({"kvfake"})))
