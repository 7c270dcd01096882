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
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from faultline.checkers.api import merge_valid
from faultline.checkers.inference import WORKLOAD_CHECKERS
from faultline.history.parquet import frame_to_ops, read_history_frame, read_problems
from faultline.results import metrics
from faultline.results.scorecard import (
    GROUP_COLUMNS,
    RUN_COLUMNS,
    campaign_expectations,
    merge_expectations,
    render_html,
)
from faultline.results.store import RunDir, Store, StoreError, temp_path

# workload -> the checker model its history is checked against
# (other workloads, e.g. set or bank, keep the verdict their own checkers recorded in results.json)
OP_COLUMNS = [
    "index",
    "time",
    "type",
    "f",
    "process",
    "is_nemesis",
    "key",
    "process_json",
    "key_json",
    "value_json",
    "node_json",
    "error_json",
    "extra_json",
]
Progress = Callable[[str], None]
Stores = Path | str | Sequence[Path | str]  # one store, or several scored together (the shards of a campaign)


@dataclass
class ScoreResult:
    """A scored store, whichever engine scored it; the scorecard and the CLI exit code read only this."""

    runs: pd.DataFrame  # one row per run (scores.parquet)
    groups: pd.DataFrame  # one row per (workload, nemesis, bug)
    out_dir: Path | None = None
    engine: str = "spark"
    engine_reason: str = ""  # why this engine scored the store (results.engines.choose_engine)
    seconds: float = 0.0
    total_events: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> bool | str:
        return (
            merge_valid(metrics.text_valid(v) for v in self.runs["verdict"]) if len(self.runs) else "unknown"
        )


def say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


def model_for(test: dict[str, Any]) -> str | None:
    """The checker model for a run: test.json's `model`, else the workload's default, else none."""
    m = test.get("model")
    if isinstance(m, str):
        return m
    return WORKLOAD_CHECKERS.get(str(test.get("workload")), (None, None))[1]


def store_paths(stores: Stores) -> list[Path]:
    """The stores to score, absolute; one given twice is an error (its runs would count twice)."""
    paths = [Path(stores)] if isinstance(stores, str | Path) else [Path(s) for s in stores]
    if not paths:
        raise StoreError("no store to score")
    seen: dict[Path, Path] = {}
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise StoreError(f"store {p} is given twice (as {seen[key]} too)")
        seen[key] = p
    return [p.absolute() for p in paths]


def store_labels(paths: Sequence[Path]) -> list[str]:
    """A short distinct name per store, put before its run ids when several are scored together (two hosts
    may each have made a run `<test>/<stamp>` with the same name): the folder's name, else its parent's
    and its own, else numbered. One store: no label, run ids stay as they are."""
    if len(paths) == 1:
        return [""]
    names = [p.name or "store" for p in paths]
    if len(set(names)) < len(names):
        names = [f"{p.parent.name}-{p.name}" if p.parent.name else p.name or "store" for p in paths]
    labels: list[str] = []
    for name in names:
        label, n = name, 1
        while label in labels:
            n += 1
            label = f"{name}-{n}"
        labels.append(label)
    return labels


def prepare_stores(stores: Stores, progress: Progress | None = None) -> pd.DataFrame:
    """The runs table of one or several stores; with several, each run id starts with its store's label
    (`store_labels`), so ids stay distinct whatever the stores hold."""
    paths = store_paths(stores)
    frames = []
    for label, path in zip(store_labels(paths), paths, strict=True):
        runs = prepare_runs(path, progress)
        if label:
            runs["run_id"] = label + "/" + runs["run_id"]
        frames.append(runs)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


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
    cols = [
        "run_id",
        "test_name",
        "stamp",
        "workload",
        "nemesis",
        "bug",
        "seed",
        "status",
        "recorded_verdict",
        "model",
        "parquet",
        "warning",
        "start_time",
        "recorded_anomaly_s",
    ]
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
        "run_id": info.run_id,
        "test_name": info.test_name,
        "stamp": info.stamp,
        "workload": info.workload or "unknown",
        "nemesis": info.nemesis_label,
        "bug": info.bug_label,
        "seed": info.seed,
        "status": info.status,
        "recorded_verdict": recorded,
        "model": model_for(test),
        "parquet": parquet_path,
        "warning": "; ".join(problems),
        "start_time": info.start_time,
        "recorded_anomaly_s": _recorded_detection(run),
    }


def _recorded_detection(run: RunDir) -> float | None:
    """The time to detection the run's checkers recorded in results.json (controller.analysis)."""
    try:
        t = (run.load_results() or {}).get("time_to_detection_s")
    except (OSError, ValueError):
        return None
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def score_run(
    parquet_path: str,
    run_id: str,
    model: str | None,
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's metrics row and its per-key verdict rows (the unit of work of plan "runs" and of the
    pandas baseline)."""
    df = read_history_frame(parquet_path)
    met = metrics.run_metrics(df, run_id, gap_s)
    keys: list[dict[str, Any]] = []
    if isinstance(model, str):
        cl = df[~df["is_nemesis"]]
        for key, g in cl.groupby(cl["key"].fillna(metrics.NO_KEY), sort=True):
            ops = frame_to_ops(g[OP_COLUMNS].sort_values("index", kind="stable"))
            keys.append(
                metrics.key_verdict(ops, run_id, None if key == metrics.NO_KEY else key, model, time_limit)
            )
    return met, keys


def finish_scores(
    runs_pd: pd.DataFrame, met: pd.DataFrame, kv: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Joins runs, metrics and per-key verdicts into per-run scores, then the per-group scorecard."""
    merged = metrics.merge_key_verdicts(kv)
    scores = (
        runs_pd.drop(columns=["parquet"])
        .merge(met, on="run_id", how="left")
        .merge(merged, on="run_id", how="left")
    )
    # runs without a model keep the verdict their checkers recorded; runs without history are unknown
    no_check = scores["model"].isna() | scores["verdict"].isna()
    scores.loc[no_check, "verdict"] = scores.loc[no_check, "recorded_verdict"].fillna("unknown")
    # their time to detection is the one their checkers recorded (set, catalog, bank, ...)
    recorded = no_check & (scores["verdict"] == "false")
    if recorded.any():
        scores["first_anomaly_s"] = pd.to_numeric(scores["first_anomaly_s"], errors="coerce")
        scores.loc[recorded, "first_anomaly_s"] = pd.to_numeric(
            scores.loc[recorded, "recorded_anomaly_s"], errors="coerce"
        )
    scores = scores.drop(columns=["recorded_anomaly_s"])
    no_hist = scores["events"].isna() | (scores["events"] == 0)
    scores.loc[no_hist & scores["model"].notna(), "verdict"] = "unknown"
    scores["warning"] = scores["warning"].fillna("")
    for rid, note in _checker_errors(kv).items():  # a check that raised is "unknown": say why
        mask = scores["run_id"] == rid
        scores.loc[mask, "warning"] = scores.loc[mask, "warning"].map(
            lambda w, n=note: f"{w}; {n}" if w else n
        )
    scores = scores.sort_values("run_id").reset_index(drop=True)
    if scores.empty:
        groups = pd.DataFrame(columns=[c.split()[0] for c in metrics.GROUP_SCHEMA.split(", ")])
    else:
        groups = pd.DataFrame(
            [
                metrics.aggregate_group(g)
                for _, g in scores.groupby(["workload", "nemesis", "bug"], sort=True, dropna=False)
            ]
        )
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
    return {
        rid: "checker: " + ", ".join(sorted(set(v))[:3]) + (" ..." if len(set(v)) > 3 else "")
        for rid, v in out.items()
    }


def score_pandas(
    path: Stores,
    out_dir: Path | str | None = None,
    *,
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    progress: Progress | None = None,
    reason: str = "",
) -> ScoreResult:
    """The single-process baseline: the same metrics and verdicts, one run after another, no Spark.
    `path` is a store or several; `reason` says why this engine was chosen (on the scorecard)."""
    started = time.monotonic()
    out_dir = (
        out_dir if out_dir is not None else default_out_dir(path)
    )  # before the work: several stores need one
    runs_pd = prepare_stores(path, progress)
    met_rows, kv_rows = [], []
    for n, (rid, pq_path, model) in enumerate(
        zip(runs_pd["run_id"], runs_pd["parquet"], runs_pd["model"], strict=True), 1
    ):
        if not pq_path:
            continue
        met, keys = score_run(pq_path, rid, model if isinstance(model, str) else None, time_limit, gap_s)
        met_rows.append(met)
        kv_rows += keys
        if n % 20 == 0:
            say(progress, f"scored {n}/{len(runs_pd)} runs")
    met = pd.DataFrame(met_rows, columns=[c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")])
    kv = pd.DataFrame(kv_rows, columns=[c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")])
    return conclude(runs_pd, met, kv, "pandas", reason, started, path, out_dir, progress)


def conclude(
    runs_pd: pd.DataFrame,
    met: pd.DataFrame,
    kv: pd.DataFrame,
    engine: str,
    reason: str,
    started: float,
    path: Stores,
    out_dir: Path | str,
    progress: Progress | None,
) -> ScoreResult:
    """Either engine's last step: the per-run scores and the scorecard (finish_scores), written to
    `out_dir`. `started` is when the scoring began (time.monotonic)."""
    scores, groups = finish_scores(runs_pd, met, kv)
    result = ScoreResult(
        scores,
        groups,
        engine=engine,
        engine_reason=reason,
        seconds=time.monotonic() - started,
        total_events=int(scores["events"].fillna(0).sum()),
        warnings=[f"{r}: {w}" for r, w in zip(scores["run_id"], scores["warning"], strict=True) if w],
    )
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
    return [
        {c: _clean(v) for c, v in zip(cols, row, strict=True)} for row in df[cols].itertuples(index=False)
    ]


def scorecard_dict(result: ScoreResult, store: Stores | None = None) -> dict[str, Any]:
    """scorecard.json: the run's totals, one entry per (workload, nemesis, bug), every run's main numbers.
    Several stores scored together are listed under `stores` with the labels their run ids start with."""
    paths = store_paths(store) if store is not None else []
    labels = store_labels(paths) if paths else []
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "store": str(paths[0]) if len(paths) == 1 else None,
        "stores": [{"label": label, "path": str(p)} for label, p in zip(labels, paths, strict=True)],
        "engine": result.engine,
        "engine_reason": result.engine_reason,
        "seconds": round(result.seconds, 3),
        "runs": len(result.runs),
        "events": result.total_events,
        "verdict": metrics.valid_text(result.verdict),
        "groups": _records(result.groups, GROUP_COLUMNS),
        "run_scores": _records(result.runs, RUN_COLUMNS),
        "warnings": result.warnings,
        "expectations": merge_expectations(
            [campaign_expectations(p, label) for label, p in zip(labels, paths, strict=True)]
        )
        if paths
        else None,
    }


def default_out_dir(store: Stores) -> Path:
    """STORE/_score for one store; several stores have no place of their own, so they need one given."""
    paths = store_paths(store)
    if len(paths) > 1:
        raise StoreError("scoring several stores together needs an output directory (--out DIR)")
    return paths[0] / "_score"


def _report_links(store: Stores, out: Path) -> Callable[[str], str]:
    """run id -> its report, relative to the scorecard's folder (wherever --out put it)."""
    paths = store_paths(store)
    by_label = dict(zip(store_labels(paths), paths, strict=True))

    def link(run_id: str) -> str:
        label, rest = run_id.split("/", 1) if len(paths) > 1 else ("", run_id)
        target = by_label.get(label, paths[0]) / rest / "report.html"
        return quote(os.path.relpath(target, out.absolute()))

    return link


def write_scores(
    result: ScoreResult, store: Stores, out_dir: Path | str | None = None, progress: Progress | None = None
) -> Path:
    """Writes scores.parquet, scorecard.json and scorecard.html to `out_dir` (default STORE/_score), each
    under a temporary name first: a reader, or a second scoring of the same store, never sees half a file."""
    out = Path(out_dir) if out_dir is not None else default_out_dir(store)
    out.mkdir(parents=True, exist_ok=True)
    runs = result.runs.copy()
    for c in runs.columns:  # mixed object columns -> strings, so the Parquet schema is stable
        if runs[c].dtype == object and c not in ("seed",):
            runs[c] = runs[c].map(
                lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
            )
    runs["seed"] = pd.to_numeric(runs["seed"], errors="coerce").astype("Int64")
    tmp = temp_path(out / "scores.parquet")
    runs.to_parquet(tmp, index=False)
    tmp.replace(out / "scores.parquet")
    card = scorecard_dict(result, store)
    page = render_html(card, run_link=_report_links(store, out))
    for name, text in (("scorecard.json", json.dumps(card, indent=2) + "\n"), ("scorecard.html", page)):
        tmp = temp_path(out / name)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out / name)
    result.out_dir = out
    say(progress, f"wrote {out / 'scores.parquet'}, {out / 'scorecard.json'}, {out / 'scorecard.html'}")
    return out


def read_scores(out_dir: Path | str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(scores.parquet as pandas, scorecard.json) from a scoring output directory."""
    out = Path(out_dir)
    return pd.read_parquet(out / "scores.parquet"), json.loads((out / "scorecard.json").read_text())
