"""An in-memory cluster for testing the runner, workloads and nemeses without containers.

`faultline run --cluster fake` (hidden from `--help`; for tests and demos of the harness itself; registered
as a cluster backend by this plug-in) runs the
whole lifecycle against `FakeBackend`: the generic in-memory key-value fake (testing/kvfake.py) laid out
as the store (masters under movable DNS names, tablet servers), behind a client with the node client's
method names and errors, whose faults make operations fail or end indeterminate (sometimes after taking
effect, as a real timeout can). Its admin (`FakeAdmin`) answers the store's admin protocol
(dbs/store/admin.py) from this state and records each action in `calls`. It is linearizable by construction (every op applies atomically under one lock),
unless a bug is injected: `stale-leader-reads` makes reads during a fault return an older value, which
the linearizability checker must catch; `lose-writes` (fake only, for tests) acknowledges some writes and
creates without storing them (a batch loses its last row), which the set, bank and catalog checkers must
catch. It is NOT a model of the real store's behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from faultline.cluster.base import ClusterSpec
from faultline.core import Run, TestSpec
from faultline.dbs.store.admin import ConfigChange, ToolResult
from faultline.dbs.store.db import StoreDB
from faultline.dbs.store.layout import MASTER, MASTER_PORT, TSERVER, TSERVER_PORT
from faultline.node.client import (
    AlreadyExistsError,
    IndeterminateError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from faultline.node.tool.output import MasterRow, ReplicaRow, TableRow, TabletRow
from faultline.testing.kvfake import KVFakeBackend, KVFakeClient, RecordingRemote

FakeRemote = RecordingRemote  # the fake's Remote: records commands, runs none


class FakeIndeterminate(IndeterminateError):
    """The outcome of a write is unknown (it may or may not have been applied)."""


class FakeUnavailable(UnavailableError):
    """The operation definitely did not happen (refused before sending)."""


def fake_run(backend: FakeBackend | None = None, **spec: Any) -> Run:
    """A run of the store on a fake cluster (brought up with the spec's sizes when `backend` is None),
    for tests of nemeses and workloads: `spec` sets TestSpec fields (seed, bugs, ...) and the
    store's sizes (masters, tservers: its DB options)."""
    sizes = {k: spec.pop(k) for k in ("masters", "tservers") if k in spec}  # the store's DB options
    fields = {"name": "fake", "workload": "register", "cluster": "fake", **spec}
    fields["db_opts"] = {**fields.get("db_opts", {}), **sizes}
    test = TestSpec(**fields)
    if backend is None:
        backend = FakeBackend(seed=test.seed)
        opts = test.db_opts
        backend.up(store_spec(opts.get("masters", 3), opts.get("tservers", 5), list(test.bugs)))
    return Run(test, StoreDB(), backend, connect=backend.client)


def store_spec(masters: int = 3, tservers: int = 5, bugs: list[str] | None = None) -> ClusterSpec:
    """The store's cluster spec for a fake cluster of this size (what `up` takes)."""
    return StoreDB().cluster_spec("fake", {"masters": masters, "tservers": tservers, "bugs": bugs or []})


class FakeAdmin:
    """The store's admin protocol (dbs/store/admin.py) answered from the fake's state: what the real tools
    would report of it, and the few actions that change it (a leadership handover, a formatted uuid).
    Every action is recorded in `calls` as (node, action, its arguments), for the tests."""

    def __init__(self, backend: FakeBackend) -> None:
        self.b = backend
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def _ran(self, node: str, action: str, **args: Any) -> ToolResult | None:
        """Records the action; a failed result when `node` does not exist (destroyed), else None."""
        with self.b.lock:
            self.calls.append((node, action, args))
        if self.b.state.get(node, "destroyed") == "destroyed":
            return ToolResult(1, "", f"{node} does not exist", action)
        return None

    def master_list(self, runner: str, masters: str, timeout: float) -> list[MasterRow]:
        return [] if self._ran(runner, "master_list", masters=masters) else self.b.master_rows()

    def table_list(self, runner: str, masters: str, timeout: float) -> list[TableRow]:
        return [] if self._ran(runner, "table_list", masters=masters) else self.b.table_rows()

    def ksck(self, runner: str, masters: str, timeout: float) -> tuple[bool, dict[str, Any]]:
        refused = self._ran(runner, "ksck", masters=masters)
        if refused:
            return False, {"problems": [refused.err]}
        report = self.b.ksck_report()
        return bool(report["healthy"]), report

    def leader_step_down(
        self, runner: str, masters: str, tablet: str, new_leader: str | None, timeout: float
    ) -> ToolResult:
        args = {"masters": masters, "tablet": tablet, "new_leader": new_leader}
        refused = self._ran(runner, "leader_step_down", **args)
        if refused or new_leader is None:
            return refused or ToolResult(0, "", "")
        self.b.hand_master_leadership(new_leader)
        return ToolResult(0, "stepping down\n", "")

    def change_config(self, runner: str, masters: str, change: ConfigChange, timeout: float) -> ToolResult:
        return self._ran(runner, "change_config", masters=masters, change=change) or ToolResult(0, "", "")

    def unsafe_change_config(
        self, runner: str, server: str, tablet: str, uuids: Sequence[str], timeout: float
    ) -> ToolResult:
        args = {"server": server, "tablet": tablet, "uuids": list(uuids)}
        return self._ran(runner, "unsafe_change_config", **args) or ToolResult(0, "", "")

    def fs_format(self, node: str, fs_dir: str, uuid: str | None, timeout: float) -> ToolResult:
        refused = self._ran(node, "fs_format", fs_dir=fs_dir, uuid=uuid)
        if refused is None and uuid is not None:
            with self.b.lock:
                self.b.formatted_uuids[node] = uuid
        return refused or ToolResult(0, "", "")

    def fs_uuid(self, node: str, fs_dir: str, timeout: float) -> ToolResult:
        return self._ran(node, "fs_uuid", fs_dir=fs_dir) or ToolResult(0, f"{self.b.uuid(node)}\n", "")

    def rewrite_raft_config(
        self, node: str, tablet: str, peers: Sequence[str], fs_dir: str, timeout: float
    ) -> ToolResult:
        args = {"tablet": tablet, "peers": list(peers), "fs_dir": fs_dir}
        return self._ran(node, "rewrite_raft_config", **args) or ToolResult(0, "", "")

    def copy_from_remote(
        self, node: str, tablet: str, source: str, fs_dir: str, bugs: Sequence[str], timeout: float
    ) -> ToolResult:
        args = {"tablet": tablet, "source": source, "fs_dir": fs_dir, "bugs": list(bugs)}
        return self._ran(node, "copy_from_remote", **args) or ToolResult(0, "", "")


class FakeBackend(KVFakeBackend):
    """The generic in-memory cluster laid out as the store, with the store's admin (`store_admin`)."""

    kind = "fake"

    def __init__(self, seed: int = 0, error_rate: float = 0.15, latency_s: float = 0.0005) -> None:
        super().__init__(seed=seed, error_rate=error_rate, latency_s=latency_s)
        self.store_admin = FakeAdmin(self)
        self.preferred_leader: str | None = None
        self.formatted_uuids: dict[str, str] = {}  # `fs format --uuid`: a replacement takes the dead's uuid
        # master nodes whose catalog stays behind the leader's for good (a store that cannot catch them up);
        # a node rebuilt under the same name starts from the leader's copy and is caught up
        self.lagging_masters: set[str] = set()

    @property
    def masters(self) -> list[str]:
        return self.members.get(MASTER, [])

    @property
    def tservers(self) -> list[str]:
        return self.members.get(TSERVER, [])

    def addresses(self, role: str) -> list[str]:
        return (
            [f"{name}:{MASTER_PORT}" for name in sorted(self.dns)]
            if role == MASTER
            else [f"{n}:{TSERVER_PORT}" for n in self.nodes(TSERVER)]
        )

    # ------------------------------------------------------------ what the admin tools report
    def uuid(self, node: str) -> str:
        if node in self.formatted_uuids:
            return self.formatted_uuids[node]
        return f"{sorted(self.masters + self.tservers).index(node) + 1:032x}"

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

    def _replica(self, node: str, leads: bool) -> ReplicaRow:
        role = "LEADER" if leads else "FOLLOWER"
        return ReplicaRow(uuid=self.uuid(node), addr=f"{self.address(node)}:7050", role=role, voter=True)

    def table_rows(self) -> list[TableRow]:
        """What `tool table list --tablets` reports: one tablet per table, led by its first replica."""
        with self.lock:
            return [
                TableRow(
                    name=table,
                    tablets=[
                        TabletRow(
                            tablet_id=tablet,
                            partition=0,
                            state="RUNNING",
                            replicas=[self._replica(r, j == 0) for j, r in enumerate(reps)],
                        )
                    ],
                )
                for table, tablet, reps in self._placement()
            ]

    def ksck_report(self) -> dict[str, Any]:
        """`tool cluster ksck --json`: tablet servers with uuid and address, health."""
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
            tables = {t: 1 for t in self.tables}
            return {"healthy": healthy, "problems": [], "tservers": ts, "masters": [], "tables": tables}

    # ------------------------------------------------------------ the store
    def store_client(self) -> FakeClient:
        """A client of the in-memory store, which the store DB's `connector` hands out on this backend."""
        return self.client()

    def client(self, *args: Any, **kwargs: Any) -> FakeClient:
        return FakeClient(self)


class FakeClient(KVFakeClient):
    """The node client's surface, over the fake store: the generic fake's key-value API with the node
    client's errors, and the masters' catalog."""

    Unavailable = FakeUnavailable
    Indeterminate = FakeIndeterminate
    NotFound = NotFoundError
    Exists = AlreadyExistsError
    stale_reads_bug = "stale-leader-reads"
    b: FakeBackend

    def __init__(self, backend: FakeBackend) -> None:
        super().__init__(backend)
        self.masters = [f"{name}:{MASTER_PORT}" for name in sorted(backend.dns)]

    def catalog_replica(self, addr: str, timeout: float = 2.0) -> Any:
        """Each running master's catalog replica: caught up (index 7), except the backend's
        `lagging_masters`, which hold only index 2 of it."""
        node = self.b.dns.get(addr.rsplit(":", 1)[0])
        if self.b.state.get(node or "") != "running":
            raise ConnectionError(f"{addr} does not answer")
        leader = any(m["addr"] == addr and m["role"] == "LEADER" for m in self.b.master_rows())
        behind = node in self.b.lagging_masters and not leader
        index = 2 if behind else 7
        return SimpleNamespace(
            role="LEADER" if leader else "FOLLOWER",
            term=1,
            last_index=index,
            commit_index=index,
            applied_index=index,
        )

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
