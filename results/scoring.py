"""Scoring without Spark: the result type, the per-run unit of work, the single-process engine, and
reading and writing a store's scores.

Both engines (`score_pandas` here, `results.spark.score`) list the runs with `prepare_runs`, score each
run with `score_run` (metrics plus one linearizability verdict per key) and join the rows with
`finish_scores`, so their numbers are the same by construction. Nothing here imports pyspark: the pandas
engine, the scorecard and a notebook reading old scores work without a JVM.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from faultline.checkers.api import merge_valid
from faultline.checkers.inference import WORKLOAD_CHECKERS
from faultline.history.parquet import frame_to_ops, read_history_frame, read_problems
from faultline.results import metrics
from faultline.results.scorecard import GROUP_COLUMNS, RUN_COLUMNS, campaign_expectations, render_html
from faultline.results.store import RunDir, Store, StoreError

# workload -> the checker model its history is checked against
# (other workloads, e.g. set or bank, keep the verdict their own checkers recorded in results.json)
OP_COLUMNS = ["index", "time", "type", "f", "process", "is_nemesis", "key", "process_json", "key_json",
              "value_json", "node_json", "error_json", "extra_json"]
Progress = Callable[[str], None]


@dataclass
class ScoreResult:
    """A scored store, whichever engine scored it; the scorecard and the CLI exit code read only this."""

    runs: pd.DataFrame  # one row per run (scores.parquet)
    groups: pd.DataFrame  # one row per (workload, nemesis, bug)
    out_dir: Path | None = None
    engine: str = "spark"
    seconds: float = 0.0
    total_events: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> bool | str:
        return merge_valid(metrics.text_valid(v) for v in self.runs["verdict"]) if len(self.runs) else "unknown"


def say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


def model_for(test: dict[str, Any]) -> str | None:
    """The checker model for a run: test.json's `model`, else the workload's default, else none."""
    m = test.get("model")
    if isinstance(m, str):
        return m
    return WORKLOAD_CHECKERS.get(str(test.get("workload")), (None, None))[1]


def prepare_runs(path: Path | str, progress: Progress | None = None) -> pd.DataFrame:
    """The runs table on the driver: index facts, checker model, Parquet path, and a warning for every
    malformed or partial run. Writes history.parquet for runs that lack a fresh one."""
    root = Path(path).absolute()
    if not root.exists():
        raise StoreError(f"store {root} does not exist")
    if not root.is_dir():
        raise StoreError(f"store {root} is not a directory")
    store = Store(root, create=False)
    rows = []
    run_dirs = list(store.run_dirs())
    stale = [r for r in run_dirs if r.history_path.exists() and not r.parquet_is_fresh()]
    if stale:
        say(progress, f"writing history.parquet for {len(stale)} run(s)")
    for n, run in enumerate(run_dirs, 1):
        rows.append(_run_row(run))
        if stale and n % 50 == 0:
            say(progress, f"prepared {n}/{len(run_dirs)} runs")
    cols = ["run_id", "test_name", "stamp", "workload", "nemesis", "bug", "seed", "status", "recorded_verdict",
            "model", "parquet", "warning", "start_time", "recorded_anomaly_s"]
    return pd.DataFrame(rows, columns=cols)


def _run_row(run: RunDir) -> dict[str, Any]:
    info = run.info()
    problems: list[str] = []
    test: dict[str, Any] = {}
    if info.status == "damaged":
        problems.append(info.problem or "test.json or results.json unreadable")
    if not (info.problem or "").startswith("test.json"):
        test = run.load_test()
    if info.status == "incomplete":
        problems.append("no results.json (run did not finish)")
    parquet_path = None
    if run.history_path.exists() or run.parquet_path.exists():
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                parquet_path = str(run.ensure_parquet())
            noted = read_problems(parquet_path)
            problems += noted + [str(w.message) for w in caught if str(w.message) not in noted]
        except (OSError, ValueError) as exc:
            problems.append(f"history unreadable: {exc}")
    else:
        problems.append("no history")
    recorded = None if info.verdict is None else metrics.valid_text(info.verdict)
    return {
        "run_id": info.run_id, "test_name": info.test_name, "stamp": info.stamp,
        "workload": info.workload or "unknown", "nemesis": info.nemesis_label, "bug": info.bug_label,
        "seed": info.seed, "status": info.status, "recorded_verdict": recorded, "model": model_for(test),
        "parquet": parquet_path, "warning": "; ".join(problems), "start_time": info.start_time,
        "recorded_anomaly_s": _recorded_detection(run),
    }


def _recorded_detection(run: RunDir) -> float | None:
    """The time to detection the run's checkers recorded in results.json (controller.analysis)."""
    try:
        t = (run.load_results() or {}).get("time_to_detection_s")
    except (OSError, ValueError):
        return None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def score_run(parquet_path: str, run_id: str, model: str | None, time_limit: float | None = None,
              gap_s: float = metrics.OUTAGE_GAP_S) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's metrics row and its per-key verdict rows (the unit of work of plan "runs" and of the
    pandas baseline)."""
    df = read_history_frame(parquet_path)
    met = metrics.run_metrics(df, run_id, gap_s)
    keys: list[dict[str, Any]] = []
    if isinstance(model, str):
        cl = df[~df["is_nemesis"]]
        for key, g in cl.groupby(cl["key"].fillna(metrics.NO_KEY), sort=True):
            ops = frame_to_ops(g[OP_COLUMNS].sort_values("index", kind="stable"))
            keys.append(metrics.key_verdict(ops, run_id, None if key == metrics.NO_KEY else key, model, time_limit))
    return met, keys


def finish_scores(runs_pd: pd.DataFrame, met: pd.DataFrame, kv: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Joins runs, metrics and per-key verdicts into per-run scores, then the per-group scorecard."""
    merged = metrics.merge_key_verdicts(kv)
    scores = runs_pd.drop(columns=["parquet"]).merge(met, on="run_id", how="left").merge(merged, on="run_id",
                                                                                         how="left")
    # runs without a model keep the verdict their checkers recorded; runs without history are unknown
    no_check = scores["model"].isna() | scores["verdict"].isna()
    scores.loc[no_check, "verdict"] = scores.loc[no_check, "recorded_verdict"].fillna("unknown")
    # their time to detection is the one their checkers recorded (set, catalog, bank, ...)
    recorded = no_check & (scores["verdict"] == "false")
    if recorded.any():
        scores["first_anomaly_s"] = pd.to_numeric(scores["first_anomaly_s"], errors="coerce")
        scores.loc[recorded, "first_anomaly_s"] = pd.to_numeric(scores.loc[recorded, "recorded_anomaly_s"],
                                                                errors="coerce")
    scores = scores.drop(columns=["recorded_anomaly_s"])
    no_hist = scores["events"].isna() | (scores["events"] == 0)
    scores.loc[no_hist & scores["model"].notna(), "verdict"] = "unknown"
    scores["warning"] = scores["warning"].fillna("")
    for rid, note in _checker_errors(kv).items():  # a check that raised is "unknown": say why
        mask = scores["run_id"] == rid
        scores.loc[mask, "warning"] = scores.loc[mask, "warning"].map(lambda w, n=note: f"{w}; {n}" if w else n)
    scores = scores.sort_values("run_id").reset_index(drop=True)
    if scores.empty:
        groups = pd.DataFrame(columns=[c.split()[0] for c in metrics.GROUP_SCHEMA.split(", ")])
    else:
        groups = pd.DataFrame([metrics.aggregate_group(g) for _, g in
                               scores.groupby(["workload", "nemesis", "bug"], sort=True, dropna=False)])
    return scores, groups


def _checker_errors(kv: pd.DataFrame) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    if kv.empty:
        return {}
    for rid, key, valid, text in zip(kv["run_id"], kv["key"], kv["valid"], kv["result_json"], strict=True):
        if valid != "unknown" or not isinstance(text, str):
            continue
        try:
            err = json.loads(text).get("error")
        except ValueError:
            err = None
        if err:
            out.setdefault(rid, []).append(f"key {key}: {err}")
    return {rid: "checker: " + ", ".join(sorted(set(v))[:3]) + (" ..." if len(set(v)) > 3 else "")
            for rid, v in out.items()}


def score_pandas(
    path: Path | str,
    out_dir: Path | str | None = None,
    *,
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    progress: Progress | None = None,
) -> ScoreResult:
    """The single-process baseline: the same metrics and verdicts, one run after another, no Spark."""
    started = time.monotonic()
    runs_pd = prepare_runs(path, progress)
    met_rows, kv_rows = [], []
    for n, (rid, pq_path, model) in enumerate(zip(runs_pd["run_id"], runs_pd["parquet"], runs_pd["model"],
                                                  strict=True), 1):
        if not pq_path:
            continue
        met, keys = score_run(pq_path, rid, model if isinstance(model, str) else None, time_limit, gap_s)
        met_rows.append(met)
        kv_rows += keys
        if n % 20 == 0:
            say(progress, f"scored {n}/{len(runs_pd)} runs")
    met = pd.DataFrame(met_rows, columns=[c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")])
    kv = pd.DataFrame(kv_rows, columns=[c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")])
    scores, groups = finish_scores(runs_pd, met, kv)
    result = ScoreResult(scores, groups, engine="pandas", seconds=time.monotonic() - started,
                         total_events=int(scores["events"].fillna(0).sum()),
                         warnings=[f"{r}: {w}" for r, w in zip(scores["run_id"], scores["warning"], strict=True) if w])
    write_scores(result, path, out_dir, progress)
    return result


def _clean(v: Any) -> Any:
    """JSON-safe scalars: NaN -> null, numpy types -> Python."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _records(df: pd.DataFrame, cols: list[str]) -> list[dict[str, Any]]:
    cols = [c for c in cols if c in df.columns]
    return [{c: _clean(v) for c, v in zip(cols, row, strict=True)} for row in df[cols].itertuples(index=False)]


def scorecard_dict(result: ScoreResult, store: Path | None = None) -> dict[str, Any]:
    """scorecard.json: the run's totals, one entry per (workload, nemesis, bug), every run's main numbers."""
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "store": str(store) if store else None,
        "engine": result.engine,
        "seconds": round(result.seconds, 3),
        "runs": len(result.runs),
        "events": result.total_events,
        "verdict": metrics.valid_text(result.verdict),
        "groups": _records(result.groups, GROUP_COLUMNS),
        "run_scores": _records(result.runs, RUN_COLUMNS),
        "warnings": result.warnings,
        "expectations": campaign_expectations(store) if store else None,
    }


def write_scores(result: ScoreResult, store: Path | str, out_dir: Path | str | None = None,
                 progress: Progress | None = None) -> Path:
    """Writes scores.parquet, scorecard.json and scorecard.html to `out_dir` (default STORE/_score)."""
    out = Path(out_dir) if out_dir is not None else Path(store) / "_score"
    out.mkdir(parents=True, exist_ok=True)
    runs = result.runs.copy()
    for c in runs.columns:  # mixed object columns -> strings, so the Parquet schema is stable
        if runs[c].dtype == object and c not in ("seed",):
            runs[c] = runs[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    runs["seed"] = pd.to_numeric(runs["seed"], errors="coerce").astype("Int64")
    tmp = out / ".scores.parquet.tmp"
    runs.to_parquet(tmp, index=False)
    tmp.replace(out / "scores.parquet")
    card = scorecard_dict(result, Path(store))
    (out / "scorecard.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    (out / "scorecard.html").write_text(render_html(card), encoding="utf-8")
    result.out_dir = out
    say(progress, f"wrote {out / 'scores.parquet'}, {out / 'scorecard.json'}, {out / 'scorecard.html'}")
    return out


def read_scores(out_dir: Path | str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(scores.parquet as pandas, scorecard.json) from a scoring output directory."""
    out = Path(out_dir)
    return pd.read_parquet(out / "scores.parquet"), json.loads((out / "scorecard.json").read_text())
