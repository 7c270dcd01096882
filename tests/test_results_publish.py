"""Publishing a run: plots, timeline, counterexample and report are made once, by one function, each
failure only a warning; every page shares the one stylesheet."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from histories import STALE_READ_IN_PARTITION, fault, ops
from matplotlib.figure import Figure

from faultline.checkers.linearizability import check
from faultline.controller.analysis import write_outputs
from faultline.core import TestSpec
from faultline.pages.layout import STYLESHEET
from faultline.results import publish as publish_module
from faultline.results.publish import publish
from faultline.results.report import write_report
from faultline.results.scorecard import render_html
from faultline.results.serve import _page
from faultline.results.store import RunDir, Store

TEST = {"name": "t", "workload": "register", "nemesis": ["partition"], "seed": 1}
PLOTS = ["latency-quantiles.png", "latency-raw.png", "rate.png"]


def _history() -> list[dict[str, Any]]:
    """A stale read during a partition: not linearizable, with evidence to draw."""
    return ops(*STALE_READ_IN_PARTITION, *fault(2.0, 2.1, "stop-partition"))


def _run(tmp_path: Path) -> tuple[RunDir, list[dict[str, Any]], dict[str, Any]]:
    run = Store(tmp_path / "store").create_run("t", TEST)
    history = _history()
    run.history_path.write_text("".join(json.dumps(op) + "\n" for op in history))
    result = check(history, "register", init=0)
    assert result["valid"] is False
    return run, history, {"valid": False, "workload": result}


def test_finishing_and_publishing_makes_each_artifact_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts every PNG saved and every text file written, whoever writes it: if plots or pages were made
    again anywhere (the runner, the report, the store), a count would be 2."""
    run, history, results = _run(tmp_path)
    writes: Counter[str] = Counter()
    savefig, write_text = Figure.savefig, Path.write_text

    def counting_savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        writes[Path(str(fname)).name] += 1
        return savefig(self, fname, *args, **kwargs)

    def counting_write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        writes[self.name.lstrip(".").removesuffix(".tmp")] += 1
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", counting_savefig)
    monkeypatch.setattr(Path, "write_text", counting_write_text)
    write_outputs(run, TestSpec.from_json(TEST), history, results)
    assert dict(writes) == {
        **dict.fromkeys(PLOTS, 1),
        "timeline.html": 1,
        "counterexample.html": 1,
        "report.html": 1,
    }
    assert sorted(p.name for p in run.plots_dir.iterdir()) == PLOTS
    page = run.report_path.read_text()
    assert "id='counterexample-link'" in page and page.count("data:image/png;base64,") == len(PLOTS)
    assert json.loads(run.results_path.read_text())["valid"] is False


def test_report_only_renders(tmp_path: Path) -> None:
    """A report written on its own draws nothing: plots and pages come from `publish` alone."""
    run, _history_ops, results = _run(tmp_path)
    run.finish(results)
    write_report(run)
    assert run.report_path.exists()
    assert (
        not run.plots_dir.exists() and not run.timeline_path.exists() and not run.counterexample_path.exists()
    )
    assert "No plots" in run.report_path.read_text()


def test_a_failing_artifact_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, history, results = _run(tmp_path)
    run.finish(results)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no ink")

    monkeypatch.setattr(publish_module, "write_timeline", broken)
    with pytest.warns(UserWarning, match="timeline not written: RuntimeError: no ink"):
        written = publish(run, TEST, history, results)
    assert set(written) == {"plots", "counterexample", "report"}
    assert run.report_path.exists() and not run.timeline_path.exists()


def test_publishing_a_valid_run_drops_an_old_counterexample(tmp_path: Path) -> None:
    run, history, results = _run(tmp_path)
    run.finish(results)
    publish(run)  # everything from the run directory
    assert run.counterexample_path.exists()
    valid = {"valid": True, "workload": {"valid": True}}
    run.finish(valid)
    publish(run, TEST, history, valid)
    assert not run.counterexample_path.exists()
    assert "counterexample.html" not in run.report_path.read_text()


def test_every_page_uses_the_one_stylesheet(tmp_path: Path) -> None:
    run, history, results = _run(tmp_path)
    run.finish(results)
    publish(run, TEST, history, results)
    card = {
        "store": "s",
        "runs": 0,
        "events": 0,
        "verdict": "true",
        "engine": "pandas",
        "seconds": 0.0,
        "groups": [],
        "run_scores": [],
        "warnings": [],
    }
    pages = {
        "report": run.report_path.read_text(),
        "timeline": run.timeline_path.read_text(),
        "counterexample": run.counterexample_path.read_text(),
        "scorecard": render_html(card),
        "serve": _page("x", "<p>x</p>").decode(),
    }
    for name, page in pages.items():
        assert page.count("<style>") == 1 and f"<style>{STYLESHEET}</style>" in page, name
    root = Path(__file__).resolve().parent.parent
    styled = [
        p.relative_to(root).as_posix()
        for d in ("results", "checkers", "pages")
        for p in sorted((root / d).glob("*.py"))
        if "<style" in p.read_text() or "font-family" in p.read_text()
    ]
    assert styled == ["pages/layout.py"]
