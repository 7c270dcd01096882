"""The set checker: Jepsen's set-full outcomes and verdicts, its continuous detection, and the optional
stability window, on hand-made histories and on the cases of Jepsen's own tests."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.checkers.detection import first_anomaly, history_index_times
from faultline.checkers.set import SetChecker

S = 1_000_000_000


def hist(*events: tuple[Any, ...]) -> list[dict[str, Any]]:
    """(time_s, process, type, f, value) -> history."""
    return [
        {"index": i, "time": int(e[0] * S), "process": e[1], "type": e[2], "f": e[3], "value": e[4]}
        for i, e in enumerate(events)
    ]


def read(t0: float, t1: float, proc: int, value: list[int]) -> list[tuple[Any, ...]]:
    return [(t0, proc, "invoke", "read", None), (t1, proc, "ok", "read", value)]


def add(t0: float, t1: float, proc: int, v: int, typ: str = "ok") -> list[tuple[Any, ...]]:
    return [(t0, proc, "invoke", "add", v), (t1, proc, typ, "add", v)]


def test_a_loss_is_timed_from_the_first_read_that_proves_it() -> None:
    # 1 acknowledged at 1 s, shown by the read begun at 2 s, then missing from every read from 4 s on
    h = hist(
        *add(0, 1, 0, 1),
        *add(0.5, 1.5, 1, 2),
        *read(2, 3, 2, [1, 2]),
        *read(4, 4.5, 2, [2]),
        *read(6, 6.5, 2, [2]),
        *read(8.5, 9, 2, [2]),
        *read(12, 12.2, 2, [2]),
    )
    r = SetChecker().check({}, h, {})
    assert (
        r["valid"] is False and r["lost"] == [1] and r["lost_count"] == 1 and r["stability_window_s"] is None
    )
    # last seen: the invocation (2 s) of the last read that showed it; the first read begun later proves it
    assert r["worst_lost"][0] == {
        "element": 1,
        "known_s": 1.0,
        "last_seen_s": 2.0,
        "lost_latency_s": 1.0,
        "detected_s": 4.5,
        "detected_index": 7,
    }
    assert r["lost_latencies_ms"] == {"0": 1000, "0.5": 1000, "0.95": 1000, "0.99": 1000, "1": 1000}
    assert r["op"]["time"] == int(4.5 * S) and r["op"]["f"] == "read" and r["first_lost_detected_s"] == 4.5
    assert first_anomaly({"workload": r}, history_index_times(h))[0] == 4.5
    assert r["stable_count"] == 1 and r["stale_count"] == 0


def test_with_a_stability_window_the_proof_is_a_read_begun_that_long_after_it_was_last_seen() -> None:
    h = hist(
        *add(0, 1, 0, 1),
        *add(0.5, 1.5, 1, 2),
        *read(2, 3, 2, [1, 2]),
        *read(4, 4.5, 2, [2]),
        *read(6, 6.5, 2, [2]),
        *read(8.5, 9, 2, [2]),
        *read(12, 12.2, 2, [2]),
    )
    r = SetChecker(stability_window_s=5).check({}, h, {})
    # last seen at 2 s (the showing read's invocation): the first read begun at >= 7 s proves it, done at 9 s
    assert r["valid"] is False and r["stability_window_s"] == 5
    assert r["worst_lost"][0]["detected_s"] == 9.0 and r["worst_lost"][0]["last_seen_s"] == 2.0
    assert r["op"]["time"] == 9 * S and r["first_lost_detected_s"] == 9.0


def test_a_loss_no_read_confirmed_past_the_window_is_unknown_not_invalid() -> None:
    h = hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 4.5, 2, [2]))
    assert SetChecker().check({}, h, {})["valid"] is False  # off by default: Jepsen's rule
    r = SetChecker(stability_window_s=5).check({}, h, {})
    assert r["valid"] == "unknown" and r["lost"] == [] and r["unconfirmed_lost"] == [1]
    assert "op" not in r and "no read began" in r["error"]
    assert SetChecker(stability_window_s=1).check({}, h, {})["valid"] is False
    # the window counts from the invocation of the read that showed it (2 s), not its completion (3 s)
    assert SetChecker(stability_window_s=2).check({}, h, {})["valid"] is False
    assert SetChecker(stability_window_s=2.01).check({}, h, {})["valid"] == "unknown"


def test_the_test_maps_quiet_period_is_no_window() -> None:
    h = hist(*add(0, 1, 0, 1), *read(1.5, 2, 1, []))
    r = SetChecker().check({"quiet_period": 5}, h, {})
    assert r["valid"] is False and r["stability_window_s"] is None


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "5", True])
def test_a_bad_window_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="stability_window_s must be a finite number >= 0"):
        SetChecker(stability_window_s=bad)


def test_stale_then_back_is_recovered_visibility_not_loss() -> None:
    # 1 acknowledged at 1 s, missing from the read begun at 2 s, back at 4 s and in the final read
    h = hist(*add(0, 1, 0, 1), *read(2, 2.5, 1, []), *read(4, 4.5, 1, [1]), *read(20, 21, 1, [1]))
    r = SetChecker().check({}, h, {})
    assert r["valid"] is True and r["stale"] == [1] and r["lost_count"] == 0
    assert r["worst_stale"] == [
        {
            "element": 1,
            "stable_latency_ms": 1000,
            "stable_latency_s": 1.0,
            "known": {"process": 0, "f": "add", "index": 1, "time": S, "type": "ok"},
            "last_absent": {"process": 1, "f": "read", "index": 2, "time": 2 * S, "type": "invoke"},
        }
    ]
    strict = SetChecker(linearizable=True).check({}, h, {})
    assert strict["valid"] is False and strict["op"]["time"] == int(2.5 * S)


def test_a_read_concurrent_with_the_add_that_misses_it_is_not_stale() -> None:
    h = hist(
        (0, 0, "invoke", "add", 1),
        (0.1, 1, "invoke", "read", None),
        (0.2, 1, "ok", "read", []),
        (1, 0, "ok", "add", 1),
        *read(9, 10, 1, [1]),
    )
    r = SetChecker(linearizable=True).check({}, h, {})
    assert r["valid"] is True and r["stale_count"] == 0 and r["stable_count"] == 1


def test_a_miss_under_a_millisecond_after_the_ack_is_not_stale_as_in_jepsen() -> None:
    """Jepsen counts stable latency in whole milliseconds: a stale element is one whose latency is over 0."""
    h = hist(*add(0, 1, 0, 1), *read(1.0005, 1.1, 1, []), *read(2, 3, 1, [1]))
    r = SetChecker(linearizable=True).check({}, h, {})
    assert r["valid"] is True and r["stale_count"] == 0 and r["stable_latencies_ms"]["1"] == 0
    h = hist(*add(0, 1, 0, 1), *read(1.001, 1.1, 1, []), *read(2, 3, 1, [1]))
    assert SetChecker(linearizable=True).check({}, h, {})["stale"] == [1]


def test_never_read_recovered_unexpected_duplicated() -> None:
    h = hist(
        *add(0, 1, 0, 1),
        *add(0, 1, 1, 2, "info"),
        *add(0, 1, 2, 3, "fail"),
        *read(9, 10, 3, [1, 2, 2, 7]),
        *add(11, 12, 0, 4),
    )
    r = SetChecker().check({}, h, {})
    assert r["valid"] is False
    assert r["never_read"] == [3, 4] and r["recovered"] == [2] and r["unexpected"] == [7]
    assert r["duplicated"] == [[2, 2]] and r["op"]["time"] == 10 * S


def test_nothing_stable_or_no_read_is_unknown() -> None:
    none = SetChecker().check({}, hist(*add(0, 1, 0, 1)), {})
    assert none["valid"] == "unknown" and none["error"] == "no successful read" and none["never_read"] == [1]
    assert (
        SetChecker().check({}, hist(*add(0, 1, 0, 1, "fail"), *read(5, 6, 1, [])), {})["valid"] == "unknown"
    )
    ok = SetChecker().check({}, hist(*add(0, 1, 0, 1), *read(5, 6, 1, [1])), {})
    assert ok["valid"] is True and "op" not in ok


def test_element_first_known_from_a_read_counts_its_later_loss() -> None:
    # the add never completed (info), a read showed it: known from then; later reads miss it for good
    h = hist((0, 0, "invoke", "add", 1), *read(1, 2, 1, [1]), *read(10, 11, 1, []), (12, 0, "info", "add", 1))
    r = SetChecker(stability_window_s=5).check({}, h, {})
    assert r["valid"] is False and r["lost"] == [1] and r["recovered"] == [1]


def test_an_element_added_again_starts_a_new_timeline_as_in_jepsen() -> None:
    # 1 acknowledged and read, then added again (still open) and missed: no longer known, so never read
    h = hist(*add(0, 1, 0, 1), *read(2, 3, 1, [1]), (4, 0, "invoke", "add", 1), *read(5, 6, 1, []))
    r = SetChecker().check({}, h, {})
    assert r["valid"] == "unknown" and r["never_read"] == [1] and r["acknowledged_count"] == 1


def test_a_history_without_times_judges_by_order_alone() -> None:
    """No times (many external formats): the window has nothing to count, so Jepsen's rule decides by position."""
    untimed = [
        {k: v for k, v in op.items() if k != "time"}
        for op in hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 5, 2, [2]))
    ]
    r = SetChecker(stability_window_s=5).check({}, untimed, {})
    assert r["valid"] is False and r["lost"] == [1] and r["unconfirmed_lost_count"] == 0
    assert r["stability_window_s"] is None
    timed = hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 5, 2, [2]))
    assert SetChecker(stability_window_s=5).check({}, timed, {})["valid"] == "unknown"


def test_lists_are_in_natural_order() -> None:
    h = hist(*[e for v in (10, 2, 1) for e in add(0, 1, v, v)], *read(2, 3, 50, []))
    assert SetChecker().check({}, h, {})["lost"] == [1, 2, 10]


# --- Jepsen's own cases ------------------------------------------------------------------------------------
# Transcribed from jepsen-io/jepsen, jepsen/test/jepsen/checker_test.clj (deftest set-full-test and
# deftest set-test-): the histories and the results Jepsen's tests expect of checker/set-full and
# checker/set. Their `history` helper numbers the ops from 0 and gives op i the time i ms.

MS = 1_000_000


def jepsen_history(*ops: tuple[int, str, str, Any]) -> list[dict[str, Any]]:
    """(process, type, f, value) -> history with Jepsen's test indexes and times (op i at i ms)."""
    return [
        {"index": i, "time": i * MS, "process": p, "type": t, "f": f, "value": v}
        for i, (p, t, f, v) in enumerate(ops)
    ]


def as_jepsen(r: dict[str, Any]) -> dict[str, Any]:
    """Our result under Jepsen's set-full keys (latency maps keyed by quantile, elements of worst-stale with the
    index and time of the ops that Jepsen's test names)."""
    out = {
        "valid?": r["valid"],
        "attempt-count": r["attempt_count"],
        "lost": r["lost"],
        "lost-count": r["lost_count"],
        "never-read": r["never_read"],
        "never-read-count": r["never_read_count"],
        "stale-count": r["stale_count"],
        "stale": r["stale"],
        "stable-count": r["stable_count"],
        "duplicated-count": r["duplicated_count"],
        "duplicated": {k: n for k, n in r["duplicated"]},
        "worst-stale": [
            {
                "element": w["element"],
                "known": w["known"],
                "last-absent": w["last_absent"],
                "stable-latency": w["stable_latency_ms"],
            }
            for w in r["worst_stale"]
        ],
    }
    for ours, theirs in (
        ("stable_latencies_ms", "stable-latencies"),
        ("lost_latencies_ms", "lost-latencies"),
    ):
        if ours in r:
            out[theirs] = {float(q): ms for q, ms in r[ours].items()}
    return out


A, A_OK = (0, "invoke", "add", 0), (0, "ok", "add", 0)
R, R_HIT, R_MISS = (1, "invoke", "read", None), (1, "ok", "read", [0]), (1, "ok", "read", [])
NOTHING = {
    "lost": [],
    "lost-count": 0,
    "stale-count": 0,
    "stale": [],
    "worst-stale": [],
    "duplicated-count": 0,
    "duplicated": {},
}
ZEROS = {0: 0, 0.5: 0, 0.95: 0, 0.99: 0, 1: 0}


def full(*ops: tuple[int, str, str, Any]) -> dict[str, Any]:
    return as_jepsen(SetChecker().check({}, jepsen_history(*ops), {}))


def test_jepsen_set_full_never_read() -> None:
    assert full(A, A_OK) == {
        **NOTHING,
        "valid?": "unknown",
        "attempt-count": 1,
        "never-read": [0],
        "never-read-count": 1,
        "stable-count": 0,
    }


def test_jepsen_set_full_never_confirmed_never_read() -> None:
    assert full(A, R, R_MISS) == {
        **NOTHING,
        "valid?": "unknown",
        "attempt-count": 1,
        "never-read": [0],
        "never-read-count": 1,
        "stable-count": 0,
    }


@pytest.mark.parametrize(
    "ops",
    [(R, A, R_HIT, A_OK), (R, A, A_OK, R_HIT), (A, R, R_HIT, A_OK), (A, R, A_OK, R_HIT), (A, A_OK, R, R_HIT)],
    ids=["concurrent-read-before", "outside", "inside", "after", "subsequent"],
)
def test_jepsen_set_full_successful_read_either_concurrently_or_after(ops: tuple[Any, ...]) -> None:
    assert full(*ops) == {
        **NOTHING,
        "valid?": True,
        "attempt-count": 1,
        "never-read": [],
        "never-read-count": 0,
        "stable-count": 1,
        "stable-latencies": ZEROS,
    }


def test_jepsen_set_full_absent_read_after() -> None:
    assert full(A, A_OK, R, R_MISS) == {
        **NOTHING,
        "valid?": False,
        "attempt-count": 1,
        "lost": [0],
        "lost-count": 1,
        "never-read": [],
        "never-read-count": 0,
        "stable-count": 0,
        "lost-latencies": ZEROS,
    }


@pytest.mark.parametrize(
    "ops",
    [(R, A, R_MISS, A_OK), (R, A, A_OK, R_MISS), (A, R, R_MISS, A_OK), (A, R, A_OK, R_MISS)],
    ids=["read-before", "read-outside", "read-inside", "read-after"],
)
def test_jepsen_set_full_absent_read_concurrently(ops: tuple[Any, ...]) -> None:
    assert full(*ops) == {
        **NOTHING,
        "valid?": "unknown",
        "attempt-count": 1,
        "never-read": [0],
        "never-read-count": 1,
        "stable-count": 0,
    }


A0, A0_OK, A1, A1_OK = (
    (0, "invoke", "add", 0),
    (0, "ok", "add", 0),
    (1, "invoke", "add", 1),
    (1, "ok", "add", 1),
)
R2, R3 = (2, "invoke", "read", None), (3, "invoke", "read", None)


def r_ok(proc: int, *values: int) -> tuple[int, str, str, Any]:
    return (proc, "ok", "read", list(values))


def test_jepsen_set_full_write_present_missing() -> None:
    # a0 and a1 concurrently, a read of 1 before a1 completes; then reads of both, of 0, of nothing
    ops = (A0, A1, R2, r_ok(2, 1), A0_OK, A1_OK, R2, r_ok(2, 0, 1), R2, r_ok(2, 0), R2, r_ok(2))
    assert full(*ops) == {
        **NOTHING,
        "valid?": False,
        "attempt-count": 2,
        "lost": [0, 1],
        "lost-count": 2,
        "never-read": [],
        "never-read-count": 0,
        "stable-count": 0,
        "lost-latencies": {0: 3, 0.5: 4, 0.95: 4, 0.99: 4, 1: 4},
    }
    r = SetChecker().check({}, jepsen_history(*ops), {})
    # 1 is proven lost by the read begun at index 8 (after the last that showed it, at 6), done at 9
    assert r["op"]["index"] == 9 and [d["detected_index"] for d in r["worst_lost"]] == [9, 11]


def test_jepsen_set_full_write_flutter_stable_lost() -> None:
    # a0, then a1, a read of 1 before a1 completes, then reads of 0 and of 1 concurrently, 1's begun later:
    # 1 recovers (stale, stable latency 2 ms), 0 is lost (no time after which every read begun sees it)
    ops = (A0, A0_OK, A1, R2, r_ok(2, 1), A1_OK, R2, R3, r_ok(3, 1), r_ok(2, 0))
    assert full(*ops) == {
        "valid?": False,
        "attempt-count": 2,
        "lost": [0],
        "lost-count": 1,
        "never-read": [],
        "never-read-count": 0,
        "duplicated-count": 0,
        "duplicated": {},
        "stale-count": 1,
        "stale": [1],
        "stable-count": 1,
        "worst-stale": [
            {
                "element": 1,
                "known": {"process": 2, "type": "ok", "f": "read", "index": 4, "time": 4 * MS},
                "last-absent": {"process": 2, "type": "invoke", "f": "read", "index": 6, "time": 6 * MS},
                "stable-latency": 2,
            }
        ],
        "lost-latencies": {0: 5, 0.5: 5, 0.95: 5, 0.99: 5, 1: 5},
        "stable-latencies": {0: 2, 0.5: 2, 0.95: 2, 0.99: 2, 1: 2},
    }
    r = SetChecker().check({}, jepsen_history(*ops), {})
    assert r["op"]["index"] == 8  # the read begun at 7, after the last that showed 0 (6), done at 8
    # with a window as long as the whole history the loss is not confirmed
    assert SetChecker(stability_window_s=1).check({}, jepsen_history(*ops), {})["valid"] == "unknown"


def j_add(proc: int, outcome: str, v: int) -> tuple[tuple[int, str, str, Any], ...]:
    """An add of `v` by `proc` in Jepsen's form: its invocation, then its completion."""
    return (proc, "invoke", "add", v), (proc, outcome, "add", v)


SET_TEST = (
    *j_add(0, "ok", 0),
    *j_add(0, "ok", 1),
    *j_add(1, "info", 10),
    *j_add(1, "info", 11),
    *j_add(2, "fail", 20),
    *j_add(2, "fail", 21),
    (4, "invoke", "read", None),
    (4, "ok", "read", [0, 10, 20, 30]),
)


@pytest.mark.parametrize("final_read", [True, False], ids=["set", "set-full"])
def test_jepsen_set(final_read: bool) -> None:
    """deftest set-test-: Jepsen's plain set checker; our set-full rules agree on its one final read."""
    r = SetChecker(final_read=final_read).check({}, jepsen_history(*SET_TEST), {})
    assert r["valid"] is False and r["ok_count"] == 3 and r["lost_count"] == 1 and r["lost"] == [1]
    assert r["acknowledged_count"] == 2 and r["attempt_count"] == 6
    assert r["recovered_count"] == 2 and r["recovered"] == [10, 20]
    assert r["unexpected_count"] == 1 and r["unexpected"] == [30]
    assert r["op"]["index"] == 13
    if final_read:
        assert r["ok"] == [0, 10, 20]


def test_final_read_judges_the_last_read_only() -> None:
    # a read missing 1 while its add is still open, then the add acknowledged: Jepsen's set calls 1 lost (the
    # final read missed an acknowledged add); set-full cannot tell (the read may have come first)
    h = hist((0, 0, "invoke", "add", 1), *read(1, 2, 1, []), (3, 0, "ok", "add", 1))
    r = SetChecker(final_read=True).check({}, h, {})
    assert r["valid"] is False and r["lost"] == [1] and r["op"]["index"] == 2
    assert SetChecker().check({}, h, {})["valid"] == "unknown"
    # stale then present in the last read: valid for both
    h = hist(*add(0, 1, 0, 1), *read(2, 3, 1, []), *read(4, 5, 1, [1, 2]), *add(6, 7, 0, 2, "info"))
    r = SetChecker(final_read=True).check({}, h, {})
    assert r["valid"] is True and r["recovered"] == [2] and "op" not in r
    assert SetChecker(final_read=True).check({}, hist(*add(0, 1, 0, 1)), {})["valid"] == "unknown"
    dup = SetChecker(final_read=True).check({}, hist(*add(0, 1, 0, 1), *read(2, 3, 1, [1, 1])), {})
    assert dup["valid"] is False and dup["duplicated"] == [[1, 2]]
