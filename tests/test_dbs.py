"""The DB seam: DBs by name or import path, what a DB decides (which nodes clients talk to, what runs on
the hosts), and one-line refusals of DBs, workloads and nemeses that do not fit."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faultline.controller import testspec
from faultline.controller.errors import UsageError
from faultline.controller.runner import run_test
from faultline.dbs import UnknownDB, get_db
from faultline.dbs.store import MASTER, TSERVER, StoreDB
from faultline.nemesis.registry import compose
from faultline.testing.fake import FakeBackend
from faultline.workloads.registry import get as get_workload


def test_dbs_by_name_and_by_import_path() -> None:
    assert isinstance(get_db(None), StoreDB) and isinstance(get_db("store"), StoreDB)
    assert isinstance(get_db("faultline.dbs.store:StoreDB"), StoreDB)
    for bad, says in (("nope", "unknown DB 'nope'"), ("no.such.module:X", "cannot import"),
                      ("faultline.dbs.store:Nope", "has no Nope"), ("json:loads", "is not a DB")):
        with pytest.raises(UnknownDB, match=says):
            get_db(bad)


class _ClientsOnMasters(StoreDB):
    """A DB that sends its clients to the masters (any rule a DB likes)."""

    name = "masters-clients"

    def client_nodes(self, test: Any) -> list[str]:
        return test.backend.nodes(MASTER)


class _Recording:
    """Wraps a workload client and notes the node each worker's client was opened on."""

    def __init__(self, inner: Any, seen: list[str]) -> None:
        self.inner, self.seen = inner, seen

    def setup(self, test: Any) -> None:
        self.inner.setup(test)

    def open(self, test: Any, node: str) -> Any:
        self.seen.append(node)
        return self.inner.open(test, node)


@pytest.mark.parametrize(("db", "role"), [(StoreDB(), TSERVER), (_ClientsOnMasters(), MASTER)])
def test_the_runner_spreads_workers_over_the_nodes_the_db_names(tmp_path: Path, db: Any, role: str) -> None:
    test = testspec.stamp(testspec.build_test({"cluster": "fake", "workload": "register", "time_limit": 0.5,
                                               "concurrency": 4, "seed": 3, "quiet_period": 0}))
    run = testspec.start_run(test, FakeBackend(seed=3))
    run.db = db
    seen: list[str] = []
    wl = get_workload("register", test.workload_opts)
    wl = dataclasses.replace(wl, client=_Recording(wl.client, seen))
    out = run_test(run, wl, compose(["none"], 1), None, install_signals=False)
    assert out.valid is True, out.results
    assert seen and set(seen) <= set(run.backend.nodes(role)), seen


def test_build_test_asks_the_db() -> None:
    test = testspec.build_test({"cluster": "fake", "masters": 1, "tservers": 3, "inject_bug": "no-fsync"})
    assert test.db == "store"
    spec = test.cluster_spec
    assert [(r["role"], r["count"]) for r in spec["roles"]] == [(MASTER, 1), (TSERVER, 3)]
    assert spec["db_opts"] == {"bugs": ["no-fsync"]} and spec["python_packages"] == ["grpcio", "protobuf"]
    with pytest.raises(UsageError, match="unknown DB 'etcd-9'"):
        testspec.build_test({"db": "etcd-9"})

    class Narrow(StoreDB):
        workloads = frozenset({"set"})
        nemeses = frozenset({"kill"})

    sys.modules[__name__].Narrow = Narrow  # importable by path for the rest of this test
    try:
        path = f"{__name__}:Narrow"
        with pytest.raises(UsageError, match="no client for workload 'register'"):
            testspec.build_test({"db": path, "workload": "register"})
        with pytest.raises(UsageError, match="does not support nemesis partition"):
            testspec.build_test({"db": path, "workload": "set", "nemesis": "kill,partition"})
        assert testspec.build_test({"db": path, "workload": "set", "nemesis": "kill"}).db == path
    finally:
        del sys.modules[__name__].Narrow


def test_cli_refuses_an_unknown_db_in_one_line() -> None:
    p = subprocess.run([sys.executable, "-m", "faultline", "run", "--cluster", "fake", "--db", "nope.mod:X"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 254
    assert p.stderr.strip().count("\n") == 0 and "nope.mod" in p.stderr, p.stderr
