"""total-queue on hand-made histories, and `faultline check` choosing it (or refusing) for a foreign one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.inference import infer
from faultline.checkers.ops import BadOp
from faultline.checkers.queue import TotalQueue
from faultline.controller.cli import main


def h(*events: tuple[Any, ...]) -> list[dict[str, Any]]:
    """(process, type, f, value) -> history."""
    return [
        {"index": i, "time": i, "process": e[0], "type": e[1], "f": e[2], "value": e[3]}
        for i, e in enumerate(events)
    ]


def enq(p: int, v: int, t: str = "ok") -> list[tuple[Any, ...]]:
    return [(p, "invoke", "enqueue", v), (p, t, "enqueue", v)]


def deq(p: int, v: Any, t: str = "ok") -> list[tuple[Any, ...]]:
    return [(p, "invoke", "dequeue", None), (p, t, "dequeue", v)]


def drain(p: int, vs: Any, t: str = "ok") -> list[tuple[Any, ...]]:
    return [(p, "invoke", "drain", None), (p, t, "drain", vs)]


def test_everything_out_once_is_valid() -> None:
    r = TotalQueue().check(
        {}, h(*enq(0, 1), *enq(1, 2), *deq(0, 1), *deq(1, None, "fail"), *drain(0, [2])), {}
    )
    assert r["valid"] is True and r["lost_count"] == 0 and r["dequeued_count"] == 2 and r["drained"]


def test_lost_unexpected_duplicated_recovered() -> None:
    hist = h(*enq(0, 1), *enq(1, 2), *enq(2, 3, "info"), *deq(0, 1), *deq(1, 1), *drain(0, [3, 9]))
    r = TotalQueue().check({}, hist, {})
    assert r["valid"] is False
    assert (r["lost"], r["unexpected"], r["duplicated"], r["recovered_count"]) == ([2], [9], [[1, 2]], 1)
    assert r["lost_unexplained_count"] == 1


def test_duplicates_alone_are_allowed_for_an_at_least_once_queue() -> None:
    hist = h(*enq(0, 1), *deq(0, 1), *deq(1, 1), *drain(0, []))
    assert TotalQueue().check({}, hist, {})["valid"] is False
    assert TotalQueue(allow_duplicates=True).check({}, hist, {})["valid"] is True


def test_a_dequeue_in_doubt_may_account_for_one_loss() -> None:
    """Each info dequeue may have taken one element enqueued before it completed: losses it can account
    for are unknown, one more is proven."""
    one = h(*enq(0, 1), *deq(1, None, "info"), *drain(0, []))
    assert TotalQueue().check({}, one, {})["valid"] == "unknown"
    two = h(*enq(0, 1), *enq(0, 2), *deq(1, None, "info"), *drain(0, []))
    r = TotalQueue().check({}, two, {})
    assert r["valid"] is False and r["lost_count"] == 2 and r["lost_unexplained_count"] == 1
    # a dequeue that completed before the element was enqueued cannot have taken it
    before = h(*deq(1, None, "info"), *enq(0, 1), *drain(0, []))
    assert TotalQueue().check({}, before, {})["valid"] is False
    # a dequeue that never completed may have taken anything enqueued at any time
    open_ = h((1, "invoke", "dequeue", None), *enq(0, 1), *drain(0, []))
    assert TotalQueue().check({}, open_, {})["valid"] == "unknown"


def test_without_a_completed_drain_losses_are_unknown() -> None:
    assert TotalQueue().check({}, h(*enq(0, 1), *drain(0, None, "fail")), {})["valid"] == "unknown"
    # an info drain may have taken any number of elements
    assert (
        TotalQueue().check({}, h(*enq(0, 1), *enq(0, 2), *drain(0, [], "info"), *drain(0, [])), {})["valid"]
        == "unknown"
    )
    # ...but what it carries counts, and unexpected elements stay proven
    assert TotalQueue().check({}, h(*enq(0, 1), *drain(0, [1, 7], "info")), {})["valid"] is False
    # a history with no drain at all (one written as dequeues) is judged as it stands
    assert TotalQueue().check({}, h(*enq(0, 1)), {})["valid"] is False


def test_bad_ops_are_bad_input() -> None:
    with pytest.raises(BadOp):
        TotalQueue().check({}, h(*enq(0, 1), (0, "invoke", "read", None), (0, "ok", "read", 1)), {})
    with pytest.raises(BadOp):
        TotalQueue().check({}, h(*drain(0, 3)), {})


def test_inferred_from_the_ops_and_from_the_test_map() -> None:
    hist = h(*enq(0, 1), *deq(0, 1))
    assert infer(hist).checker == "total-queue"
    assert infer([], {"workload": "queue"}).checker == "total-queue"
    assert infer([], {"workload": "lock"}).model == "mutex"


def test_faultline_check_on_a_queue_history(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "queue.jsonl"
    hist = h(*enq(0, 1), *enq(1, 2), *deq(0, 1), *drain(0, []))
    p.write_text("".join(json.dumps(o) + "\n" for o in hist))
    rc = main(["check", str(p)])
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rc == 1 and out["valid"] is False and out["evidence"]["lost"] == [2]
    bad = tmp_path / "mixed.jsonl"
    bad.write_text(
        "".join(
            json.dumps(o) + "\n" for o in h(*enq(0, 1), (0, "invoke", "frob", None), (0, "ok", "frob", 1))
        )
    )
    rc = main(["check", str(bad)])
    err = capsys.readouterr().err
    assert rc == 254 and len(err.strip().splitlines()) == 1 and "frob" in err
