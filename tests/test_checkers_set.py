"""The set checker's continuous detection (Jepsen's set-full outcomes) on hand-made histories."""

from __future__ import annotations

from typing import Any

from faultline.checkers.detection import first_anomaly, history_index_times
from faultline.checkers.set import SetChecker

S = 1_000_000_000


def hist(*events: tuple[Any, ...]) -> list[dict[str, Any]]:
    """(time_s, process, type, f, value) -> history."""
    return [{"index": i, "time": int(e[0] * S), "process": e[1], "type": e[2], "f": e[3], "value": e[4]}
            for i, e in enumerate(events)]


def read(t0: float, t1: float, proc: int, value: list[int]) -> list[tuple[Any, ...]]:
    return [(t0, proc, "invoke", "read", None), (t1, proc, "ok", "read", value)]


def add(t0: float, t1: float, proc: int, v: int, typ: str = "ok") -> list[tuple[Any, ...]]:
    return [(t0, proc, "invoke", "add", v), (t1, proc, typ, "add", v)]


def test_a_loss_is_proven_by_the_first_read_past_the_window_and_timed() -> None:
    # 1 acknowledged at 1 s, seen at 2-3 s, then missing from every read from 4 s on
    h = hist(*add(0, 1, 0, 1), *add(0.5, 1.5, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 4.5, 2, [2]),
             *read(6, 6.5, 2, [2]), *read(8.5, 9, 2, [2]), *read(12, 12.2, 2, [2]))
    r = SetChecker(stability_window_s=5).check({}, h, {})
    assert r["valid"] is False and r["lost"] == [1] and r["lost_count"] == 1
    # last seen at 3 s (the read's completion): the first read begun at >= 8 s proves it, done at 9 s
    assert r["worst_lost"][0]["detected_s"] == 9.0 and r["worst_lost"][0]["last_seen_s"] == 3.0
    assert r["worst_lost"][0]["lost_latency_s"] == 2.0 and r["first_lost_detected_s"] == 9.0
    assert r["op"]["time"] == 9 * S and r["op"]["f"] == "read"
    assert first_anomaly({"workload": r}, history_index_times(h))[0] == 9.0
    assert r["stable_count"] == 1 and r["stale_count"] == 0


def test_a_loss_no_read_confirmed_past_the_window_is_unknown_not_invalid() -> None:
    h = hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 4.5, 2, [2]))
    r = SetChecker(stability_window_s=5).check({}, h, {})
    assert r["valid"] == "unknown" and r["lost"] == [] and r["unconfirmed_lost"] == [1]
    assert "op" not in r and "no read began" in r["error"]
    assert SetChecker(stability_window_s=1).check({}, h, {})["valid"] is False


def test_stale_then_back_is_recovered_visibility_not_loss() -> None:
    # 1 acknowledged at 1 s, missing from the read begun at 2 s, back at 4 s and in the final read
    h = hist(*add(0, 1, 0, 1), *read(2, 2.5, 1, []), *read(4, 4.5, 1, [1]), *read(20, 21, 1, [1]))
    r = SetChecker().check({}, h, {})
    assert r["valid"] is True and r["stale"] == [1] and r["lost_count"] == 0
    assert r["worst_stale"] == [{"element": 1, "stable_latency_s": 1.0}]
    strict = SetChecker(linearizable=True).check({}, h, {})
    assert strict["valid"] is False and strict["op"]["time"] == int(2.5 * S)


def test_a_read_concurrent_with_the_add_that_misses_it_is_not_stale() -> None:
    h = hist((0, 0, "invoke", "add", 1), (0.1, 1, "invoke", "read", None), (0.2, 1, "ok", "read", []),
             (1, 0, "ok", "add", 1), *read(9, 10, 1, [1]))
    r = SetChecker(linearizable=True).check({}, h, {})
    assert r["valid"] is True and r["stale_count"] == 0 and r["stable_count"] == 1


def test_never_read_recovered_unexpected_duplicated() -> None:
    h = hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2, "info"), *add(0, 1, 2, 3, "fail"), *read(9, 10, 3, [1, 2, 2, 7]),
             *add(11, 12, 0, 4))
    r = SetChecker().check({}, h, {})
    assert r["valid"] is False
    assert r["never_read"] == [3, 4] and r["recovered"] == [2] and r["unexpected"] == [7]
    assert r["duplicated"] == [[2, 2]] and r["op"]["time"] == 10 * S


def test_nothing_stable_or_no_read_is_unknown() -> None:
    assert SetChecker().check({}, hist(*add(0, 1, 0, 1)), {})["valid"] == "unknown"
    assert SetChecker().check({}, hist(*add(0, 1, 0, 1, "fail"), *read(5, 6, 1, [])), {})["valid"] == "unknown"
    ok = SetChecker().check({}, hist(*add(0, 1, 0, 1), *read(5, 6, 1, [1])), {})
    assert ok["valid"] is True and "op" not in ok


def test_element_first_known_from_a_read_counts_its_later_loss() -> None:
    # the add never completed (info), a read showed it: known from then; later reads miss it for good
    h = hist((0, 0, "invoke", "add", 1), *read(1, 2, 1, [1]), *read(10, 11, 1, []), (12, 0, "info", "add", 1))
    r = SetChecker(stability_window_s=5).check({}, h, {})
    assert r["valid"] is False and r["lost"] == [1] and r["recovered"] == [1]


def test_a_history_without_times_judges_by_order_alone() -> None:
    """No times (many external formats): no window to wait out, so Jepsen's rule decides by position."""
    untimed = [{k: v for k, v in op.items() if k != "time"}
               for op in hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 5, 2, [2]))]
    r = SetChecker(stability_window_s=5).check({}, untimed, {})
    assert r["valid"] is False and r["lost"] == [1] and r["unconfirmed_lost_count"] == 0
    timed = hist(*add(0, 1, 0, 1), *add(0, 1, 1, 2), *read(2, 3, 2, [1, 2]), *read(4, 5, 2, [2]))
    assert SetChecker(stability_window_s=5).check({}, timed, {})["valid"] == "unknown"
