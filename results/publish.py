"""Publishing a run: the one place its plots, timeline, counterexample page and report.html are made.

A run's verdict lives in results.json (`RunDir.finish`); everything here is a view of it and of the
history, so each artifact is guarded: one that fails is reported as a warning and the others are still
written. The report comes last because it embeds the plots and links the other pages.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from faultline.core import Op
from faultline.pages.counterexample import evidence, render_html
from faultline.pages.perf import write_plots
from faultline.pages.timeline import write_timeline
from faultline.results.metrics import fault_windows
from faultline.results.report import failing, write_report
from faultline.results.store import RunDir


def _guarded(run: RunDir, what: str, make: Callable[[], Any]) -> bool:
    try:
        make()
        return True
    except Exception as exc:  # an artifact is a convenience; never lose the others (or the run) over it
        warnings.warn(f"{run.run_id}: {what} not written: {type(exc).__name__}: {exc}", stacklevel=3)
        return False


def _faults(history: list[Op]) -> list[dict[str, Any]] | None:
    """The run's fault windows as the report's metrics find them, so every page draws the same ones."""
    times = [op["time"] for op in history if isinstance(op.get("time"), int | float)]
    if not times:
        return None
    nem = pd.DataFrame(
        [
            {"f": op.get("f"), "type": op.get("type"), "time": op.get("time")}
            for op in history
            if op.get("process") == "nemesis"
        ],
        columns=["f", "type", "time"],
    )
    return fault_windows(nem, int(max(times))) if len(nem) else []


def _counterexample_source(results: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The failing checker result to draw: the first with linearizability evidence, else the first."""
    bad = failing(dict(results or {}))
    for _name, res in bad:
        if evidence(res) is not None:
            return res
    return bad[0][1] if bad else None


def publish(
    run: RunDir,
    test: Mapping[str, Any] | None = None,
    history: list[Op] | None = None,
    results: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Writes plots/*.png, timeline.html, counterexample.html (for an invalid run) and report.html.

    `test`, `history` and `results` default to what the run directory holds (test.json, the history,
    results.json); the runner passes the ones it has in memory. Returns the artifacts written, by name.
    A counterexample page left from an earlier analysis is removed once the run is no longer invalid,
    so the report never links evidence the results do not contain.
    """
    if test is None:
        try:
            test = run.load_test()
        except (OSError, ValueError):
            test = {}
    if history is None:
        history = run.history() if (run.history_path.exists() or run.parquet_path.exists()) else []
    if results is None:
        try:
            results = run.load_results()
        except (OSError, ValueError):
            results = None
    written: dict[str, Path] = {}
    faults = _faults(history) if history else None
    workers = (test or {}).get("concurrency")
    if history:
        if _guarded(run, "plots", lambda: write_plots(history, run.plots_dir, test=test)):
            written["plots"] = run.plots_dir
        if _guarded(
            run, "timeline", lambda: write_timeline(history, run.timeline_path, test=test, faults=faults)
        ):
            written["timeline"] = run.timeline_path
    source = _counterexample_source(results)
    if source is not None:
        if _guarded(
            run,
            "counterexample",
            lambda: render_html(source, history, run.counterexample_path, faults, workers),
        ):
            written["counterexample"] = run.counterexample_path
    else:
        run.counterexample_path.unlink(missing_ok=True)
    if _guarded(run, "report", lambda: write_report(run)):
        written["report"] = run.report_path
    return written
