"""A test as plain data, and one run's live handles: what every layer passes around.

`TestSpec` is frozen plain data: exactly what test.json holds, what campaigns and the CLI build and what
checkers read (as a dict). `Run` holds the live objects one run shares between the runner, its workloads,
its nemeses and its DB: the DB object, the cluster backend, the recorder, a client factory, and a scratch
`state` dict for facts learnt during the run (tables made, names used). `Op` (core/ops.py) is one event of a
history, the type generators, clients, nemeses and the recorder exchange. Standard library only.

`Run`'s handles are typed with the protocols of the layers that define them (db.api.DB,
cluster.api.ClusterBackend). Those names are imported for the type checker only (`TYPE_CHECKING`), so
core still imports nothing at run time; the layer contract ignores type-only imports
(docs/architecture.md, "Types where the layers meet").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from faultline.core.ops import Op, OpType, Process

if TYPE_CHECKING:
    from faultline.cluster.api import ClusterBackend
    from faultline.db.api import DB

__all__ = ["HistoryRecorder", "Op", "OpType", "Process", "Run", "TestSpec"]


class HistoryRecorder(Protocol):
    """What a run's recorder offers the rest of a run (controller/recorder.py implements it): the run's
    clock, and recording one op (numbered and flushed, as returned)."""

    def now(self) -> int: ...

    def record(self, op: Op) -> Op: ...


@dataclass(frozen=True)
class TestSpec:
    """One test, validated (controller/testspec.py builds it). Every field goes to test.json."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    workload: str
    db: str = "store"
    nemesis: tuple[str, ...] = ("none",)
    nemesis_interval: float = 10.0
    nemesis_opts: Mapping[str, Any] = field(default_factory=dict)  # the nemeses' options (--nemesis-opt K=V)
    bugs: tuple[str, ...] = ()
    seed: int = 0
    time_limit: float = 60.0
    concurrency: int = 10
    cluster: str = "docker"
    cluster_name: str = "faultline"
    test_count: int = 1
    op_timeout_s: float = 5.0
    quiet_period: float = 5.0
    final_time_limit: float = 120.0
    check_time_limit: float = 120.0
    setup_timeout_s: float = 60.0
    leave_cluster_running: bool = False
    reuse_cluster: bool = False
    workload_opts: Mapping[str, Any] = field(default_factory=dict)
    db_opts: Mapping[str, Any] = field(default_factory=dict)  # the DB's own options (--db-opt K=V)
    hosts_file: str | None = None
    cluster_spec: Mapping[str, Any] = field(default_factory=dict)
    # set when a run starts (`stamped`): when, and the tag that names this run's tables
    start_time: str = ""
    run_tag: str = ""

    def to_json(self) -> dict[str, Any]:
        """The test.json object (lists for tuples)."""
        out = dataclasses.asdict(self)
        out["nemesis"], out["bugs"] = list(self.nemesis), list(self.bugs)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestSpec:
        """From a test.json object; keys this version does not know (an older or newer run) are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("nemesis", "bugs"):
            if key in values:
                values[key] = tuple(values[key] or ())
        return cls(**values)

    def replace(self, **changes: Any) -> TestSpec:
        return dataclasses.replace(self, **changes)


@dataclass
class Run:
    """One run of a test: its spec and the live handles. Workloads, nemeses and DBs receive this."""

    spec: TestSpec
    db: DB
    backend: ClusterBackend
    connect: Callable[[], Any] | None = None  # a new client library object, connected to the cluster
    recorder: HistoryRecorder | None = None  # while the run records
    state: dict[str, Any] = field(default_factory=dict)
