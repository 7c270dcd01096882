"""set, bank, counter, unique-ids, catalog, stats, availability, composition and the registry."""

from __future__ import annotations

from typing import Any

import pytest
from histories import S, call, fault, ops

from faultline.checkers.api import Compose
from faultline.checkers.availability import Availability
from faultline.checkers.bank import BankChecker
from faultline.checkers.catalog import CatalogChecker
from faultline.checkers.counter import CounterChecker
from faultline.checkers.ops import nemesis_intervals
from faultline.checkers.registry import CHECKERS
from faultline.checkers.registry import get as get_checker
from faultline.checkers.set import SetChecker
from faultline.checkers.stats import Stats
from faultline.checkers.unique_ids import UniqueIds


def test_set_lost_unexpected_duplicated_recovered() -> None:
    h = ops(
        *call(0, 1, 0, "add", 1),
        *call(2, 3, 1, "add", 2, "info"),
        *call(4, 5, 2, "add", 3),
        *call(6, 7, 3, "read", [1, 2, 2, 9]),
    )
    checker = SetChecker(stability_window_s=0)
    r = checker.check({}, h, {})
    assert r["valid"] is False
    assert (r["lost"], r["unexpected"], r["duplicated"], r["recovered"]) == ([3], [9], [[2, 2]], [2])
    assert r["op"] == {"process": 3, "f": "read", "index": 7, "time": 7 * S}  # the read that showed it
    from faultline.checkers.detection import first_anomaly

    assert first_anomaly({"workload": r}, {o["index"]: o["time"] for o in h})[0] == 7.0
    h[-1]["value"] = [1, 3]
    assert checker.check({}, h, {})["valid"] is True
    assert "op" not in checker.check({}, h, {})
    assert checker.check({}, h[:6], {})["valid"] == "unknown"


def test_bank_total_and_negatives() -> None:
    good = ops((0, 0, "invoke", "read", None), (1, 0, "ok", "read", {"0": 50, "1": 50}))
    assert BankChecker(total=100).check({}, good, {})["valid"] is True
    assert BankChecker().check({}, good, {"total": 90})["valid"] is False
    neg = ops((0, 0, "invoke", "read", None), (1, 0, "ok", "read", {"0": 110, "1": -10}))
    r = BankChecker(total=100, accounts=2).check({}, neg, {})
    assert r["valid"] is False and r["negative_count"] == 1
    extra = ops((0, 0, "invoke", "read", None), (1, 0, "ok", "read", {"0": 50, "7": 50}))
    assert BankChecker(total=100, accounts=2).check({}, extra, {})["valid"] is False
    assert BankChecker().check({"accounts": [0, 1], "total": 100}, good, {})["valid"] is True


def test_counter_bounds() -> None:
    h = ops(
        (0, 0, "invoke", "add", 2),
        (1, 0, "ok", "add", 2),
        (2, 1, "invoke", "add", 5),
        (3, 2, "invoke", "read", None),
        (4, 2, "ok", "read", 7),
        (5, 1, "info", "add", 5),
    )
    assert CounterChecker().check({}, h, {})["valid"] is True
    h[4]["value"] = 1  # below the acknowledged 2
    r = CounterChecker().check({}, h, {})
    assert r["valid"] is False and r["errors"][0]["lower"] == 2 and r["errors"][0]["upper"] == 7
    h[4]["value"] = 8  # above everything attempted
    assert CounterChecker().check({}, h, {})["valid"] is False


def test_unique_ids() -> None:
    h = ops(
        (0, 0, "invoke", "generate", None),
        (1, 0, "ok", "generate", 1),
        (2, 1, "invoke", "generate", None),
        (3, 1, "ok", "generate", 2),
    )
    assert UniqueIds().check({}, h, {})["valid"] is True
    h[3]["value"] = 1
    r = UniqueIds().check({}, h, {})
    assert r["valid"] is False and r["duplicated"] == [[1, 2]]


def _catalog(final: list[str], extra: tuple = ()) -> list[dict[str, Any]]:
    return ops(
        (0, 0, "invoke", "create-table", "t0"),
        (1, 0, "ok", "create-table", "t0"),
        (2, 1, "invoke", "create-table", "t1"),
        (3, 1, "ok", "create-table", "t1"),
        (4, 2, "invoke", "delete-table", "t1"),
        (5, 2, "ok", "delete-table", "t1"),
        (6, 3, "invoke", "alter-table", {"table": "t0", "version": 3}),
        (7, 3, "ok", "alter-table", {"table": "t0", "version": 3}),
        *extra,
        (20, 4, "invoke", "list-tables", None),
        (21, 4, "ok", "list-tables", final),
    )


def test_catalog_rules() -> None:
    c = CatalogChecker()
    assert c.check({}, _catalog(["t0"]), {})["valid"] is True
    lost = c.check({}, _catalog([]), {})
    assert lost["valid"] is False and [x["table"] for x in lost["lost"]] == ["t0"]
    assert lost["first_anomaly"]["index"] == 9  # the final listing that misses it: detection time
    dup = c.check({}, _catalog(["t0", "t0"]), {})
    assert dup["valid"] is False and dup["duplicated_count"] == 1
    back = c.check({}, _catalog(["t0", "t1"]), {})
    assert back["valid"] is False and back["resurrected_count"] == 1
    ghost = c.check({}, _catalog(["t0", "zz"]), {})
    assert ghost["valid"] is False and ghost["unexpected_count"] == 1
    regress = (
        (8, 5, "invoke", "describe-table", {"table": "t0"}),
        (9, 5, "ok", "describe-table", {"table": "t0", "version": 2}),
    )
    r = c.check({}, _catalog(["t0"], regress), {})
    assert r["valid"] is False and r["version_regressed"][0]["version"] == 2
    assert c.check({}, _catalog(["t0"])[:-2], {})["valid"] == "unknown"
    assert "first_anomaly" not in c.check({}, _catalog(["t0"]), {})


def test_catalog_every_listing_shows_what_was_acknowledged_before_it() -> None:
    c = CatalogChecker()
    # a listing that began after t0's create was acknowledged misses it: lost, named by that listing,
    # even though the last listing shows it again
    early = ((8, 5, "invoke", "list-tables", None), (9, 5, "ok", "list-tables", []))
    r = c.check({}, _catalog(["t0"], early), {})
    assert (
        r["valid"] is False and [x["table"] for x in r["lost"]] == ["t0"] and r["first_anomaly"]["index"] == 9
    )
    # a listing that began before the create was acknowledged may miss it
    concurrent = ops(
        (0, 0, "invoke", "create-table", "t0"),
        (1, 5, "invoke", "list-tables", None),
        (2, 0, "ok", "create-table", "t0"),
        (3, 5, "ok", "list-tables", []),
        (4, 6, "invoke", "list-tables", None),
        (5, 6, "ok", "list-tables", ["t0"]),
    )
    assert c.check({}, concurrent, {})["valid"] is True
    # a delete invoked before the listing completed (outcome unknown) may have removed it
    deleting = (
        (8, 6, "invoke", "delete-table", "t0"),
        (9, 5, "invoke", "list-tables", None),
        (10, 5, "ok", "list-tables", []),
        (11, 6, "info", "delete-table", "t0"),
    )
    assert c.check({}, _catalog([], deleting), {})["valid"] is True


def _locates(*answers: Any) -> tuple:
    """locate-tables attempts after healing: True = every tablet led, a dict = the leaderless tablets, None =
    no answer (an error)."""
    out: list[tuple] = []
    for i, a in enumerate(answers):
        inv, comp = 10 + 2 * i, 11 + 2 * i
        out.append((inv, 6, "invoke", "locate-tables", None))
        if a is True:
            out.append((comp, 6, "ok", "locate-tables", {"tables": 1, "leaderless": {}}))
        elif a is None:
            out.append((comp, 6, "fail", "locate-tables", None))
        else:
            out.append((comp, 6, "fail", "locate-tables", {"tables": 1, "leaderless": a}))
    return tuple(out)


def test_catalog_tablets_must_find_a_leader_after_healing() -> None:
    c = CatalogChecker()
    # settled after a while: valid
    assert c.check({}, _catalog(["t0"], _locates({"t0": ["a"]}, True)), {})["valid"] is True
    # the leader master never found a leader for t0's tablet: invalid, named by the last answer
    r = c.check({}, _catalog(["t0"], _locates({"t0": ["a"]}, None, {"t0": ["a"]})), {})
    assert (
        r["valid"] is False and r["leaderless"][0]["tablets"] == ["a"] and r["leaderless"][0]["answers"] == 2
    )
    assert r["first_anomaly"]["index"] == 13 and r["first_anomaly"]["f"] == "locate-tables"
    # no answer at all after healing: cannot be valid
    u = c.check({}, _catalog(["t0"], _locates(None, None)), {})
    assert u["valid"] == "unknown" and "locate" in u["error"]


def test_catalog_a_table_may_vanish_from_a_locate_only_under_its_own_delete() -> None:
    c = CatalogChecker()

    def locate(at: int, vanished: list[str]) -> tuple:
        return (
            (at, 6, "invoke", "locate-tables", None),
            (at + 1, 6, "ok", "locate-tables", {"tables": 2, "leaderless": {}, "vanished": vanished}),
        )

    # t1 was listed and then answered NOT_FOUND while its delete (invoked before the locate completed) ran
    racing = (
        (4, 2, "invoke", "delete-table", "t1"),
        (5, 6, "invoke", "locate-tables", None),
        (6, 2, "ok", "delete-table", "t1"),
        (7, 6, "ok", "locate-tables", {"tables": 2, "leaderless": {}, "vanished": ["t1"]}),
    )
    ok = c.check(
        {},
        ops(
            (0, 0, "invoke", "create-table", "t0"),
            (1, 0, "ok", "create-table", "t0"),
            (2, 1, "invoke", "create-table", "t1"),
            (3, 1, "ok", "create-table", "t1"),
            *racing,
            (20, 4, "invoke", "list-tables", None),
            (21, 4, "ok", "list-tables", ["t0"]),
        ),
        {},
    )
    assert ok["valid"] is True and ok["vanished_count"] == 0
    # t0 vanished and nobody ever deleted it: the master lost a table it had just listed
    r = c.check({}, _catalog(["t0"], locate(8, ["t0"])), {})
    assert r["valid"] is False and r["vanished"] == [{"table": "t0", "locate_index": 9}]
    assert r["first_anomaly"]["f"] == "locate-tables"
    # a delete invoked only after the locate completed does not explain it
    late = (*locate(8, ["t0"]), (10, 7, "invoke", "delete-table", "t0"), (11, 7, "ok", "delete-table", "t0"))
    assert c.check({}, _catalog([], late), {})["vanished_count"] == 1


def test_catalog_every_master_must_catch_up_after_healing() -> None:
    c = CatalogChecker()

    def answers(*lagging: bool) -> tuple:
        out: list[tuple] = []
        for i, lag in enumerate(lagging):
            out.append((10 + 2 * i, 6, "invoke", "master-replicas", None))
            problems = ["master-3:7051 lags the leader"] if lag else []
            out.append(
                (
                    11 + 2 * i,
                    6,
                    "fail" if lag else "ok",
                    "master-replicas",
                    {"masters": {}, "problems": problems},
                )
            )
        return tuple(out)

    assert c.check({}, _catalog(["t0"], answers(True, False)), {})["valid"] is True  # it caught up
    r = c.check({}, _catalog(["t0"], answers(True, True)), {})
    assert r["valid"] is False and r["masters_diverged"][0]["problems"] == ["master-3:7051 lags the leader"]
    assert r["masters_diverged"][0]["attempts"] == 2 and r["first_anomaly"]["f"] == "master-replicas"


def test_stats_counts() -> None:
    h = ops(
        (0, 0, "invoke", "read", None),
        (1, 0, "ok", "read", 1),
        (2, 0, "invoke", "write", 2),
        (3, 0, "fail", "write", 2),
        (4, "nemesis", "info", "start-partition", None),
    )
    r = Stats().check({}, h, {})
    assert r["valid"] is True and r["count"] == 2 and r["by_f"]["write"]["fail"] == 1
    assert r["never_ok"] == ["write"]
    assert Stats().check({}, h[2:4], {})["valid"] is False


def test_availability_and_heal_convention() -> None:
    h = ops(
        (0, 0, "invoke", "read", None),
        (0.1, 0, "ok", "read", 1),
        (1, "nemesis", "invoke", "start-partition", "halves"),
        (1.1, "nemesis", "info", "start-partition", None),
        (1.2, 0, "invoke", "read", None),
        (3.0, 0, "info", "read", None),
        (4, "nemesis", "invoke", "stop-partition", None),
        (4.5, "nemesis", "info", "stop-partition", None),
        (5, 1, "invoke", "read", None),
        (6.5, 1, "ok", "read", 1),
    )
    intervals, heals = nemesis_intervals(h)
    assert [t for t, _ in heals] == [4.5]
    assert [(iv.name, iv.start, iv.end) for iv in intervals] == [("partition", 1.0, 4.5)]
    r = Availability().check({}, h, {})
    assert r["valid"] is True
    assert r["heals"][0]["recovered_after_s"] == 2.0
    assert r["longest_outage_s"] == pytest.approx(6.4)
    assert r["ok_fraction"] == pytest.approx(2 / 3, abs=1e-3)
    assert Availability(min_ok_fraction=0.9).check({}, h, {})["valid"] is False


def test_compose_and_registry() -> None:
    h = ops(
        (0, 0, "invoke", "add", 1),
        (1, 0, "ok", "add", 1),
        (2, 1, "invoke", "read", None),
        (3, 1, "ok", "read", [1]),
    )
    r = Compose({"set": get_checker("set"), "stats": get_checker("stats")}).check({}, h, {})
    assert r["valid"] is True and r["set"]["valid"] is True
    h[-1]["value"] = []
    # the read began 1 s after the ack and missed it: lost (Jepsen's rule), whatever the test's quiet period;
    # a stability window is an option of the checker, never taken from the test
    both = Compose({"set": get_checker("set"), "stats": get_checker("stats")})
    assert both.check({"quiet_period": 5}, h, {})["valid"] is False
    assert get_checker("set", stability_window_s=1).check({}, h, {})["valid"] is False
    assert get_checker("set", stability_window_s=5).check({"quiet_period": 0}, h, {})["valid"] == "unknown"
    assert {
        "linearizable",
        "set",
        "bank",
        "counter",
        "unique-ids",
        "catalog",
        "stats",
        "availability",
    } <= set(CHECKERS)
    with pytest.raises(ValueError, match="unknown checker"):
        get_checker("nope")


def test_a_heal_at_the_very_end_is_judged_by_the_quiet_period() -> None:
    """The demo's case: the last fault heals after the clients stopped; the runner then waits out the
    quiet period. No client op after the heal is no evidence of an outage."""
    main = ops(
        *call(0, 0.5, 0, "write", 1),
        *fault(1, 1.1, "start-partition"),
        *call(2, 2.2, 1, "read", 1),
        *call(9.9, 10.0, 1, "read", 1),
        *fault(10.2, 10.4, "stop-partition"),
    )
    r = Availability().check({"quiet_period": 5}, main, {})
    assert r["valid"] is True and r["unrecovered_heals"] == 0
    assert r["heals"][0]["recovered_after_s"] is None and "quiet period (5 s)" in r["heals"][0]["judged_by"]
    assert r["longest_outage_s"] == pytest.approx(7.8)  # between the oks at 2.2 and 10.0; not the end
    # without a quiet period to go by, such a heal cannot be judged
    assert Availability().check({}, main, {})["valid"] == "unknown"
    # final reads after the quiet period: recovery is timed from when the clients resumed, not the heal
    final = [*main, *ops((15.4, 2, "invoke", "read", None), (15.6, 2, "ok", "read", 1))]
    r = Availability().check({"quiet_period": 5}, final, {})
    assert r["valid"] is True and r["heals"][0]["recovered_after_s"] == pytest.approx(0.2)
    assert r["heals"][0]["clients_idle_s"] == pytest.approx(5.0) and "judged_by" not in r["heals"][0]
    # a heal followed by client ops none of which succeeded is still unknown
    dead = [*main, *ops((15.4, 2, "invoke", "read", None), (16.4, 2, "fail", "read", None))]
    assert Availability().check({"quiet_period": 5}, dead, {})["valid"] == "unknown"
