"""The Elle-class checkers: the worked examples of the Elle paper, each anomaly, models, verdict rules."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from faultline.checkers.elle import checker, consistency
from faultline.checkers.elle.anomalies import classify, implied
from faultline.checkers.elle.graph import PR, RT, RW, WR, WW
from faultline.checkers.elle.txns import ElleInputError, detect_kind, parse
from faultline.checkers.registry import get as get_checker


class H:
    """A history under construction: transactions invoked and completed in the order of the calls."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.open: dict[str, tuple[Any, list[Any]]] = {}

    def _add(self, typ: str, process: Any, mops: list[Any]) -> None:
        self.ops.append(
            {
                "index": len(self.ops),
                "time": len(self.ops),
                "type": typ,
                "process": process,
                "f": "txn",
                "value": mops,
            }
        )

    def invoke(self, name: str, process: Any, mops: list[Any]) -> H:
        self.open[name] = (process, mops)
        self._add("invoke", process, [[f, k, None if f == "r" else v] for f, k, v in mops])
        return self

    def done(self, name: str, typ: str = "ok") -> H:
        process, mops = self.open.pop(name)
        self._add(typ, process, mops)
        return self

    def txn(self, process: Any, mops: list[Any], typ: str = "ok") -> H:
        return self.invoke("_", process, mops).done("_", typ)

    def concurrent(self, *txns: tuple[Any, list[Any]] | tuple[Any, list[Any], str]) -> H:
        """All invoked, then all completed: no realtime or process order among them."""
        for i, t in enumerate(txns):
            self.invoke(f"c{i}", t[0], t[1])
        for i, t in enumerate(txns):
            self.done(f"c{i}", t[2] if len(t) > 2 else "ok")  # type: ignore[misc]
        return self


def la(h: H, models: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return checker.check(h.ops, "list-append", models, **kw)


def rr(h: H, models: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return checker.check(h.ops, "rw-register", models, **kw)


# ------------------------------------------------------------------ the paper's worked examples


def test_paper_figure_2_g_single() -> None:
    """Fig. 2/3: T1 missed T2's append of 8 to 255, T3 saw it, and T1 appended 3 to 256 after T3's 4."""
    h = H().txn(
        1,
        [
            ["append", 253, 1],
            ["append", 253, 3],
            ["append", 253, 4],
            ["append", 255, 2],
            ["append", 255, 3],
            ["append", 255, 4],
            ["append", 255, 5],
            ["append", 256, 1],
            ["append", 256, 2],
        ],
    )
    h.txn(1, [["append", 255, 8], ["r", 253, [1, 3, 4]]])
    h.txn(1, [["append", 256, 4], ["r", 255, [2, 3, 4, 5, 8]], ["r", 256, [1, 2, 4]], ["r", 253, [1, 3, 4]]])
    h.txn(1, [["append", 250, 10], ["r", 253, [1, 3, 4]], ["r", 255, [2, 3, 4, 5]], ["append", 256, 3]])
    r = la(h)
    assert r["valid"] is False
    assert r["anomaly_types"] == ["G-single-item"]
    assert r["not"] == ["consistent-view", "repeatable-read"]
    case = r["anomalies"]["G-single-item"][0]
    assert sorted(op["index"] for op in case["cycle"]) == [3, 5, 7]
    assert sorted(s["type"] for s in case["steps"]) == ["rw", "wr", "ww"]
    text = case["explanation"]
    assert "appended 8 to key 255, which" in text and "did not see" in text
    assert "read T1's append of 8 to key 255" in text or "append of 8 to key 255" in text
    assert text.endswith("a contradiction.")


def test_paper_tidb_read_skew() -> None:
    """§7: T1 read 34 = [2 1] and appended 4; T2 appended 5; T3 read [2 1 5 4]: G-single."""
    h = H().txn(0, [["append", 34, 2]]).txn(0, [["append", 34, 1]])
    h.concurrent(
        (1, [["r", 34, [2, 1]], ["append", 36, 5], ["append", 34, 4]]),
        (2, [["append", 34, 5]]),
        (3, [["r", 34, [2, 1, 5, 4]]]),
    )
    r = la(h)
    assert r["valid"] is False and "G-single-item" in r["anomaly_types"]


def test_paper_yugabyte_g2_item() -> None:
    """§7: two transactions each miss the other's append."""
    h = H().concurrent((0, [["append", 3, 837], ["r", 4, []]]), (1, [["append", 4, 885], ["r", 3, []]]))
    r = la(h, ["serializable"])
    assert r["valid"] is False and r["anomaly_types"] == ["G2-item"]
    assert r["not"] == ["repeatable-read"]
    assert la(h, ["snapshot-isolation"])["valid"] is True  # write skew is allowed by SI


def test_paper_fauna_internal() -> None:
    """§7: T1 appended 6 to key 0 and then read nil."""
    r = la(H().txn(0, [["append", 0, 6], ["r", 0, None]]))
    assert r["valid"] is False and r["anomaly_types"] == ["internal"]
    assert "snapshot-isolation" in r["not"]


def test_paper_dgraph_register_internal() -> None:
    """§7: T1 set key 10 to 2, then read 1."""
    r = rr(H().txn(0, [["w", 10, 2], ["r", 10, 1]]))
    assert r["valid"] is False and "internal" in r["anomaly_types"]


def test_paper_dgraph_stale_read_is_realtime_g_single() -> None:
    """§7: T1 wrote 540 and finished before T2 began, yet T2 read 540 as nil."""
    h = H().txn(0, [["r", 541, None], ["w", 540, 2]]).txn(1, [["r", 540, None], ["w", 544, 1]])
    r = rr(h)
    assert r["valid"] is False and r["anomaly_types"] == ["G-single-item-realtime"]
    assert rr(h, ["serializable"])["valid"] is True
    assert r["not"] == ["strong-snapshot-isolation"]


def test_paper_dgraph_read_skew() -> None:
    """§7: T1 read 2432 = 10 and 2434 = nil; T2 wrote 2434; T3 wrote 2432 and read T2's 2434."""
    h = H().concurrent(
        (0, [["r", 2432, 10], ["r", 2434, None]]),
        (1, [["w", 2434, 10]]),
        (2, [["w", 2432, 10], ["r", 2434, 10]]),
    )
    r = rr(h)
    assert r["valid"] is False and r["anomaly_types"] == ["G-single-item"]
    assert [s["type"] for s in r["anomalies"]["G-single-item"][0]["steps"]].count("rw") == 1


def test_readme_g1c_example() -> None:
    """Elle's README: T1 appends x and reads y = [1]; T2 appends x and y; x = [1 2]: G1c."""
    h = H().concurrent(
        (0, [["append", "x", 1], ["r", "y", [1]]]),
        (1, [["append", "x", 2], ["append", "y", 1]]),
        (2, [["r", "x", [1, 2]]]),
    )
    r = la(h, ["serializable"])
    assert r["valid"] is False and r["anomaly_types"] == ["G1c"]
    assert r["not"] == ["read-committed"]


def test_paper_section2_registers_alone_show_nothing() -> None:
    """§2: without a version order, these register transactions cannot be shown non-serializable."""
    h = H().concurrent(
        (0, [["w", "z", 1], ["w", "x", 1], ["w", "y", 1]]),
        (1, [["r", "x", 1], ["w", "y", 2]]),
        (2, [["w", "x", 3], ["r", "y", 2], ["w", "z", 3]]),
    )
    assert rr(h)["valid"] is True


# ------------------------------------------------------------------ each anomaly


def test_g0_write_cycle() -> None:
    h = H().concurrent(
        (0, [["append", "x", 1], ["append", "y", 2]]),
        (1, [["append", "x", 2], ["append", "y", 1]]),
        (2, [["r", "x", [1, 2]], ["r", "y", [1, 2]]]),
    )
    r = la(h)
    assert r["anomaly_types"] == ["G0"] and r["not"] == ["read-uncommitted"]
    assert all(s["type"] == "ww" for s in r["anomalies"]["G0"][0]["steps"])


def test_g1a_and_dirty_update() -> None:
    h = H().concurrent((0, [["append", 1, 1]], "fail"), (1, [["append", 1, 2]]), (2, [["r", 1, [1, 2]]]))
    r = la(h)
    assert r["anomaly_types"] == ["G1a", "dirty-update"] and r["not"] == ["read-committed"]
    assert "failed transaction" in r["anomalies"]["G1a"][0]["explanation"]


def test_g1b_intermediate_read() -> None:
    h = H().concurrent((0, [["append", "x", 1], ["append", "x", 2]]), (1, [["r", "x", [1]]]))
    r = la(h)  # the reader also missed the writer's next append: a G-single cycle besides
    assert "G1b" in r["anomaly_types"] and "read-committed" in r["not"]
    h = H().concurrent((0, [["w", "x", 1], ["w", "x", 2]]), (1, [["r", "x", 1]]))
    assert rr(h)["anomaly_types"] == ["G1b"]


def test_register_aborted_read() -> None:
    h = H().concurrent((0, [["w", "x", 1]], "fail"), (1, [["r", "x", 1]]))
    r = rr(h)
    assert r["valid"] is False and r["anomaly_types"] == ["G1a"]


def test_incompatible_order_and_duplicates() -> None:
    h = H().concurrent(
        (0, [["append", "x", 1]]),
        (1, [["append", "x", 2]]),
        (2, [["r", "x", [1, 2]]]),
        (3, [["r", "x", [2, 1]]]),
    )
    r = la(h)
    assert "incompatible-order" in r["anomaly_types"] and r["valid"] is False
    r = la(H().concurrent((0, [["append", "x", 1]]), (1, [["r", "x", [1, 1]]])))
    assert r["anomaly_types"] == ["duplicate-elements"] and r["not"] == ["read-uncommitted"]


def test_duplicate_appends_make_the_verdict_unknown() -> None:
    h = H().concurrent((0, [["append", "x", 1]]), (1, [["append", "x", 1]]), (2, [["r", "x", [1]]]))
    r = la(h)
    assert r["valid"] == "unknown" and "duplicate-appends" in r["anomaly_types"]
    h = H().concurrent((0, [["w", "x", 1]]), (1, [["w", "x", 1]]), (2, [["r", "x", 1]]))
    assert rr(h)["valid"] == "unknown"


def test_garbage_reads_are_reported_not_counted() -> None:
    r = la(H().txn(0, [["r", "x", [7]]]))
    assert r["valid"] is True and r["informational"] == ["garbage-read"]
    assert "no transaction wrote" in r["anomalies"]["garbage-read"][0]["explanation"]


def test_lost_update() -> None:
    h = (
        H()
        .txn(0, [["append", 1, 0]])
        .concurrent((1, [["r", 1, [0]], ["append", 1, 1]]), (2, [["r", 1, [0]], ["append", 1, 2]]))
    )
    r = la(h)
    assert {"lost-update", "G2-item"} <= set(r["anomaly_types"])
    assert la(h, ["snapshot-isolation"])["valid"] is False
    assert la(h, ["read-committed"])["valid"] is True
    h = H().concurrent((1, [["r", "x", None], ["w", "x", 1]]), (2, [["r", "x", None], ["w", "x", 2]]))
    assert "lost-update" in rr(h)["anomaly_types"]


def test_future_read() -> None:
    r = la(H().txn(0, [["r", 1, [1]], ["append", 1, 1]]))
    assert r["anomaly_types"] == ["future-read"] and r["not"] == ["read-committed"]


def test_g_nonadjacent_item() -> None:
    """rw, wr, rw, wr: forbidden by snapshot isolation, although no rw edges are adjacent."""
    h = H().concurrent(
        (0, [["r", "a", []], ["r", "d", [1]]]),
        (1, [["append", "a", 1], ["append", "b", 1]]),
        (2, [["r", "b", [1]], ["r", "c", []]]),
        (3, [["append", "c", 1], ["append", "d", 1]]),
    )
    r = la(h)
    assert r["anomaly_types"] == ["G-nonadjacent-item"]
    assert r["not"] == ["repeatable-read", "snapshot-isolation"]


def test_process_and_realtime_variants() -> None:
    stale = H().txn(0, [["append", "x", 1]]).txn(0, [["r", "x", []]])
    assert la(stale)["anomaly_types"] == ["G-single-item-process"]
    other = H().txn(0, [["append", "x", 1]]).txn(1, [["r", "x", []]])
    r = la(other)
    assert r["anomaly_types"] == ["G-single-item-realtime"]
    assert (
        "completed (op 1) before T2 was invoked (op 2)"
        in r["anomalies"]["G-single-item-realtime"][0]["explanation"]
    )
    assert la(other, ["strong-session-serializable"])["valid"] is True
    assert la(stale, ["strong-session-serializable"])["valid"] is False
    g0 = H().txn(0, [["append", "x", 1]]).txn(1, [["append", "x", 2]]).txn(2, [["r", "x", [2, 1]]])
    assert la(g0)["anomaly_types"] == ["G0-realtime"]
    g1c = H().txn(0, [["r", "y", [1]]]).txn(1, [["append", "y", 1]])
    assert la(g1c)["anomaly_types"] == ["G1c-realtime"]


def test_g2_item_realtime_and_nonadjacent_realtime() -> None:
    h = (
        H()
        .invoke("t1", 1, [["append", "a", 1], ["r", "b", []]])
        .invoke("tb", 2, [["append", "b", 1]])
        .done("tb")
        .invoke("t0", 0, [["r", "a", []]])
        .done("t0")
        .done("t1")
    )
    assert la(h)["anomaly_types"] == ["G2-item-realtime"]
    h = (
        H()
        .invoke("t2", 1, [["append", "a", 1], ["append", "b", 1]])
        .invoke("t3", 2, [["r", "b", [1]], ["r", "c", []]])
        .invoke("t4", 3, [["append", "c", 1]])
        .done("t4")
        .invoke("t1", 0, [["r", "a", []]])
        .done("t2")
        .done("t3")
        .done("t1")
    )
    assert la(h)["anomaly_types"] == ["G-nonadjacent-item-realtime"]


def test_info_transactions_may_or_may_not_have_happened() -> None:
    h = H().txn(0, [["append", "x", 1]], "info").txn(1, [["r", "x", []]])
    assert la(h)["valid"] is True  # the info append may never have happened
    h = H().txn(0, [["append", "x", 1]], "info").txn(1, [["r", "x", [1]]]).txn(2, [["r", "x", []]])
    r = la(h)  # seen, so it happened; the later empty read is stale
    assert r["valid"] is False and r["anomaly_types"] == ["G-single-item-realtime"]


def test_invocations_without_completion_are_info() -> None:
    h = H().txn(0, [["append", "x", 1]]).invoke("open", 1, [["append", "x", 2]])
    tx = parse(h.ops)
    assert tx.type == [0, 1] and la(h)["valid"] is True


# ------------------------------------------------------------------ models, verdicts, results


def test_consistency_model_boundary() -> None:
    assert consistency.boundary(["G1c"])[0] == ["read-committed"]
    no, also = consistency.boundary(["G-single-item"])
    assert no == ["consistent-view", "repeatable-read"] and "strict-serializable" in also
    assert consistency.boundary(["G2-item-realtime"])[0] == ["strict-serializable"]
    assert consistency.boundary([]) == ([], [])
    with pytest.raises(ValueError, match="unknown consistency model"):
        consistency.canonical(["read-mostly"])
    assert consistency.canonical(["PL-3", ":strong-serializable"]) == ["serializable", "strict-serializable"]


def test_anomaly_implications_and_classification() -> None:
    assert {"G1c", "G1", "G0-realtime", "G1-realtime"} <= implied(["G0"])
    assert "G2-item" in implied(["G-single-item"]) and "G-single" not in implied(["G2-item"])
    assert classify([WW, WW]) == "G0"
    assert classify([WW, WR]) == "G1c"
    assert classify([RW, WR, PR]) == "G-single-item-process"
    assert classify([RW, RW, RT]) == "G2-item-realtime"
    assert classify([RW, WR, RW, WR]) == "G-nonadjacent-item"


def test_claimed_models_decide_the_verdict() -> None:
    h = H().concurrent((0, [["append", 3, 1], ["r", 4, []]]), (1, [["append", 4, 1], ["r", 3, []]]))
    assert la(h, ["read-committed"])["valid"] is True
    assert la(h, ["repeatable-read"])["valid"] is False
    assert la(h, ["consistent-view"])["valid"] is True


def test_cycle_search_out_of_time_is_unknown_never_wrong() -> None:
    h = (
        H()
        .txn(1, [["append", 255, 5]])
        .concurrent(
            (1, [["r", 255, [5]], ["append", 256, 3]]),
            (2, [["append", 255, 8]]),
            (3, [["append", 256, 4], ["r", 255, [5, 8]], ["r", 256, [4]]]),
        )
    )
    full = la(h, ["consistent-view"])
    assert full["valid"] is False and "G-single-item" in full["anomaly_types"]
    starved = la(h, ["consistent-view"], cycle_search_timeout=1e-9)
    assert starved["valid"] == "unknown" and "cycle-search-timeout" in starved["anomaly_types"]
    # Models with a cycle test are still decided exactly.
    strict = la(h, None, cycle_search_timeout=1e-9)
    assert strict["valid"] is False and any(t.endswith("-cycle-exists") for t in strict["anomaly_types"])


def test_svg_is_well_formed_and_labelled() -> None:
    h = H().concurrent((0, [["append", 3, 1], ["r", 4, []]]), (1, [["append", 4, 1], ["r", 3, []]]))
    svg = la(h)["anomalies"]["G2-item"][0]["svg"]
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "rw 3" in svg and "T1" in svg and "T2" in svg


def test_empty_and_non_transactional_input() -> None:
    assert la(H())["valid"] == "unknown"
    with pytest.raises(ElleInputError, match="no transactions"):
        checker.check([{"type": "ok", "f": "read", "value": 1, "process": 0}], "list-append")
    with pytest.raises(ElleInputError, match="micro-op"):
        checker.check([{"type": "ok", "f": "txn", "value": [["cas", "x", 1]], "process": 0}], "list-append")
    with pytest.raises(ElleInputError, match="no writes"):
        la(H().txn(0, [["w", "x", 1]]))
    with pytest.raises(ElleInputError, match="no appends"):
        rr(H().txn(0, [["append", "x", 1]]))
    with pytest.raises(ElleInputError, match="not a list"):
        la(H().txn(0, [["r", "x", 5]]))


def test_detect_kind() -> None:
    assert detect_kind(H().txn(0, [["append", "x", 1], ["r", "x", [1]]]).ops) == "list-append"
    assert detect_kind(H().txn(0, [["w", "x", 1], ["r", "x", 1]]).ops) == "rw-register"
    assert detect_kind([{"type": "ok", "f": "txn", "value": [["read", "x", 1]], "process": 0}]) is None
    assert detect_kind([{"type": "ok", "f": "read", "value": 1, "process": 0}]) is None


def test_registry_checkers_follow_the_protocol() -> None:
    h = H().concurrent((0, [["append", 3, 1], ["r", 4, []]]), (1, [["append", 4, 1], ["r", 3, []]]))
    c = get_checker("elle-list-append")
    assert c.check({}, h.ops, {})["valid"] is False
    assert c.check({}, h.ops, {"consistency-models": "snapshot-isolation"})["valid"] is True
    assert c.check({"consistency_models": ["read-committed"]}, h.ops, {})["valid"] is True
    assert (
        get_checker("elle-list-append", consistency_models=["read-committed"]).check({}, h.ops, {})["valid"]
        is True
    )
    reg = get_checker("elle-rw-register")
    assert reg.check({}, H().txn(0, [["w", "x", 1]]).txn(1, [["r", "x", 1]]).ops, {})["valid"] is True
    with pytest.raises(ValueError):
        get_checker("elle-list-append", consistency_models=["nonsense"])


def test_wfr_keys_orders_register_versions() -> None:
    h = H().concurrent(
        (0, [["w", "x", 1]]),
        (1, [["r", "x", 1], ["w", "x", 2]]),
        (2, [["r", "x", 2], ["w", "x", 3]]),
        (3, [["r", "x", 3], ["r", "y", None]]),
        (4, [["w", "y", 1], ["r", "x", 1]]),
    )
    assert rr(h)["valid"] is True
    r = rr(h, wfr_keys=True)  # x: 1 < 2 < 3, so T4 read a stale 1 after ... and y closes a cycle
    assert r["valid"] is False
