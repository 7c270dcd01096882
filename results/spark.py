"""Campaign scoring: every run of a store, on Spark (or, as a baseline, in one process).

The heavy work runs on the executors, over the histories as one DataFrame:
- `groupBy(run_id).applyInPandas(run_metrics)`: counts, latency quantiles, throughput, fault windows,
  outages and recovery for each run;
- `groupBy(run_id, key).applyInPandas(key_verdict)`: the linearizability check of each independent key,
  by `checkers.linearizability.check`, the same function `faultline check` uses, so verdicts match.
The per-run rows (one per run) are then joined and aggregated per (workload, nemesis, bug) on the driver
with the same pandas functions the single-process baseline uses.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from faultline.results import metrics
from faultline.results.store import RunDir, Store, StoreError

# workload -> the checker model its history is checked against
# (other workloads, e.g. set or bank, keep the verdict their own checkers recorded in results.json)
WORKLOAD_MODELS = {"register": "cas-register", "cas-register": "cas-register"}
METRIC_COLUMNS = ["index", "time", "type", "f", "process", "is_nemesis"]
OP_COLUMNS = ["index", "time", "type", "f", "process", "is_nemesis", "key", "process_json", "key_json",
              "value_json", "node_json", "error_json", "extra_json"]
Progress = Callable[[str], None]
PLANS = ("runs", "groups")


@dataclass
class ScoreResult:
    runs: pd.DataFrame  # one row per run (scores.parquet)
    groups: pd.DataFrame  # one row per (workload, nemesis, bug)
    out_dir: Path | None = None
    engine: str = "spark"
    seconds: float = 0.0
    total_events: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> bool | str:
        from faultline.checkers.api import merge_valid

        return merge_valid(metrics.text_valid(v) for v in self.runs["verdict"]) if len(self.runs) else "unknown"


def _say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


def model_for(test: dict[str, Any]) -> str | None:
    """The checker model for a run: test.json's `model`, else the workload's default, else none."""
    m = test.get("model")
    if isinstance(m, str):
        return m
    return WORKLOAD_MODELS.get(str(test.get("workload")))


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
        _say(progress, f"writing history.parquet for {len(stale)} run(s)")
    for n, run in enumerate(run_dirs, 1):
        rows.append(_run_row(run))
        if stale and n % 50 == 0:
            _say(progress, f"prepared {n}/{len(run_dirs)} runs")
    cols = ["run_id", "test_name", "stamp", "workload", "nemesis", "bug", "seed", "status", "recorded_verdict",
            "model", "parquet", "warning", "start_time"]
    return pd.DataFrame(rows, columns=cols)


def _run_row(run: RunDir) -> dict[str, Any]:
    info = run.info()
    problems: list[str] = []
    test: dict[str, Any] = {}
    if info.status == "broken":
        problems.append("test.json missing or unreadable")
    else:
        test = run.load_test()
    if info.status == "incomplete":
        problems.append("no results.json (run did not finish)")
    parquet_path = None
    if run.history_path.exists() or run.parquet_path.exists():
        try:
            from faultline.results.parquet import read_problems

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                parquet_path = str(run.ensure_parquet())
            recorded = read_problems(parquet_path)
            problems += recorded + [str(w.message) for w in caught if str(w.message) not in recorded]
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
    }


def load_store(spark: Any, path: Path | str, progress: Progress | None = None) -> tuple[Any, Any]:
    """(runs, history) as Spark DataFrames: one row per run, and every op of every run with its `run_id`.

    The history columns are results.parquet.SCHEMA's plus `run_id`. On a standalone cluster the store
    must be readable at the same path on every worker (a shared filesystem)."""
    runs_pd = prepare_runs(path, progress)
    return _frames(spark, runs_pd)


def _frames(spark: Any, runs_pd: pd.DataFrame) -> tuple[Any, Any]:
    runs_sdf = spark.createDataFrame(runs_pd.astype(object).where(runs_pd.notna(), None), schema=_runs_schema())
    return runs_sdf, _history(spark, runs_pd)


def _history(spark: Any, runs_pd: pd.DataFrame) -> Any:
    """Every run's history.parquet as one DataFrame with a `run_id` column taken from the file's path
    (test names and stamps are restricted to characters that file URIs leave as they are)."""
    from pyspark.sql import functions as F

    from faultline.results.parquet import SCHEMA

    paths = [str(Path(p).absolute()) for p in runs_pd["parquet"].dropna().tolist()]
    if not paths:
        return spark.createDataFrame([], schema=_history_schema())
    hist = spark.read.schema(_arrow_to_spark(SCHEMA)).parquet(*paths)
    return hist.withColumn("run_id", F.regexp_extract(F.input_file_name(), r"([^/]+/[^/]+)/history\.parquet$", 1))


def _arrow_to_spark(schema: Any) -> Any:
    from pyspark.sql import types as T

    conv = {"int64": T.LongType(), "string": T.StringType(), "bool": T.BooleanType()}
    return T.StructType([T.StructField(f.name, conv[str(f.type)], True) for f in schema])


def _history_schema() -> Any:
    from pyspark.sql import types as T

    from faultline.results.parquet import SCHEMA

    s = _arrow_to_spark(SCHEMA)
    return T.StructType([*s.fields, T.StructField("run_id", T.StringType(), True)])


def _runs_schema() -> str:
    return ("run_id string, test_name string, stamp string, workload string, nemesis string, bug string, "
            "seed long, status string, recorded_verdict string, model string, parquet string, warning string, "
            "start_time string")


# ------------------------------------------------------------------------------------------- the work
def _metrics_fn(gap_s: float) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        row = metrics.run_metrics(pdf, str(pdf["run_id"].iloc[0]), gap_s)
        return pd.DataFrame([row], columns=[c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")])

    return fn


def _verdict_fn(models: dict[str, str], time_limit: float | None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        from faultline.results.parquet import frame_to_ops

        pdf = pdf.sort_values("index", kind="stable")
        run_id = str(pdf["run_id"].iloc[0])
        key = pdf["gkey"].iloc[0]
        ops = frame_to_ops(pdf[[c for c in pdf.columns if c not in ("run_id", "gkey")]])
        row = metrics.key_verdict(ops, run_id, None if key == metrics.NO_KEY else key, models[run_id], time_limit)
        return pd.DataFrame([row], columns=[c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")])

    return fn


def _finish(runs_pd: pd.DataFrame, met: pd.DataFrame, kv: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Joins runs, metrics and per-key verdicts into per-run scores, then the per-group scorecard."""
    merged = metrics.merge_key_verdicts(kv)
    scores = runs_pd.drop(columns=["parquet"]).merge(met, on="run_id", how="left").merge(merged, on="run_id",
                                                                                         how="left")
    # runs without a model keep the verdict their checkers recorded; runs without history are unknown
    no_check = scores["model"].isna() | scores["verdict"].isna()
    scores.loc[no_check, "verdict"] = scores.loc[no_check, "recorded_verdict"].fillna("unknown")
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


class _StageProgress:
    """Prints Spark's task progress every few seconds while a job runs (a scored campaign takes minutes)."""

    def __init__(self, spark: Any, progress: Progress | None, label: str, every_s: float = 5.0) -> None:
        self.spark, self.progress, self.label, self.every_s = spark, progress, label, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _StageProgress:
        if self.progress:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(self.every_s):
            try:
                done = total = 0
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info:
                        done += info.numCompletedTasks
                        total += info.numTasks
                if total and self.progress:
                    self.progress(f"{self.label}: {done}/{total} tasks of the running stage(s)")
            except Exception:
                return


def score(
    spark: Any,
    path: Path | str,
    out_dir: Path | str | None = None,
    *,
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    plan: str = "runs",
    progress: Progress | None = None,
) -> ScoreResult:
    """Scores every run in the store on `spark`; writes scores.parquet, scorecard.json and scorecard.html
    to `out_dir` (default STORE/_score). `time_limit` bounds each key's check (then "unknown").

    plan "runs" (default): one executor task per run reads its history.parquet and computes its metrics and
    each key's verdict; no history crosses the network, so it scales with executors.
    plan "groups": the histories as one DataFrame, `groupBy(run_id)` and `groupBy(run_id, key)` with
    `applyInPandas`; the same numbers, but every op is shuffled twice (see docs/benchmarks.md)."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; choose one of {', '.join(PLANS)}")
    started = time.monotonic()
    runs_pd = prepare_runs(path, progress)
    _say(progress, f"scoring {len(runs_pd)} runs on Spark ({spark.sparkContext.master}, plan {plan})")
    if plan == "runs":
        met, kv = _score_by_run(spark, runs_pd, time_limit, gap_s, progress)
    else:
        met, kv = _score_by_groups(spark, runs_pd, time_limit, gap_s, progress)
    scores, groups = _finish(runs_pd, met, kv)
    result = ScoreResult(scores, groups, engine=f"spark {spark.sparkContext.master} ({plan})",
                         seconds=time.monotonic() - started, total_events=int(scores["events"].fillna(0).sum()),
                         warnings=[f"{r}: {w}" for r, w in zip(scores["run_id"], scores["warning"], strict=True) if w])
    _write(result, path, out_dir, progress)
    return result


def _score_by_groups(spark: Any, runs_pd: pd.DataFrame, time_limit: float | None, gap_s: float,
                     progress: Progress | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    from pyspark.sql import functions as F

    hist = _history(spark, runs_pd)
    models = {r: m for r, m in zip(runs_pd["run_id"], runs_pd["model"], strict=True) if isinstance(m, str)}
    with _StageProgress(spark, progress, "metrics"):
        met = (hist.select(*METRIC_COLUMNS, "run_id").groupBy("run_id")
               .applyInPandas(_metrics_fn(gap_s), metrics.RUN_SCHEMA).toPandas())
    _say(progress, "metrics done; checking linearizability per (run, key)")
    checked = hist.filter(F.col("run_id").isin(list(models)) & ~F.col("is_nemesis"))
    with _StageProgress(spark, progress, "linearizability"):
        kv = (checked.select(*OP_COLUMNS, "run_id")
              .withColumn("gkey", F.coalesce(F.col("key"), F.lit(metrics.NO_KEY)))
              .groupBy("run_id", "gkey").applyInPandas(_verdict_fn(models, time_limit), metrics.KEY_SCHEMA)
              .toPandas())
    return met, kv


def score_run(parquet_path: str, run_id: str, model: str | None, time_limit: float | None = None,
              gap_s: float = metrics.OUTAGE_GAP_S) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's metrics row and its per-key verdict rows (the unit of work of plan "runs" and of the
    pandas baseline)."""
    from faultline.results.parquet import frame_to_ops, read_history_frame

    df = read_history_frame(parquet_path)
    met = metrics.run_metrics(df, run_id, gap_s)
    keys: list[dict[str, Any]] = []
    if isinstance(model, str):
        cl = df[~df["is_nemesis"]]
        for key, g in cl.groupby(cl["key"].fillna(metrics.NO_KEY), sort=True):
            ops = frame_to_ops(g[OP_COLUMNS].sort_values("index", kind="stable"))
            keys.append(metrics.key_verdict(ops, run_id, None if key == metrics.NO_KEY else key, model, time_limit))
    return met, keys


def _score_by_run(spark: Any, runs_pd: pd.DataFrame, time_limit: float | None, gap_s: float,
                  progress: Progress | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    jobs = runs_pd.loc[runs_pd["parquet"].notna(), ["run_id", "parquet", "model"]].copy()
    jobs["parquet"] = [str(Path(p).absolute()) for p in jobs["parquet"]]
    met_cols = [c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")]
    key_cols = [c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")]
    if jobs.empty:
        return pd.DataFrame(columns=met_cols), pd.DataFrame(columns=key_cols)
    parts = max(1, min(len(jobs), spark.sparkContext.defaultParallelism * 4))
    sdf = spark.createDataFrame(jobs.astype(object).where(jobs.notna(), None),
                                "run_id string, parquet string, model string").repartition(parts)

    def fn(batches: Any) -> Any:
        for pdf in batches:
            rows = []
            for rid, pq_path, model in zip(pdf["run_id"], pdf["parquet"], pdf["model"], strict=True):
                met, keys = score_run(pq_path, rid, model, time_limit, gap_s)
                met["keys_json"] = json.dumps(keys)
                rows.append(met)
            yield pd.DataFrame(rows, columns=[*met_cols, "keys_json"])

    with _StageProgress(spark, progress, "runs"):
        out = sdf.mapInPandas(fn, metrics.RUN_SCHEMA + ", keys_json string").toPandas()
    kv = pd.DataFrame([k for text in out["keys_json"] for k in json.loads(text)], columns=key_cols)
    return out.drop(columns=["keys_json"]), kv


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
            _say(progress, f"scored {n}/{len(runs_pd)} runs")
    met = pd.DataFrame(met_rows, columns=[c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")])
    kv = pd.DataFrame(kv_rows, columns=[c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")])
    scores, groups = _finish(runs_pd, met, kv)
    result = ScoreResult(scores, groups, engine="pandas", seconds=time.monotonic() - started,
                         total_events=int(scores["events"].fillna(0).sum()),
                         warnings=[f"{r}: {w}" for r, w in zip(scores["run_id"], scores["warning"], strict=True) if w])
    _write(result, path, out_dir, progress)
    return result


def _write(result: ScoreResult, store: Path | str, out_dir: Path | str | None, progress: Progress | None) -> None:
    from faultline.results.scorecard import write_scorecard

    out = Path(out_dir) if out_dir is not None else Path(store) / "_score"
    write_scorecard(result, out, store=Path(store))
    result.out_dir = out
    _say(progress, f"wrote {out / 'scores.parquet'}, {out / 'scorecard.json'}, {out / 'scorecard.html'}")


def read_scores(out_dir: Path | str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(scores.parquet as pandas, scorecard.json) from a scoring output directory."""
    out = Path(out_dir)
    return pd.read_parquet(out / "scores.parquet"), json.loads((out / "scorecard.json").read_text())
