"""report.html tells the story first: what went wrong in words for each failing checker, then the evidence
folded as tables (never a JSON dump), with results.json a link away."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from histories import call, fault, ops

from faultline.checkers.set import SetChecker
from faultline.results.report import evidence_html, render_report
from faultline.results.store import RunDir, Store


def _set_run(tmp_path: Path) -> tuple[RunDir, dict[str, Any]]:
    history = ops(
        *call(0, 1, 0, "add", 1),
        *call(2, 2.5, 1, "add", 2),
        *fault(3, 3.1, "start-partition"),
        *call(9, 10, 3, "read", [1]),  # begun after 2 was acknowledged
    )
    run = Store(tmp_path / "store").create_run("set-t", {"name": "set-t", "workload": "set"})
    run.history_path.write_text("".join(json.dumps(op) + "\n" for op in history))
    results = {
        "valid": False,
        "workload": SetChecker().check({}, history, {}),
        "availability": {"valid": "unknown", "error": "no heal in the history"},
        "stats": {"valid": True},
    }
    run.finish(results)
    return run, results


def test_the_first_screen_says_what_went_wrong(tmp_path: Path) -> None:
    run, _results = _set_run(tmp_path)
    page = render_report(run)
    first = page.split("<h2>Test</h2>")[0]
    assert "<h2 id='wrong'>What was wrong</h2>" in first
    assert (
        "workload: 1 of 2 acknowledged adds were lost (missing from every read begun after the last one "
        "that showed them)."
    ) in first
    assert "Lost, for example: 2 (acknowledged at 2.500 s)." in first
    assert "<div class='story unknown'><h3>availability: no heal in the history</h3>" in first
    assert "<a href='results.json'>results.json</a>" in first
    assert "counterexample-link" not in first  # no page was published for this run


def test_the_evidence_is_folded_tables_not_a_dump(tmp_path: Path) -> None:
    run, _results = _set_run(tmp_path)
    page = render_report(run)
    checkers = page.split("<h2>Checkers</h2>")[1].split("<h2>Operations</h2>")[0]
    assert "<pre" not in checkers and checkers.count("<details id='evidence-") == 3
    assert (
        "<details id='evidence-workload'><summary>workload: invalid</summary><table class='ev'>" in checkers
    )
    assert "<tr><th>lost_count</th><td>1</td></tr>" in checkers


def test_evidence_tables_cut_long_lists_and_escape() -> None:
    records = [{"index": i, "value": "<b>"} for i in range(25)]
    out = evidence_html({"cases": records, "svg": "<svg onload=x>", "note": "x" * 400})
    assert out.count("<tr><td>") == 20 and "… and 5 more (results.json)" in out
    assert "<td>&lt;b&gt;</td>" in out and "<b>" not in out and "svg" not in out
    assert "x" * 298 + "…" in out and "x" * 300 not in out
