"""Heals never repair data: `heal` restores the network and the processes only, an operator's repair is a
nemesis op of its own with its reason, and a master that never caught up is an anomaly the catalog checker
reports, whether or not the repair rebuilt it afterwards."""

from __future__ import annotations

from typing import Any

from faultline import gen
from faultline.checkers.catalog import CatalogChecker
from faultline.controller import testspec
from faultline.controller.runner import run_test
from faultline.dbs import get_db
from faultline.dbs.store.fake import FakeBackend, fake_run, store_spec
from faultline.dbs.store.faults.topology import MajorityLossNemesis, MasterReplaceNemesis, master_repairs
from faultline.nemesis import registry
from faultline.nemesis.api import NemesisPackage
from faultline.node.client import catalog_lags
from faultline.workloads.registry import get as get_workload


def _catalog_run(b: FakeBackend) -> Any:
    t = testspec.stamp(
        testspec.build_test(
            {
                "cluster": "fake",
                "workload": "catalog",
                "nemesis": "master-replace",
                "time_limit": 1,
                "concurrency": 3,
                "seed": 4,
                "quiet_period": 0,
            }
        )
    )
    return testspec.start_run(t, b)


def _run_with_master_repairs(b: FakeBackend) -> tuple[Any, Any]:
    """(outcome, run) of a whole catalog run on `b` under master-replace, with the operator's repairs of
    replace-master as the repair phase."""
    run = _catalog_run(b)
    pkg = NemesisPackage(
        nemesis=MasterReplaceNemesis(wait_s=3, settle_s=1),
        repair_generator=gen.seq(*(gen.once(o) for o in master_repairs("replace-master"))),
    )
    workload = get_workload("catalog", get_db("store"), run.spec.workload_opts)
    return run_test(run, workload, pkg, None, install_signals=False), run


def test_heal_alone_leaves_a_lagging_master_lagging() -> None:
    b = FakeBackend(seed=4, error_rate=0)
    b.up(store_spec(3, 5))
    b.lagging_masters = {"m3"}
    test = fake_run(b, seed=4, workload="catalog")
    pkg = registry.compose(["master-replace", "partition", "kill"], get_db("store"), 0.5)
    nemesis = pkg.nemesis.setup(test)
    nemesis.heal(test)
    b.heal_network()  # the runner's own heal step
    client = b.client()
    leader = client.catalog_replica("master-1:7051")
    assert catalog_lags(leader, client.catalog_replica("master-3:7051"))
    assert b.dns["master-3"] == "m3" and b.state["m3"] == "running"
    assert not any(action in ("copy_from_remote", "fs_format") for _, action, _ in b.store_admin.calls)


def test_the_catalog_checker_reports_a_master_that_never_caught_up_though_the_repair_rebuilt_it() -> None:
    """A whole run on the fake cluster: after the heal, the repair phase names master-3 (it never caught up
    within the settle time) and rebuilds it; the final `master-replicas` then finds every master caught up,
    yet the verdict is invalid, on the repair's evidence."""
    b = FakeBackend(seed=4, error_rate=0)
    b.lagging_masters = {"m3"}
    out, run = _run_with_master_repairs(b)
    assert out.cut_short is None, out.cut_short
    ops = run.recorder.ops
    repairs = [o for o in ops if o["process"] == "nemesis" and o["type"] != "invoke"]
    assert [o["f"] for o in repairs] == ["recopy-master", "rebuild-lagging-masters"]
    assert repairs[0]["type"] == "fail"  # no replacement waited for a copy
    rebuild = repairs[1]
    assert rebuild["value"]["never_caught_up"] == ["master-3"] and rebuild["value"]["rebuilt"] == ["master-3"]
    assert "still behind the leader master-1" in rebuild["value"]["reason"]
    assert ops[-1]["f"] == "master-replicas" and ops[-1]["type"] == "ok"  # rebuilt: caught up now
    w = out.results["workload"]
    assert out.valid is False and w["valid"] is False, w
    assert w["masters_diverged_count"] == 0 and w["never_caught_up_count"] == 1
    assert w["never_caught_up"][0]["masters"] == ["master-3"] and w["never_caught_up"][0]["rebuilt"] == [
        "master-3"
    ]
    assert w["first_anomaly"]["f"] == "rebuild-lagging-masters"


def test_the_repair_phase_on_a_store_that_catches_up_finds_nothing_and_the_run_is_valid() -> None:
    out, run = _run_with_master_repairs(FakeBackend(seed=4, error_rate=0))
    rebuild = next(
        o for o in run.recorder.ops if o["f"] == "rebuild-lagging-masters" and o["type"] != "invoke"
    )
    assert rebuild["type"] == "ok" and rebuild["value"]["never_caught_up"] == []
    assert out.valid is True and out.results["workload"]["never_caught_up_count"] == 0, out.results[
        "workload"
    ]


def _history(value: dict[str, Any]) -> list[dict[str, Any]]:
    ops = [
        {"type": "invoke", "process": 0, "f": "create-table", "value": "t0"},
        {"type": "ok", "process": 0, "f": "create-table", "value": "t0"},
        {"type": "invoke", "process": "nemesis", "f": "rebuild-lagging-masters", "value": None},
        {"type": "ok", "process": "nemesis", "f": "rebuild-lagging-masters", "value": value},
        {"type": "invoke", "process": 1, "f": "list-tables", "value": None},
        {"type": "ok", "process": 1, "f": "list-tables", "value": ["t0"]},
    ]
    return [{**o, "index": i, "time": i * 1000} for i, o in enumerate(ops)]


def test_catalog_checker_judges_the_repairs_evidence() -> None:
    late = CatalogChecker().check(
        {},
        _history(
            {
                "leader": "master-1",
                "never_caught_up": ["master-2"],
                "waited_s": 20,
                "rebuilt": ["master-2"],
                "reason": "r",
            }
        ),
        {},
    )
    assert late["valid"] is False and late["never_caught_up"][0]["index"] == 3
    assert late["first_anomaly"]["index"] == 3
    fine = CatalogChecker().check(
        {}, _history({"leader": "master-1", "never_caught_up": [], "rebuilt": []}), {}
    )
    assert fine["valid"] is True and fine["never_caught_up_count"] == 0


def test_packages_schedule_repairs_as_ops_of_their_own() -> None:
    def invoked(g: Any) -> list[str]:
        return [o["f"] for o in gen.simulate(gen.nemesis(g), 0) if o["type"] == "invoke"]

    pkg = registry.compose(["partition", "master-replace"], get_db("store"), 1)
    assert invoked(pkg.final_generator) == ["stop-partition"]
    assert invoked(pkg.repair_generator) == ["recopy-master", "rebuild-lagging-masters"]
    assert registry.get("partition", get_db("store")).repair_generator is None
    loss = registry.get("majority-loss", get_db("store"), 1)
    assert invoked(gen.time_limit(30, loss.generator)) == ["majority-loss", "unsafe-change-config"]
    assert invoked(loss.repair_generator) == ["unsafe-change-config"]


def test_majority_loss_recovery_is_a_repair_with_its_reason() -> None:
    b = FakeBackend(seed=2, error_rate=0)
    b.up(store_spec(3, 5))
    b.tables["register"] = {"rows": {}, "schema_version": 0, "columns": []}
    test = fake_run(b, seed=2)
    n = MajorityLossNemesis(wait_s=5, lag_s=0).setup(test)
    assert n.invoke(test, {"f": "unsafe-change-config", "value": None})["type"] == "fail"  # nothing lost yet
    loss = n.invoke(test, {"f": "majority-loss", "value": None})
    assert loss["type"] == "ok" and len(loss["value"]["lost"]) == 2, loss
    assert all(b.state[x] == "destroyed" for x in loss["value"]["lost"])
    assert not any(b.state.get(f"t{i}") for i in (6, 7))  # no repair inside the fault
    rep = n.invoke(test, {"f": "unsafe-change-config", "value": None})
    v = rep["value"]
    assert rep["type"] == "ok" and v["lost"] == loss["value"]["lost"] and len(v["added"]) == 2, v
    assert v["reason"].startswith(f"tablet {loss['value']['tablet']} lost its majority")
    assert n.invoke(test, {"f": "unsafe-change-config", "value": None})["type"] == "fail"  # once per loss


def test_a_replacement_whose_copy_never_succeeded_is_rebuilt_but_is_not_the_stores_finding() -> None:
    b = FakeBackend(seed=4, error_rate=0)
    b.up(store_spec(3, 5))
    test = fake_run(b, seed=4)
    n = MasterReplaceNemesis(wait_s=3, settle_s=0.5).setup(test)
    n._destroy_and_rename(test, "master-2", "m2", "uuid-2", [])  # made, never copied, never started
    done = n.invoke(test, {"f": "rebuild-lagging-masters", "value": None})
    v = done["value"]
    assert (
        v["never_caught_up"] == [] and v["never_started"] == ["master-2"] and v["rebuilt"] == ["master-2"]
    ), v
    assert b.state[b.dns["master-2"]] == "running" and n.pending is None


def test_composed_master_replace_nemeses_each_repair_their_own_replacement() -> None:
    b = FakeBackend(seed=4, error_rate=0)
    b.up(store_spec(3, 5))
    test = fake_run(b, seed=4)
    pkg = registry.compose(["master-replace", "master-replace-lagging"], get_db("store"), 1)
    comp = pkg.nemesis.setup(test)
    lagging = comp.nemeses[1]
    lagging._destroy_and_rename(test, "master-2", "m2", "uuid-2", [])  # the second one's copy failed
    ops = [o for o in gen.simulate(gen.nemesis(pkg.repair_generator), 0) if o["type"] == "invoke"]
    assert [(o["f"], o["value"]["for"]) for o in ops] == [
        ("recopy-master", "replace-master"),
        ("rebuild-lagging-masters", "replace-master"),
        ("recopy-master", "replace-master-lagging"),
        ("rebuild-lagging-masters", "replace-master-lagging"),
    ]
    assert comp.invoke(test, {"f": "recopy-master", "value": {"for": "replace-master"}})["type"] == "fail"
    assert lagging.pending is not None
    done = comp.invoke(test, {"f": "recopy-master", "value": {"for": "replace-master-lagging"}})
    assert done["type"] == "ok" and lagging.pending is None and b.state["m4"] == "running"
