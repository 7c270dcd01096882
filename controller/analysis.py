"""The analysis half of a run: check a recorded history, then store and publish what was found.

The runner calls `check` and `write_outputs` once its clients and nemesis are done; `faultline analyze`
calls `reanalyze` on a stored run. Nothing here touches a cluster, so a run can be checked again, with
newer checkers, long after it ended.
"""

from __future__ import annotations

import logging
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultline.checkers.api import Compose
from faultline.checkers.availability import Availability
from faultline.checkers.stats import Stats
from faultline.core import TestSpec
from faultline.results.publish import publish
from faultline.results.store import RunDir, open_run
from faultline.workloads.api import Workload

log = logging.getLogger("faultline.analysis")
Op = dict[str, Any]


def check(spec: TestSpec, workload: Workload, history: list[Op]) -> dict[str, Any]:
    """The workload's checker decides the verdict; the generic ones (stats, availability) are evidence.

    Availability and op counts describe a run; they do not say whether the system was correct, so they
    never turn a verdict invalid. A run in which no client op succeeded proves nothing: "unknown".
    """
    opts = {"time_limit": spec.check_time_limit}
    plain = spec.to_json()
    results = Compose({"workload": Guarded(workload.checker)}).check(plain, history, opts)
    for name, c in _generic_checkers().items():
        results[name] = Guarded(c).check(plain, history, opts)
    if results.get("valid") is True and not any(o.get("type") == "ok" and o.get("process") != "nemesis"
                                                for o in history):
        results["valid"] = "unknown"
        results["note"] = "no client operation succeeded"
    return results


class Guarded:
    """A checker that crashes gives `unknown` with the error, so the other checkers' evidence survives."""

    def __init__(self, checker: Any) -> None:
        self.checker = checker

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.checker.check(test, history, opts)
        except Exception as exc:
            log.error("checker %r crashed: %s", self.checker, traceback.format_exc())
            return {"valid": "unknown", "error": f"checker crashed: {type(exc).__name__}: {exc}"}


def _generic_checkers() -> dict[str, Any]:
    return {"stats": Stats(), "availability": Availability()}


def write_outputs(run_dir: RunDir, spec: TestSpec, history: list[Op], results: dict[str, Any]) -> None:
    """Stores the verdict (results.json, history.parquet, the index), then publishes plots, timeline,
    counterexample and report. An artifact that fails is logged into the run's faultline.log."""
    run_dir.finish(results)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        publish(run_dir, spec.to_json(), history, results)
    for w in caught:
        log.warning("%s", w.message)


def reanalyze(run_path: str | Path) -> dict[str, Any]:
    """Re-runs the workload's checkers on a stored run (also one that was cut short) and rewrites its
    results, plots and report. Returns the new results."""
    from faultline.checkers.history import read_jsonl
    from faultline.workloads.registry import get as get_workload

    run = open_run(run_path)
    stored = run.load_test()
    if not stored.get("workload") or not stored.get("name"):
        raise ValueError(f"{run.path}/test.json names no test (it needs at least name and workload)")
    spec = TestSpec.from_json(stored)
    history = read_jsonl(run.history_path) if Path(run.history_path).exists() else []
    workload = get_workload(spec.workload, spec.workload_opts)
    results = check(spec, workload, history)
    old = run.load_results() or {}
    if old.get("cut_short"):
        results["cut_short"] = old["cut_short"]
    elif not old:
        results["cut_short"] = "the run did not finish (it had no results before this analysis)"
    results["reanalyzed"] = True
    write_outputs(run, spec, history, results)
    return results
