"""The catalog workload checks its invariants while the faults run: its checks during the run, the
checker's scoping of them, and a run on the fake cluster (testing/fake.py)."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.checkers.catalog import CatalogChecker
from faultline.controller import testspec
from faultline.controller.runner import run_test
from faultline.dbs import get_db
from faultline.dbs.store.fake import FakeBackend
from faultline.nemesis.registry import compose
from faultline.workloads.registry import get as get_workload

S = 1_000_000_000


def ops(*events: tuple[Any, ...]) -> list[dict[str, Any]]:
    """(time_s, process, type, f, value) -> history."""
    return [
        {"index": i, "time": int(e[0] * S), "process": e[1], "type": e[2], "f": e[3], "value": e[4]}
        for i, e in enumerate(events)
    ]


CREATE = ((0, 0, "invoke", "create-table", "t0"), (1, 0, "ok", "create-table", "t0"))
LISTED = ((30, 4, "invoke", "list-tables", None), (31, 4, "ok", "list-tables", ["t0"]))


def _locate(t: float, led: bool) -> tuple[tuple[Any, ...], ...]:
    value = {"tables": 1, "leaderless": {} if led else {"t0": ["a"]}}
    return (t, 6, "invoke", "locate-tables", None), (
        t + 0.5,
        6,
        "ok" if led else "fail",
        "locate-tables",
        value,
    )


def _fault(t: float) -> tuple[tuple[Any, ...], ...]:
    return (t, "nemesis", "invoke", "start-partition", None), (
        t + 0.1,
        "nemesis",
        "info",
        "start-partition",
        None,
    )


def test_checks_during_faults_neither_mask_nor_count_as_after_healing() -> None:
    c = CatalogChecker()
    # led during the run, a fault, then leaderless in every answer after it: the bug, not hidden by the
    # early answer
    h = ops(*CREATE, *_locate(2, True), *_fault(5), *_locate(10, False), *_locate(12, False), *LISTED)
    r = c.check({}, h, {})
    assert r["valid"] is False and r["leaderless_count"] == 1 and r["live_checks"] == 1
    assert r["first_anomaly"]["index"] == 9 and r["first_anomaly"]["f"] == "locate-tables"
    # leaderless during the fault only, led after it: valid
    h = ops(*CREATE, *_fault(1), *_locate(2, False), *_fault(5), *_locate(10, True), *LISTED)
    r = c.check({}, h, {})
    assert r["valid"] is True and r["live_checks"] == 1
    # a nemesis record after the last client op (a heal at the very end) does not move "after healing"
    h = ops(*CREATE, *_fault(1), *_locate(10, False), *_locate(12, False), *LISTED, *_fault(40))
    assert c.check({}, h, {})["valid"] is False


def _leader_return(t: float, transient: bool = True) -> tuple[tuple[Any, ...], ...]:
    value = {"leader": "master-1", "via": "master-2", "returned": True, "transient": transient}
    return (
        (t, "nemesis", "invoke", "master-leader-return", None),
        (t + 1, "nemesis", "ok", "master-leader-return", value),
    )


def _replicas(t: float, problem: str | None) -> tuple[tuple[Any, ...], ...]:
    value = {"masters": {}, "problems": [problem] if problem else []}
    return (t, 7, "invoke", "master-replicas", None), (
        t + 0.5,
        7,
        "fail" if problem else "ok",
        "master-replicas",
        value,
    )


HEAL = ((40, "nemesis", "invoke", "heal", None), (40.5, "nemesis", "info", "heal", None))


def test_a_tablet_leaderless_for_the_bound_with_no_fault_is_found_during_the_run() -> None:
    c = CatalogChecker()
    located_after_heal = (
        (41, 6, "invoke", "locate-tables", None),
        (41.5, 6, "ok", "locate-tables", {"tables": 1, "leaderless": {}}),
    )
    late = ((42, 4, "invoke", "list-tables", None), (43, 4, "ok", "list-tables", ["t0"]))
    leaderless = [e for t in (5, 10, 15, 20, 25, 30) for e in _locate(t, False)]
    # leadership moved away and back (nothing left behind): leaderless from 5.5 s to the check begun at 30 s
    h = ops(*CREATE, *_leader_return(3), *leaderless, *HEAL, *located_after_heal, *late)
    r = c.check({}, h, {})
    assert r["valid"] is False and r["leaderless"][0]["live"] is True, r
    assert r["leaderless"][0]["since_s"] == 5.5
    assert r["first_anomaly"]["time"] == int(30.5 * S)  # the check that proves it, before the heal
    # the same answers while a fault lasts (a start with no stop before the heal), or after a nemesis op
    # that does not say it left nothing behind: no verdict from them
    for fault in (_fault(3), _leader_return(3, transient=False)):
        r = c.check({}, ops(*CREATE, *fault, *leaderless, *HEAL, *located_after_heal, *late), {})
        assert r["valid"] is True, r
    # a tablet located once in between: every run of answers is shorter than the bound
    broken = (
        [e for t in (5, 10, 15) for e in _locate(t, False)]
        + list(_locate(18, True))
        + [e for t in (20, 25, 30) for e in _locate(t, False)]
    )
    assert c.check({}, ops(*CREATE, *_leader_return(3), *broken, *HEAL, *located_after_heal, *late), {})[
        "valid"
    ]
    # a longer bound waits longer
    assert c.check({}, h, {"live_bound_s": 30})["valid"] is True


def test_a_master_behind_for_the_bound_with_no_fault_is_found_during_the_run() -> None:
    c = CatalogChecker()
    lag = "master-1:7051 lags the leader master-2:7051: term 3 index 10, leader term 3 committed 90"
    behind = [e for t in (6, 11, 16, 21, 26, 31) for e in _replicas(t, lag)]
    caught_up = (
        (41, 7, "invoke", "master-replicas", None),
        (41.5, 7, "ok", "master-replicas", {"masters": {}, "problems": []}),
    )
    h = ops(*CREATE, *_leader_return(3), *behind, *LISTED, *HEAL, *caught_up)
    r = c.check({}, h, {})
    assert r["valid"] is False and r["masters_diverged"][0]["problems"] == ["master-1:7051"], r
    assert r["first_anomaly"]["time"] == int(31.5 * S)
    # another master each time: no one master stayed behind for the bound
    other = lag.replace("master-1", "master-3")
    mixed = [
        e
        for t, m in ((6, lag), (11, other), (16, lag), (21, other), (26, lag), (31, other))
        for e in _replicas(t, m)
    ]
    assert c.check({}, ops(*CREATE, *_leader_return(3), *mixed, *LISTED, *HEAL, *caught_up), {})["valid"]


def test_every_listing_is_held_to_the_invariants_not_only_the_last() -> None:
    c = CatalogChecker()
    doubled = ((5, 5, "invoke", "list-tables", None), (6, 5, "ok", "list-tables", ["t0", "t0"]))
    r = c.check({}, ops(*CREATE, *doubled, *LISTED), {})
    assert r["valid"] is False and r["duplicated"] == [{"table": "t0", "count": 2, "listing_index": 3}]
    assert r["first_anomaly"]["index"] == 3  # detected by the listing during the run, at 6 s


def _run(bugs: list[str], seed: int) -> Any:
    t = testspec.stamp(
        testspec.build_test(
            {
                "cluster": "fake",
                "workload": "catalog",
                "nemesis": "partition",
                "time_limit": 6,
                "concurrency": 4,
                "seed": seed,
                "nemesis_interval": 1,
                "quiet_period": 0.2,
                "rate": 60,
            }
        )
    )
    b = FakeBackend(seed=seed)
    t.cluster_spec["db_opts"]["bugs"] = bugs
    return run_test(
        testspec.start_run(t, b),
        get_workload("catalog", get_db("store"), t.workload_opts),
        compose(["partition"], get_db("store"), 1),
        None,
        install_signals=False,
    )


@pytest.mark.integration
def test_catalog_on_the_fake_cluster_checks_while_faults_run() -> None:
    out = _run([], seed=3)
    assert out.valid is True, out.results["workload"]
    assert out.results["workload"]["live_checks"] >= 2  # locate / master-replicas during the faults
    lossy = _run(["lose-writes"], seed=3)
    assert lossy.valid is False and lossy.results["workload"]["lost"]
    # a listing during the run proved the loss: detected before the run's 6 s were over
    assert lossy.results["time_to_detection_s"] < 6.0


def test_the_timed_rule_reaches_into_the_checks_after_the_last_fault() -> None:
    # a one-shot transient op and no heal op: every check after it counts as "after healing", and the
    # timed rule still proves the problem 20 s after it began, not at the last of the final retries
    leaderless = [e for t in range(15, 81, 5) for e in _locate(t, False)]
    r = CatalogChecker().check({}, ops(*CREATE, *_leader_return(3), *leaderless, *LISTED), {})
    assert r["valid"] is False and r["leaderless_count"] == 1 and r["leaderless"][0]["live"] is True, r
    assert r["first_anomaly"]["time"] == int(40.5 * S)  # seen at 15.5 s, the check begun at 40 s proves it


def test_a_replacement_that_only_watched_at_its_end_ended_its_fault_when_it_stopped_acting() -> None:
    """`watched_s`: the replace op's last seconds only waited for health, so the timed rule counts from
    before the op completed; without it, from the completion."""
    from faultline.checkers.ops import nemesis_intervals

    def replace(watched: float | None) -> tuple[tuple[Any, ...], ...]:
        value: dict[str, Any] = {"replacement": "m4", "transient": True, "healthy": False}
        if watched is not None:
            value["watched_s"] = watched
        return (
            (2, "nemesis", "invoke", "replace-master", None),
            (14, "nemesis", "info", "replace-master", value),
        )

    lagging = [
        e for t in range(5, 31, 2) for e in _replicas(t, "master-2:7051 lags the leader master-1:7051")
    ]
    watched = ops(*CREATE, *replace(10), *lagging, *HEAL, *LISTED)
    assert nemesis_intervals(watched)[0][0].end == 4.0
    r = CatalogChecker().check({}, watched, {})
    # seen from the check completed at 5.5 s; the first check begun 20 s after that (at 27 s) proves it
    assert r["valid"] is False and r["masters_diverged"][0]["since_s"] == 5.5, r
    assert r["first_anomaly"]["time"] == int(27.5 * S)
    plain = ops(*CREATE, *replace(None), *lagging, *HEAL, *LISTED)
    assert nemesis_intervals(plain)[0][0].end == 14.0
    late = CatalogChecker().check({}, plain, {})
    # the op ends at 14 s: the first answer after it completes at 15.5 s, and no check begins 20 s later
    assert "first_anomaly" not in late or late["first_anomaly"]["time"] > int(35 * S)
    # nonsense is ignored, never trusted: a negative or non-numeric watch changes nothing
    for bad in (-3, "10", True):
        assert nemesis_intervals(ops(*CREATE, *replace(bad), *HEAL))[0][0].end == 14.0  # type: ignore[arg-type]
