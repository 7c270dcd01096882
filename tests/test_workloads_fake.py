"""Workload clients and generators against the in-memory fakes: op semantics, error mapping, final reads.
The generic workloads run on the generic key-value fake (testing/kvfake.py), the store's catalog workload
on the store's own fake."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultline import gen
from faultline.controller import testspec
from faultline.controller.runner import run_test
from faultline.dbs import get_db
from faultline.dbs.store import StoreDB
from faultline.dbs.store.fake import FakeBackend, FakeUnavailable, fake_run, store_spec
from faultline.nemesis.registry import compose
from faultline.testing.kvfake import (
    DB_PATH,
    KVFakeBackend,
    KVFakeDB,
    KVFakeIndeterminate,
    KVFakeUnavailable,
    kv_run,
    kv_spec,
)
from faultline.workloads import common
from faultline.workloads.registry import WORKLOADS
from faultline.workloads.registry import get as get_workload

KV = KVFakeDB()


@pytest.fixture()
def test() -> Any:
    b = KVFakeBackend(seed=1, latency_s=0)
    b.up(kv_spec())
    return kv_run(b, seed=1)


@pytest.fixture()
def store_test() -> Any:
    b = FakeBackend(seed=1, latency_s=0)
    b.up(store_spec(3, 5))
    return fake_run(b, seed=1)


@pytest.fixture()
def catalog_workload() -> Any:
    return get_workload("catalog", get_db("store"), {})


@pytest.fixture()
def catalog_client(store_test: Any, catalog_workload: Any) -> Any:
    """A catalog client on the leader master's node of the store's fake."""
    return catalog_workload.client.open(store_test, "m1")


def test_register_client(test: dict) -> None:
    wl = get_workload("register", KV, {"concurrency": 4})
    wl.client.setup(test)
    c = wl.client.open(test, "t1")
    assert c.invoke(test, {"f": "read", "key": "k1", "value": None})["value"] is None
    assert c.invoke(test, {"f": "write", "key": "k1", "value": 3})["type"] == "ok"
    assert c.invoke(test, {"f": "read", "key": "k1", "value": None})["value"] == 3
    assert c.invoke(test, {"f": "cas", "key": "k1", "value": [3, 4]})["type"] == "ok"
    assert c.invoke(test, {"f": "cas", "key": "k1", "value": [3, 1]})["type"] == "fail"
    assert c.invoke(test, {"f": "read", "key": "k1", "value": None})["value"] == 4


def test_error_mapping_reads_fail_writes_are_indeterminate() -> None:
    op = {"f": "write", "value": 1}
    assert common.completion(op, KVFakeIndeterminate("lost"), read_only=False)["type"] == "info"
    assert common.completion(op, RuntimeError("who knows"), read_only=False)["type"] == "info"
    assert common.completion(op, TimeoutError(), read_only=False)["type"] == "info"
    assert common.completion(op, KVFakeUnavailable("refused"), read_only=False)["type"] == "fail"
    assert common.completion({"f": "read"}, KVFakeIndeterminate("x"), read_only=True)["type"] == "fail"
    assert "refused" in common.completion(op, KVFakeUnavailable("refused"), read_only=False)["error"]


def test_set_unique_adds_and_read(test: dict) -> None:
    wl = get_workload("set", KV, {})
    h = gen.simulate(gen.clients(gen.time_limit(3, wl.generator)), concurrency=3, latency_s=0.01)
    values = [o["value"] for o in h if o["type"] == "invoke" and o["f"] == "add"]
    assert sorted(values) == list(range(len(values))) and len(values) > 30
    # reads of the whole set while the adds go on, one a second (Jepsen's set-full)
    read_times = [o["time"] / 1e9 for o in h if o["type"] == "invoke" and o["f"] == "read"]
    assert len(read_times) == 3 and read_times == [0.0, 1.0, 2.0]
    wl.client.setup(test)
    c = wl.client.open(test, "t1")
    for v in (5, 1, 3):
        assert c.invoke(test, {"f": "add", "value": v})["type"] == "ok"
    assert c.invoke(test, {"f": "read", "value": None})["value"] == [1, 3, 5]


def test_bank_transfers_conserve_the_total(test: dict) -> None:
    wl = get_workload("bank", KV, {"accounts": 4, "total": 40})
    wl.client.setup(test)
    c = wl.client.open(test, "t1")
    assert c.invoke(test, {"f": "read"})["value"] == {0: 10, 1: 10, 2: 10, 3: 10}
    assert c.invoke(test, {"f": "transfer", "value": {"from": 0, "to": 1, "amount": 7}})["type"] == "ok"
    r = c.invoke(test, {"f": "transfer", "value": {"from": 0, "to": 2, "amount": 5}})
    assert r["type"] == "fail" and "insufficient" in r["error"]
    bal = c.invoke(test, {"f": "read"})["value"]
    assert bal == {0: 3, 1: 17, 2: 10, 3: 10} and sum(bal.values()) == 40


def test_catalog_ops(store_test: Any, catalog_workload: Any, catalog_client: Any) -> None:
    test, wl, c = store_test, catalog_workload, catalog_client
    assert c.invoke(test, {"f": "create-table", "value": "t0"})["type"] == "ok"
    assert c.invoke(test, {"f": "create-table", "value": "t0"})["type"] == "fail"  # already present: definite
    alt = c.invoke(test, {"f": "alter-table", "value": {"table": "t0", "version": 2}})
    assert alt["type"] == "ok" and alt["value"]["version"] == 2
    back = c.invoke(test, {"f": "alter-table", "value": {"table": "t0", "version": 1}})
    assert back["type"] == "fail"  # a version that does not grow is refused: definite
    desc = c.invoke(test, {"f": "describe-table", "value": {"table": "t0"}})
    assert desc["value"] == {"table": "t0", "version": 2}
    assert c.invoke(test, {"f": "list-tables"})["value"] == ["t0"]
    assert c.invoke(test, {"f": "delete-table", "value": "t0"})["type"] == "ok"
    assert c.invoke(test, {"f": "list-tables"})["value"] == []
    h = gen.simulate(gen.clients(gen.limit(200, wl.generator)), concurrency=2, latency_s=0.001, seed=4)
    creates = [o["value"] for o in h if o["type"] == "invoke" and o["f"] == "create-table"]
    assert len(creates) == len(set(creates)) > 20  # every create names a fresh table
    targets = {
        o["value"] if isinstance(o["value"], str) else o["value"]["table"]
        for o in h
        if o["type"] == "invoke" and o["f"] in ("delete-table", "alter-table")
    }
    assert targets <= set(creates)


def test_catalog_locate_tables_names_tablets_without_a_leader(
    store_test: Any, catalog_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    test, c = store_test, catalog_client
    assert c.invoke(test, {"f": "create-table", "value": "t0"})["type"] == "ok"
    led = c.invoke(test, {"f": "locate-tables", "value": None})
    assert led["type"] == "ok" and led["value"] == {"tables": 1, "leaderless": {}}
    # a leader master that lost track of the tablet's leader: a definite answer, with the tablet named
    lost = SimpleNamespace(
        tablets=[SimpleNamespace(tablet_id="x1", replicas=[SimpleNamespace(role="FOLLOWER")])]
    )
    monkeypatch.setattr(c.conn, "table_locations", lambda name, timeout=None: lost)
    r = c.invoke(test, {"f": "locate-tables", "value": None})
    assert r["type"] == "fail" and r["value"]["leaderless"] == {"t0": ["x1"]}
    # no answer at all: a failure without a value (the checker cannot count it as evidence)
    monkeypatch.setattr(
        c.conn,
        "table_locations",
        lambda name, timeout=None: (_ for _ in ()).throw(FakeUnavailable("no leader master")),
    )
    e = c.invoke(test, {"f": "locate-tables", "value": None})
    assert e["type"] == "fail" and e.get("value") is None


def test_catalog_master_replicas_names_a_master_left_behind(
    store_test: Any, catalog_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    test, c = store_test, catalog_client
    ok = c.invoke(test, {"f": "master-replicas", "value": None})
    assert ok["type"] == "ok" and len(ok["value"]["masters"]) == 3 and ok["value"]["problems"] == []
    roles = sorted(v["role"] for v in ok["value"]["masters"].values())
    assert roles == ["FOLLOWER", "FOLLOWER", "LEADER"]
    real = c.conn.catalog_replica

    def behind(addr: str, timeout: float = 2.0) -> Any:  # master-3 stopped at index 2: it never catches up
        st = real(addr, timeout)
        return SimpleNamespace(**{**vars(st), "last_index": 2}) if addr.startswith("master-3") else st

    monkeypatch.setattr(c.conn, "catalog_replica", behind)
    r = c.invoke(test, {"f": "master-replicas", "value": None})
    assert r["type"] == "fail" and len(r["value"]["problems"]) == 1
    assert r["value"]["problems"][0].startswith("master-3:7051 lags the leader")
    monkeypatch.setattr(
        c.conn, "catalog_replica", lambda addr, timeout=2.0: (_ for _ in ()).throw(FakeUnavailable("down"))
    )
    down = c.invoke(test, {"f": "master-replicas", "value": None})
    assert down["type"] == "fail" and "0 masters lead" in down["value"]["problems"]


def _on_fake(name: str) -> tuple[dict[str, str], Any]:
    """The options and backend that run workload `name`: the store's fake for the store's own workload
    (catalog), else the generic key-value fake."""
    if name in StoreDB.workloads or name not in KVFakeDB.workloads:
        return {"db": "store", "cluster": "fake"}, FakeBackend
    return {"db": DB_PATH, "cluster": "kvfake"}, KVFakeBackend


def _run_on_fake(name: str, nemesis: str, bugs: Sequence[str] = (), **opts: Any) -> tuple[Any, Any, Any]:
    """(outcome, run, backend) of workload `name` run whole on its fake (`_on_fake`) with one nemesis;
    `bugs` are set in the cluster spec directly (on the store's fake, `lose-writes` is no node bug)."""
    where, backend = _on_fake(name)
    options = {**where, "workload": name, "nemesis": nemesis, "time_limit": 1, "concurrency": 4, **opts}
    t = testspec.stamp(testspec.build_test({**options, "quiet_period": 0}))
    b = backend(seed=t.seed)
    t.cluster_spec["db_opts"]["bugs"] = list(bugs)
    run = testspec.start_run(t, b)
    pkg = compose([nemesis], get_db(t.db), float(opts.get("nemesis_interval", 1)))
    out = run_test(run, get_workload(name, get_db(t.db), t.workload_opts), pkg, None, install_signals=False)
    return out, run, b


@pytest.mark.parametrize("name", [w for w in WORKLOADS if w in KVFakeDB.workloads] + ["catalog"])
def test_each_workload_runs_to_completion_on_the_fake(tmp_path: Path, name: str) -> None:
    out, run, b = _run_on_fake(name, "partition", nemesis_interval=0.2, seed=9)
    assert out.cut_short is None, out.cut_short
    assert out.valid is True, out.results["workload"]
    assert b.residue() == []
    ops = run.recorder.ops
    if name != "register":  # a final read after healing, and it succeeded
        final_f = {"set": "read", "bank": "read", "catalog": "master-replicas"}[name]
        assert ops[-1]["f"] == final_f and ops[-1]["type"] == "ok"
    if name == "catalog":  # every tablet located with a leader after healing, then the final listing
        assert any(o["f"] == "locate-tables" and o["type"] == "ok" for o in ops)
        assert ops[-3]["f"] == "list-tables" and ops[-3]["type"] == "ok"


@pytest.mark.parametrize(
    "name,evidence", [("set", "lost"), ("bank", "first_wrong_total"), ("catalog", "lost")]
)
def test_lossy_fake_is_caught_by_each_workloads_checker(name: str, evidence: str) -> None:
    # a high rate: enough writes that some are lost (each is lost with probability 0.1 to 0.2)
    out, _, _ = _run_on_fake(name, "none", bugs=["lose-writes"], seed=5, rate=400)
    assert out.valid is False, out.results["workload"]
    assert out.results["workload"].get(evidence), out.results["workload"]
    # results.json records the time to detection: the completion of the op that proved it, within the run
    t_detect = out.results["time_to_detection_s"]
    assert "first_anomaly" in out.results
    if name in ("set", "catalog"):  # their checkers name the op that proved the anomaly
        assert (
            isinstance(t_detect, float)
            and t_detect > 0
            and out.results["first_anomaly"].startswith("workload")
        )
    if name == "set":
        assert t_detect == pytest.approx(out.results["workload"]["first_lost_detected_s"], abs=1e-3)
