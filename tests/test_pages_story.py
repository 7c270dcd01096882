"""What went wrong, in words: each checker's failing result told as a headline, sentences and tables."""

from __future__ import annotations

from typing import Any

from histories import call, ops

from faultline.checkers.bank import BankChecker
from faultline.checkers.catalog import CatalogChecker
from faultline.checkers.elle import checker as elle
from faultline.checkers.linearizability import check, prefix_states
from faultline.checkers.set import SetChecker
from faultline.pages.story import story


def test_linearizability_names_the_op_the_values_and_their_writers() -> None:
    h = ops(
        (0, 0, "invoke", "write", 1, "x"),
        (1, 0, "ok", "write", 1, "x"),
        (2, 1, "invoke", "write", 4, "x"),
        (3, 1, "ok", "write", 4, "x"),
        (4, 2, "invoke", "read", None, "x"),
        (5, 2, "ok", "read", 1, "x"),
    )
    r = check(h, "register")
    assert r["valid"] is False and prefix_states(r) == [1, 4]
    s = story("workload", {"valid": False, "workload": r}, h)
    assert s.headline == (
        'workload (linearizability): a read on key "x" returned 1, but the register could only '
        "have held 4 at that point."
    )
    assert (
        "The operation that cannot be placed: process 2's read 1 (invoked at 4.000 s, ok at 5.000 s)."
        in s.lines
    )
    assert "4 was written by process 1's write 4 (invoked at 2.000 s, ok at 3.000 s)." in s.lines
    assert any(line.startswith("The value read, 1, was written by process 0's write 1") for line in s.lines)
    _title, cols, rows = s.tables[0]
    assert cols[-1] == "state after" and [row[-1] for row in rows] == ["1", "4"]


def test_prefix_states_refuses_a_prefix_the_model_rejects() -> None:
    r = {"model": "register", "failure": {"linearized": [{"f": "read", "value": 3, "outcome": "ok"}]}}
    assert prefix_states(r) is None and prefix_states({"valid": True}) is None
    assert prefix_states({**r, "model": "no-such-model"}) is None


def test_set_counts_lost_adds_with_when_they_were_acknowledged() -> None:
    h = ops(*call(0, 1, 0, "add", 1), *call(2, 3.5, 1, "add", 2), *call(10, 11, 3, "read", [1, 9]))
    s = story("set", SetChecker().check({}, h, {}), h)
    assert s.headline == (
        "set: 1 of 2 acknowledged adds were lost (missing from every read begun after the last "
        "one that showed them); 1 elements read that were never added."
    )
    assert "Lost, for example: 2 (acknowledged at 3.500 s)." in s.lines
    assert "The first loss was proven 11.000 s into the run." in s.lines
    assert s.tables[0][2] == [["2", "3.500 s"]]


def test_set_story_says_when_a_missing_add_is_not_yet_proven_lost() -> None:
    """A read 2.5 s after the ack, inside a 5-s stability window (an option): missing, but not called lost."""
    h = ops(*call(0, 1, 0, "add", 1), *call(2, 3.5, 1, "add", 2), *call(6, 7, 3, "read", [1]))
    assert SetChecker().check({}, h, {})["valid"] is False  # no window (the default): Jepsen's rule, lost
    res = SetChecker(stability_window_s=5).check({}, h, {})
    assert res["valid"] == "unknown"
    s = story("set", res, h)
    assert "1 acknowledged adds were missing from the last reads, too soon after" in s.headline
    assert "stability window" in s.headline
    assert "were lost" not in s.headline


def test_set_story_survives_fields_it_does_not_know_or_miss() -> None:
    s = story("set", {"valid": False, "lost_count": 3, "lost_examples": [{"element": 1}]}, [])
    assert s.headline.startswith("set: 3 of ? acknowledged adds were lost")


def test_bank_tells_the_wrong_totals_and_negative_balances() -> None:
    h = ops((0, 0, "invoke", "read", None), (1, 0, "ok", "read", {"0": 110, "1": -20}))
    s = story("bank", BankChecker(total=100, accounts=2).check({}, h, {}), h)
    assert s.headline == "bank: 1 reads saw a total other than 100; 1 reads saw a negative balance."
    assert (
        'Process 0\'s read at 1.000 s summed to 90 (expected 100): balances {"0": 110, "1": -20}.' in s.lines
    )


def test_catalog_tells_each_kind_of_problem() -> None:
    h = ops(
        (0, 0, "invoke", "create-table", "t0"),
        (1, 0, "ok", "create-table", "t0"),
        (20, 4, "invoke", "list-tables", None),
        (21, 4, "ok", "list-tables", ["zz"]),
    )
    s = story("catalog", CatalogChecker().check({}, h, {}), h)
    assert "1 acknowledged tables missing from a later listing" in s.headline
    assert "1 listed tables that were never created" in s.headline
    assert any(line.startswith('lost: e.g. table "t0", seen at') for line in s.lines)


def test_transactions_reuse_elle_explanations() -> None:
    h: list[dict[str, Any]] = []
    for p, mops in (
        (0, [["append", "x", 1]]),
        (1, [["r", "x", [1]], ["append", "y", 1]]),
        (0, [["r", "y", [1]], ["r", "x", []]]),
    ):
        for typ in ("invoke", "ok"):
            h.append({"index": len(h), "time": len(h), "type": typ, "process": p, "f": "txn", "value": mops})
    r = elle.check(h, "list-append")
    assert r["valid"] is False
    s = story("transactions", r, h)
    assert s.headline.startswith("transactions: ") and "the history is not" in s.headline
    kind = r["anomaly_types"][0]
    assert s.lines[0] == f"{kind}: {r['anomalies'][kind][0]['explanation']}"
    assert s.figure.startswith("<svg") and s.figure == r["anomalies"][kind][0]["svg"]  # redrawn, the same
    forged = {
        **r,
        "anomalies": {kind: [{**r["anomalies"][kind][0], "svg": "<script>x</script>", "steps": None}]},
    }
    assert story("transactions", forged, h).figure == ""  # never the result's own markup


def test_other_checkers_fall_back_to_their_error_or_counts() -> None:
    assert story("counter", {"valid": False, "errors_count": 2}, []).headline == "counter: errors: 2."
    assert (
        story("x", {"valid": "unknown", "error": "no successful read"}, []).headline
        == "x: no successful read"
    )
