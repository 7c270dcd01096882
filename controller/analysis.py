"""The analysis half of a run: check a recorded history, then store and publish what was found.

The runner calls `check` and `write_outputs` once its clients and nemesis are done; `faultline analyze`
calls `reanalyze` on a stored run. Nothing here touches a cluster, so a run can be checked again, with
newer checkers, long after it ended.
"""

from __future__ import annotations

import logging
import traceback
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.checkers.api import Compose
from faultline.checkers.availability import Availability
from faultline.checkers.detection import first_anomaly, history_index_times
from faultline.checkers.logs import LogPatternChecker, NodeLogs
from faultline.checkers.stats import Stats
from faultline.core import Op, TestSpec
from faultline.db.api import LogPattern, LogPatterns
from faultline.results.publish import publish
from faultline.results.store import RunDir, open_run
from faultline.workloads.api import Workload

log = logging.getLogger("faultline.analysis")


def check(
    spec: TestSpec, workload: Workload, history: list[Op], logs: NodeLogCheck | None = None
) -> dict[str, Any]:
    """The workload's checker decides the verdict; the generic ones (stats, availability) are evidence.

    Availability and op counts describe a run; they do not say whether the system was correct, so they
    never turn a verdict invalid. A run in which no client op succeeded proves nothing: "unknown". The
    log checker (`logs`: the DB's patterns and the nodes' log lines) turns it invalid when a node logged a
    crash, corruption or a broken invariant no fault explains; its "unknown" (no logs) changes nothing. An
    invalid run records its time to detection (checkers.detection).
    """
    opts = {"time_limit": spec.check_time_limit}
    plain = spec.to_json()
    results = Compose({"workload": Guarded(workload.checker)}).check(plain, history, opts)
    for name, c in _generic_checkers().items():
        results[name] = Guarded(c).check(plain, history, opts)
    if results.get("valid") is True and not any(
        o.get("type") == "ok" and o.get("process") != "nemesis" for o in history
    ):
        results["valid"] = "unknown"
        results["note"] = "no client operation succeeded"
    if logs is not None:
        try:
            log_checker = LogPatternChecker(logs.patterns, logs.files)
        except ValueError as exc:  # the DB declared a bad pattern: say so, decide nothing
            results["logs"] = {"valid": "unknown", "error": str(exc)}
        else:
            results["logs"] = Guarded(log_checker).check(plain, history, opts)
        if results["logs"].get("valid") is False:
            results["valid"] = False
    if results.get("valid") is False:
        # the completion of the first op that proved an anomaly, in seconds since the run began
        t, what = first_anomaly(results, history_index_times(history))
        results["time_to_detection_s"] = None if t is None else round(t, 3)
        results["first_anomaly"] = what
    return results


@dataclass(frozen=True)
class NodeLogCheck:
    """What the log checker reads: the DB's patterns and each node's log lines (read lazily)."""

    patterns: list[LogPattern]
    files: NodeLogs


def node_log_check(db: Any, nodes_dir: Path) -> NodeLogCheck | None:
    """The log check of a run whose nodes' files were collected into `nodes_dir` (RUN/nodes/<node>/...):
    every `*.log` file there. None when the DB declares no patterns (db.api.LogPatterns)."""
    try:
        patterns = db.log_patterns() if isinstance(db, LogPatterns) else []
    except Exception as exc:  # a user's DB: its patterns are missing, the run is still checked
        log.error("the DB's log_patterns() failed: %s: %s", type(exc).__name__, exc)
        return None
    if not patterns:
        return None
    files: dict[str, dict[str, Iterator[str]]] = {}
    if nodes_dir.is_dir():
        for node in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
            logs = sorted(f for f in node.rglob("*.log") if f.is_file())
            if logs:
                files[node.name] = {str(f.relative_to(node)): _lines(f) for f in logs}
    return NodeLogCheck(patterns, files)


def _lines(path: Path) -> Iterator[str]:
    """A log file's lines, read only when the checker gets to them (a log may be large)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        yield from f


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


# keys of results.json that a new check replaces; every other key (the run's `faults`, `residue`,
# `not_healed`, `cut_short`, `_run`, ...) is the run's own record and survives a re-analysis
REPLACED_BY_CHECK = frozenset({"valid", "skipped", "note", "reanalyzed", "logs"})


def reanalyze(run_path: str | Path) -> dict[str, Any]:
    """Re-runs the workload's checkers on a stored run (also one that was cut short) and rewrites its
    results, plots and report, keeping what the run itself recorded. Returns the new results."""
    from faultline.history import read_jsonl
    from faultline.workloads.registry import get as get_workload

    run = open_run(run_path)
    stored = run.load_test()
    if not isinstance(stored, dict):
        raise ValueError(f"{run.path}/test.json is not a JSON object")
    if not isinstance(stored.get("workload"), str) or not stored.get("name"):
        raise ValueError(f"{run.path}/test.json names no test (it needs at least name and workload)")
    try:
        spec = TestSpec.from_json(stored)
    except (TypeError, KeyError) as exc:
        raise ValueError(f"{run.path}/test.json does not describe a test: {exc}") from None
    history = read_jsonl(run.history_path) if Path(run.history_path).exists() else []
    db = _db_of(spec)
    workload = get_workload(spec.workload, db, spec.workload_opts)
    results = check(spec, workload, history, node_log_check(db, run.nodes_dir))
    try:
        old = run.load_results() or {}
    except (OSError, ValueError):
        old = {}
    old = old if isinstance(old, dict) else {}
    results = {**{k: v for k, v in old.items() if k not in REPLACED_BY_CHECK and k not in results}, **results}
    if not old:
        results["cut_short"] = "the run did not finish (it had no results before this analysis)"
    results["reanalyzed"] = True
    write_outputs(run, spec, history, results)
    return results


def verdict_word(valid: Any) -> str:
    """A verdict as a reader says it (never a Python repr)."""
    words: dict[bool | str, str] = {True: "valid", False: "invalid"}
    return words.get(valid, "unknown") if isinstance(valid, bool | str) else "unknown"


def failure_lines(results: Mapping[str, Any]) -> list[str]:
    """What the workload's checker found wrong, in a few indented lines (empty when nothing was)."""
    wl = results.get("workload") if isinstance(results.get("workload"), dict) else {}
    if not wl or wl.get("valid") is not False:
        return []
    lines = []
    failure = wl.get("failure") if isinstance(wl.get("failure"), dict) else None
    if failure and isinstance(failure.get("op"), dict):
        op = failure["op"]
        lines.append(
            f"  first non-linearizable op: key {failure.get('key')} {op.get('f')} "
            f"{op.get('value')!r} by process {op.get('process')} "
            f"(history entries {op.get('invoke_index')}..{op.get('complete_index')})"
        )
    for k in (
        "error",
        "lost",
        "unexpected",
        "duplicated",
        "first_wrong_total",
        "first_negative",
        "resurrected",
        "version_regressed",
    ):
        if wl.get(k):
            lines.append(f"  {k.replace('_', ' ')}: {str(wl[k])[:300]}")
    return lines


def describe(results: Mapping[str, Any], run_dir: Path | str | None = None) -> list[str]:
    """A short human summary of a run's results: the verdict, what was wrong, how available the store
    was, whether the run was complete and healed, and where the report is."""
    head = f"{run_dir}: " if run_dir is not None else ""
    lines = [f"{head}{verdict_word(results.get('valid'))}"]
    wl = results.get("workload") if isinstance(results.get("workload"), dict) else {}
    if wl:
        lines.append(f"  workload checker: {verdict_word(wl.get('valid'))}")
    lines += failure_lines(results)
    av = results.get("availability")
    av = av if isinstance(av, dict) else {}
    if isinstance(av.get("ok_fraction"), int | float):
        rec = av.get("max_recovery_s")
        lines.append(
            f"  availability: {100 * av['ok_fraction']:.1f}% of ops ok, longest outage "
            f"{av.get('longest_outage_s')} s" + ("" if rec is None else f", slowest recovery {rec} s")
        )
    lines += _log_lines(results.get("logs"))
    for key, label in (("cut_short", "cut short"), ("skipped", "checking"), ("note", "note")):
        if results.get(key):
            lines.append(f"  {label}: {results[key]}")
    if "faults" in results:
        residue = results.get("residue")
        left = (
            "none"
            if residue == []
            else (", ".join(map(str, residue)) if isinstance(residue, list) else residue)
        )
        lines.append(f"  faults injected: {results['faults']}; left after healing: {left}")
    if results.get("not_healed"):
        lines.append(f"  NOT healed: {', '.join(map(str, results['not_healed']))}")
    if run_dir is not None:
        lines.append(f"  report: {Path(run_dir) / 'report.html'}")
    return lines


def _log_lines(logs: Any) -> list[str]:
    """The log checker's finding in a line or two (nothing when it did not run)."""
    if not isinstance(logs, dict):
        return []
    if logs.get("valid") == "unknown":
        return [f"  logs: unknown ({logs.get('error') or logs.get('note') or 'no verdict'})"]
    bad, ok = logs.get("unexpected_match_count", 0), logs.get("expected_match_count", 0)
    out = [f"  logs: {bad} unexpected and {ok} expected matching lines in {logs.get('files')} files"]
    first = (logs.get("unexpected_matches") or [None])[0]
    if isinstance(first, dict):
        out.append(
            f"  first: {first.get('node')} {first.get('file')}:{first.get('line')}: {str(first.get('text'))[:160]}"
            + (f" (in: {str(first['after_text'])[:160]})" if first.get("after_text") else "")
        )
    return out


def _db_of(spec: Any) -> Any:
    """The DB a stored run tested, for its own workloads' checkers; None (the default DB) when this
    installation cannot load it (the generic workloads' checkers need no DB)."""
    from faultline.dbs import get_db

    try:
        return get_db(spec.db)
    except Exception:
        return None
