"""Plots, timeline and counterexample pages are written, self-contained and mark what they should."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from histories import STALE_READ_IN_PARTITION, S, call, fault, ops

from faultline.checkers.linearizability import check
from faultline.pages.counterexample import evidence, render_html
from faultline.pages.layout import STYLESHEET
from faultline.pages.perf import write_plots
from faultline.pages.timeline import write_timeline


def _history() -> list[dict[str, Any]]:
    return ops(
        *STALE_READ_IN_PARTITION,
        *call(0.8, 1.9, 2, "write", 2, "info"),
        *fault(2.0, 2.1, "stop-partition"),
        *call(2.2, 2.4, 3, "read", None, "fail"),
    )


def test_plots_are_pngs(tmp_path: Path) -> None:
    paths = write_plots(_history(), tmp_path / "plots", test={"name": "t"})
    assert [p.name for p in paths] == ["latency-raw.png", "latency-quantiles.png", "rate.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000


def test_plots_of_a_history_without_times(tmp_path: Path) -> None:
    h = [{k: v for k, v in op.items() if k != "time"} for op in _history()]
    assert len(write_plots(h, tmp_path)) == 3


def chart_data(text: str) -> dict[str, Any]:
    """The data a page's lanes chart draws (inline JSON)."""
    m = re.search(r"<script type='application/json' id='chart-data'>(.*?)</script>", text, re.S)
    assert m
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_timeline_has_a_lane_per_process(tmp_path: Path) -> None:
    p = write_timeline(_history(), tmp_path / "timeline.html")
    text = p.read_text()
    assert text.startswith("<!doctype html>") and "<script src" not in text and "http://" not in text
    data = chart_data(text)
    assert data["lanes"] == ["0", "1", "2", "3"] and data["kinds"] == ["partition"]
    assert data["faults"] == [
        {"kind": "partition", "f": "start-partition", "s": 0.3, "e": 2.1, "healed": True}
    ]
    ops = data["ops"]
    assert ops["k"] == [0, 0, 2, 1] and ops["i"] == [0, 4, 6, 10] and ops["c"] == [1, 5, 7, 11]
    assert ops["l"][1] == "read 0" and ops["s"][2] == 0.8 and ops["e"][2] == 1.9
    assert "function faultlineLanes" in text and f"<style>{STYLESHEET}</style>" in text


def test_timeline_pools_retired_processes_into_workers(tmp_path: Path) -> None:
    h = []
    for n in range(60):  # every op times out: each process is retired, the next one takes its worker
        h += [
            {"index": 2 * n, "time": n * S, "process": n, "type": "invoke", "f": "read", "value": None},
            {"index": 2 * n + 1, "time": n * S + 1, "process": n, "type": "info", "f": "read", "value": None},
        ]
    data = chart_data(write_timeline(h, tmp_path / "t.html", test={"concurrency": 5}).read_text())
    assert data["lanes"] == [f"worker {w}" for w in range(5)] and data["ops"]["lane"][:7] == [
        0,
        1,
        2,
        3,
        4,
        0,
        1,
    ]
    assert len(data["ops"]["s"]) == 60  # every op, no cut


def test_counterexample_marks_the_bad_operation(tmp_path: Path) -> None:
    h = _history()
    result = check(h, "register", init=0)
    assert result["valid"] is False
    ev = evidence({"workload": result, "valid": False})
    assert ev["op"]["f"] == "read" and ev["op"]["invoke_index"] == 4
    p = render_html({"workload": result, "valid": False}, h, tmp_path / "cx.html")
    text = p.read_text()
    data = chart_data(text)
    assert data["bad"] == 4 and data["lin"]["i"] == [0]
    assert data["lin"]["states"] == [1]  # replayed from the default init (None), the write of 1 leaves 1
    assert "id='bad-op' data-index='4'" in text
    assert "a read returned 0, but the register could only have held 1 at that point." in text
    assert "1 was written by process 0&#x27;s write 1 (invoked at 0.000 s, ok at 0.200 s)." in text
    assert "Model states reachable" in text
    assert f"<style>{STYLESHEET}</style>" in text
