"""An in-memory cluster for testing the runner, workloads and nemeses without containers.

`faultline run --cluster fake` (hidden from `--help`; for tests and demos of the harness itself; registered
as a cluster backend by this plug-in) runs the
whole lifecycle against `FakeBackend`: a single in-memory store behind a client with the node client's
method names, whose faults make operations fail or end indeterminate (sometimes after taking effect, as
a real timeout can). It is linearizable by construction (every op applies atomically under one lock),
unless a bug is injected: `stale-leader-reads` makes reads during a fault return an older value, which
the linearizability checker must catch; `lose-writes` (fake only, for tests) acknowledges some writes and
creates without storing them (a batch loses its last row), which the set, bank and catalog checkers must
catch. It is NOT a model of the real store's behaviour.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from faultline.cluster.base import PACKET_KINDS, ClusterSpec, fill_template
from faultline.core import Run, TestSpec
from faultline.dbs.store.db import StoreDB
from faultline.dbs.store.layout import MASTER, MASTER_PORT, TSERVER, TSERVER_PORT, master_dns
from faultline.node.client import (
    AlreadyExistsError,
    IndeterminateError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from faultline.node.tool.output import (
    MasterRow,
    ReplicaRow,
    TableRow,
    TabletRow,
    format_master_list,
    format_table_list,
)

T = TypeVar("T")


class FakeIndeterminate(IndeterminateError):
    """The outcome of a write is unknown (it may or may not have been applied)."""


class FakeUnavailable(UnavailableError):
    """The operation definitely did not happen (refused before sending)."""


class FakeRemote:
    """Answers the admin tool invocations the nemeses make, and records them for the tests."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        argv = tuple(argv)
        with self.backend.lock:
            self.calls.append((node, argv))
        if self.backend.state.get(node, "destroyed") == "destroyed":  # a container exists unless destroyed
            return 1, "", f"{node} does not exist"
        words = list(argv[argv.index("tool") + 1 :]) if "tool" in argv else list(argv)
        if words[:2] == ["cluster", "ksck"]:
            text = self.backend.ksck_json()
            return (0 if '"healthy": true' in text else 1), text, ""
        if words[:2] == ["master", "list"]:
            return 0, format_master_list(self.backend.master_rows(), "--json" in words), ""
        if words[:2] == ["table", "list"]:
            return 0, format_table_list(self.backend.table_rows("--tablets" in words), "--json" in words), ""
        if words[:2] == ["tablet", "leader_step_down"] and "--new-leader" in words:
            self.backend.hand_master_leadership(words[words.index("--new-leader") + 1])
            return 0, "stepping down\n", ""
        if words[:2] == ["fs", "format"] and "--uuid" in words:
            with self.backend.lock:
                self.backend.formatted_uuids[node] = words[words.index("--uuid") + 1]
        if words[:3] == ["fs", "dump", "uuid"]:
            return 0, f"{self.backend.uuid(node)}\n", ""
        return 0, "", ""

    def put(self, node: str, path: str, data: bytes) -> None:
        self.backend.files[(node, path)] = data

    def get(self, node: str, path: str) -> bytes:
        return self.backend.files.get((node, path), b"")


def fake_run(backend: FakeBackend | None = None, **spec: Any) -> Run:
    """A run of the store on a fake cluster (brought up with the spec's sizes when `backend` is None),
    for tests of nemeses and workloads: `spec` sets TestSpec fields (seed, masters, bugs, ...)."""
    fields = {"name": "fake", "workload": "register", "cluster": "fake", **spec}
    test = TestSpec(**fields)
    if backend is None:
        backend = FakeBackend(seed=test.seed)
        backend.up(store_spec(test.masters, test.tservers, list(test.bugs)))
    return Run(test, StoreDB(), backend, connect=backend.client)


def store_spec(masters: int = 3, tservers: int = 5, bugs: list[str] | None = None) -> ClusterSpec:
    """The store's cluster spec for a fake cluster of this size (what `up` takes)."""
    return StoreDB().cluster_spec("fake", {"masters": masters, "tservers": tservers, "bugs": bugs or []})


class FakeBackend:
    """Implements the ClusterBackend protocol in memory; fault state degrades the fake store's clients."""

    kind = "fake"

    def __init__(self, seed: int = 0, error_rate: float = 0.15, latency_s: float = 0.0005) -> None:
        self.lock = threading.RLock()
        self.remote = FakeRemote(self)
        self.preferred_leader: str | None = None
        self.formatted_uuids: dict[str, str] = {}  # `fs format --uuid`: a replacement takes the dead's uuid
        # master nodes whose catalog stays behind the leader's for good (a store that cannot catch them up);
        # a node rebuilt under the same name starts from the leader's copy and is caught up
        self.lagging_masters: set[str] = set()
        self.rng = random.Random(seed)
        self.error_rate = error_rate
        self.latency_s = latency_s
        self.bugs: set[str] = set()
        self.masters: list[str] = []
        self.tservers: list[str] = []
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
        """Brings up the store's layout from a cluster spec as the store DB writes it (dbs/store.py)."""
        with self.lock:
            self.spec = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(spec)
            n_m, n_t = self.spec.role(MASTER).count, self.spec.role(TSERVER).count
            self.masters = [f"m{i}" for i in range(1, n_m + 1)]
            self.tservers = [f"t{i}" for i in range(1, n_t + 1)]
            self.state = {n: "running" for n in self.masters + self.tservers}
            self.dns = {master_dns(i): f"m{i}" for i in range(1, n_m + 1)}
            self.bugs = set(self.spec.db_opts.get("bugs") or [])
            self.is_up = True
            self.events.append(("up", ""))

    def down(self) -> None:
        with self.lock:
            self.is_up = False
            self.events.append(("down", ""))

    def nodes(self, role: str | None = None) -> list[str]:
        with self.lock:
            of_role = {MASTER: self.masters, TSERVER: self.tservers}.get(
                role or "", self.masters + self.tservers
            )
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
        """A power cut; the fake store keeps no per-node files, so nothing is cut."""
        self._set(node, "killed")
        if restart:
            self._set(node, "running")
        return {"truncated": {}, "deleted": [], "restored": []}

    def disk_layers(self, node: str) -> list[str]:
        """The fake store keeps no files: no node has a disk layer."""
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
        with self.lock:
            role = role or ("master" if name.startswith("m") else "tserver")
            (self.masters if role == "master" else self.tservers).append(name)
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
        return (
            [f"{name}:{MASTER_PORT}" for name in sorted(self.dns)]
            if role == MASTER
            else [f"{n}:{TSERVER_PORT}" for n in self.nodes(TSERVER)]
        )

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

    def packet(self, node: str, **params: float) -> None:
        """Recorded only: the fake's links do not slow down."""
        with self.lock:
            if any(params.values()):
                self.packets[node] = dict(params)
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

    # ------------------------------------------------------------ tool output, printed by the real tools' formatters
    def uuid(self, node: str) -> str:
        if node in self.formatted_uuids:
            return self.formatted_uuids[node]
        return f"{sorted(self.masters + self.tservers).index(node) + 1:032x}"

    def address(self, node: str) -> str:
        return f"10.0.0.{sorted(self.masters + self.tservers).index(node) + 2}"

    def master_rows(self) -> list[MasterRow]:
        """What `tool master list` reports: one row per master DNS name, as node/tool/output.py prints it."""
        with self.lock:
            running = [n for n in self.masters if self.state.get(n) == "running"]
            # a master cut off from the majority cannot lead (the fake's elections are instant)
            able = [
                n
                for n in running
                if 2 * len([m for m in running if m not in self.grudge.get(n, set())]) > len(self.dns)
            ]
            leader = self.preferred_leader if self.preferred_leader in able else (able[0] if able else None)
            return [
                MasterRow(
                    uuid=self.uuid(node),
                    addr=f"{name}:{MASTER_PORT}",
                    role="LEADER" if node == leader else "FOLLOWER",
                    voter=True,
                )
                for name, node in sorted(self.dns.items())
            ]

    def hand_master_leadership(self, uuid: str) -> None:
        """`tablet leader_step_down SYS --new-leader UUID`: the master with that uuid leads while it runs."""
        with self.lock:
            self.preferred_leader = next(
                (n for n in self.masters if self.uuid(n) == uuid and self.state.get(n) == "running"), None
            )

    def _placement(self) -> list[tuple[str, str, list[str]]]:
        live = [t for t in self.tservers if self.state.get(t) == "running"]
        out = []
        for i, table in enumerate(sorted(self.tables)):
            reps = (live[i:] + live[:i])[:3]
            out.append((table, f"{i + 1:032x}", reps))
        return out

    def table_rows(self, tablets: bool = True) -> list[TableRow]:
        """What `tool table list [--tablets]` reports: one tablet per table, led by its first replica."""
        with self.lock:
            out = []
            for table, tablet, reps in self._placement():
                row = TableRow(name=table)
                if tablets:
                    row["tablets"] = [
                        TabletRow(
                            tablet_id=tablet,
                            partition=0,
                            state="RUNNING",
                            replicas=[
                                ReplicaRow(
                                    uuid=self.uuid(r),
                                    addr=f"{self.address(r)}:7050",
                                    role="LEADER" if j == 0 else "FOLLOWER",
                                    voter=True,
                                )
                                for j, r in enumerate(reps)
                            ],
                        )
                    ]
                out.append(row)
            return out

    def ksck_json(self) -> str:
        """`tool cluster ksck --json`: tablet servers with uuid and address, health."""
        import json

        with self.lock:
            ts = [
                {
                    "uuid": self.uuid(t),
                    "addr": f"{self.address(t)}:7050",
                    "live": self.state.get(t) == "running",
                }
                for t in self.tservers
                if self.state.get(t) != "destroyed"
            ]
            healthy = all(t["live"] for t in ts) and not self.grudge
            return json.dumps(
                {
                    "healthy": healthy,
                    "problems": [],
                    "tservers": ts,
                    "masters": [],
                    "tables": {t: 1 for t in self.tables},
                }
            )

    # ------------------------------------------------------------ the store
    def store_client(self) -> FakeClient:
        """A client of the in-memory store, which the store DB's `connector` hands out on this backend."""
        return self.client()

    def client(self, *args: Any, **kwargs: Any) -> FakeClient:
        return FakeClient(self)


class FakeClient:
    """The node client's surface, over the fake store. Thread-safe; every op is atomic under one lock."""

    def __init__(self, backend: FakeBackend) -> None:
        self.b = backend
        self.rng = random.Random(backend.rng.random())
        self.masters = [f"{name}:{MASTER_PORT}" for name in sorted(backend.dns)]

    def catalog_replica(self, addr: str, timeout: float = 2.0) -> Any:
        """Each running master's catalog replica: caught up (index 7), except the backend's
        `lagging_masters`, which hold only index 2 of it."""
        node = self.b.dns.get(addr.rsplit(":", 1)[0])
        if self.b.state.get(node or "") != "running":
            raise ConnectionError(f"{addr} does not answer")
        leader = any(m["addr"] == addr and m["role"] == "LEADER" for m in self.b.master_rows())
        behind = node in self.b.lagging_masters and not leader
        return SimpleNamespace(
            role="LEADER" if leader else "FOLLOWER",
            term=1,
            last_index=2 if behind else 7,
            commit_index=2 if behind else 7,
            applied_index=2 if behind else 7,
        )

    # fault model: a degraded cluster refuses some ops and leaves some writes indeterminate
    def _enter(self, write: bool) -> str:
        if self.b.latency_s:
            time.sleep(self.rng.uniform(0, 2 * self.b.latency_s))
        if not self.b.degraded() or self.rng.random() >= self.b.error_rate:
            return "normal"
        if not write:
            raise FakeUnavailable("no leader reachable (fake)")
        return self.rng.choice(["refuse", "lost-before", "lost-after"])

    def _write(self, apply: Callable[[], T]) -> T:
        mode = self._enter(True)
        if mode == "refuse":
            raise FakeUnavailable("not the leader (fake)")
        if mode == "lost-before":
            raise FakeIndeterminate("deadline exceeded (fake)")
        with self.b.lock:
            result = apply()
        if mode == "lost-after":
            raise FakeIndeterminate("connection lost after sending (fake)")
        return result

    def _rows(self, table: str) -> dict[Any, Any]:
        t = self.b.tables.get(table)
        if t is None:
            raise NotFoundError(f"table {table} not found")
        rows: dict[Any, Any] = t["rows"]
        return rows

    def _set_row(self, table: str, key: Any, value: Any) -> None:
        self._rows(table)[key] = value
        self.b.history_of.setdefault((table, key), []).append(value)

    # tables (the node client's signatures)
    def create_table(
        self,
        name: str,
        num_tablets: int = 3,
        replication: int = 3,
        timeout: float | None = None,
        wait: bool = True,
    ) -> str:
        def apply() -> str:
            if name in self.b.tables:
                raise AlreadyExistsError(f"table {name} already exists")
            if "lose-writes" in self.b.bugs and self.rng.random() < 0.2:
                return f"id-{name}"  # acknowledged, never stored
            self.b.tables[name] = {"rows": {}, "schema_version": 0, "num_tablets": num_tablets}
            return f"id-{name}"

        return self._write(apply)

    def delete_table(self, name: str, timeout: float | None = None) -> None:
        def apply() -> None:
            if name not in self.b.tables:
                raise NotFoundError(f"table {name} not found")
            del self.b.tables[name]

        self._write(apply)

    def alter_table(self, name: str, schema_version: int, timeout: float | None = None) -> int:
        def apply() -> int:
            t = self.b.tables.get(name)
            if t is None:
                raise NotFoundError(f"table {name} not found")
            if schema_version <= t["schema_version"]:
                raise InvalidArgumentError(f"schema version must grow beyond {t['schema_version']}")
            t["schema_version"] = schema_version
            return schema_version

        return self._write(apply)

    def list_tables(self, timeout: float | None = None) -> list[str]:
        self._enter(False)
        with self.b.lock:
            return sorted(self.b.tables)

    def table_info(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        self._enter(False)
        with self.b.lock:
            t = self.b.tables.get(name)
            if t is None:
                raise NotFoundError(f"table {name} not found")
            return {
                "table_id": f"id-{name}",
                "name": name,
                "num_tablets": t.get("num_tablets", 1),
                "replication": 3,
                "schema_version": t["schema_version"],
            }

    def table_locations(self, name: str, timeout: float | None = None) -> Any:
        """Every tablet led by its first replica (the fake has no tablet servers to lose track of)."""
        info = self.table_info(name, timeout)
        return SimpleNamespace(
            tablets=[
                SimpleNamespace(
                    tablet_id=f"{info['table_id']}-{i}",
                    state="RUNNING",
                    replicas=[SimpleNamespace(role="LEADER"), SimpleNamespace(role="FOLLOWER")],
                )
                for i in range(int(info["num_tablets"]))
            ]
        )

    # rows
    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        self._enter(False)
        with self.b.lock:
            rows = self._rows(table)
            value = rows.get(key)
            if "stale-leader-reads" in self.b.bugs and self.b.degraded():
                past = self.b.history_of.get((table, key), [])
                if len(past) >= 2 and self.rng.random() < 0.5:
                    value = self.rng.choice(past[:-1])
            return value

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        self.batch(table, [("put", key, value)], timeout)

    def delete(self, table: str, key: Any, timeout: float | None = None) -> None:
        self.batch(table, [("delete", key)], timeout)

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        return self.batch(table, [("cas", key, expected, new)], timeout)[0][0]

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
