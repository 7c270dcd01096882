"""Plots, timeline and counterexample pages are written, self-contained and mark what they should."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from faultline.checkers._html import STYLESHEET
from faultline.checkers.counterexample import evidence, render_html
from faultline.checkers.linearizability import check
from faultline.checkers.perf import write_plots
from faultline.checkers.timeline import write_timeline

S = 1_000_000_000


def _history() -> list[dict[str, Any]]:
    ev = [(0.0, 0, "invoke", "write", 1), (0.2, 0, "ok", "write", 1),
          (0.3, "nemesis", "invoke", "start-partition", None), (0.35, "nemesis", "info", "start-partition", None),
          (0.5, 1, "invoke", "read", None), (0.7, 1, "ok", "read", 0),
          (0.8, 2, "invoke", "write", 2), (1.9, 2, "info", "write", 2),
          (2.0, "nemesis", "invoke", "stop-partition", None), (2.1, "nemesis", "info", "stop-partition", None),
          (2.2, 3, "invoke", "read", None), (2.4, 3, "fail", "read", None)]
    return [{"index": i, "time": int(t * S), "process": p, "type": ty, "f": f, "value": v}
            for i, (t, p, ty, f, v) in enumerate(ev)]


def test_plots_are_pngs(tmp_path: Path) -> None:
    paths = write_plots(_history(), tmp_path / "plots", test={"name": "t"})
    assert [p.name for p in paths] == ["latency-raw.png", "latency-quantiles.png", "rate.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000


def test_plots_of_a_history_without_times(tmp_path: Path) -> None:
    h = [{k: v for k, v in op.items() if k != "time"} for op in _history()]
    assert len(write_plots(h, tmp_path)) == 3


def test_timeline_has_a_lane_per_process(tmp_path: Path) -> None:
    p = write_timeline(_history(), tmp_path / "timeline.html")
    text = p.read_text()
    assert text.startswith("<!doctype html>") and "<script src" not in text and "http://" not in text.replace(
        "http://www.w3.org/2000/svg", "")
    lanes = re.findall(r"<text x='4' y='\d+'>([^<]+)</text>", text)
    assert lanes == ["0", "1", "2", "3", "nemesis"]
    assert text.count("class='info'") == 1 and text.count("class='fail'") == 1
    assert f"<style>{STYLESHEET}</style>" in text  # the one stylesheet every page shares


def test_counterexample_marks_the_bad_operation(tmp_path: Path) -> None:
    h = _history()
    result = check(h, "register", init=0)
    assert result["valid"] is False
    ev = evidence({"workload": result, "valid": False})
    assert ev["op"]["f"] == "read" and ev["op"]["invoke_index"] == 4
    p = render_html({"workload": result, "valid": False}, h, tmp_path / "cx.html")
    text = p.read_text()
    assert text.count("class='bad'") == 1
    bad_bar = re.search(r"<title>([^<]*)</title><rect class='bad'", text)
    assert bad_bar and "&quot;index&quot;: 4" in bad_bar.group(1)
    assert "Model states reachable" in text and "Partial linearization" in text
    assert f"<style>{STYLESHEET}</style>" in text
