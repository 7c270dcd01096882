"""Campaign scoring on Spark: every run of a store, the work spread over the executors.

Plan "runs" (default) gives each task whole runs, scored by `results.scoring.score_run`; plan "groups"
works over the histories as one DataFrame:
- `groupBy(run_id).applyInPandas(run_metrics)`: counts, latency quantiles, throughput, fault windows,
  outages and recovery for each run;
- `groupBy(run_id, key).applyInPandas(key_verdict)`: the linearizability check of each independent key,
  by `checkers.linearizability.check`, the same function `faultline check` uses, so verdicts match.
The per-run rows (one per run) are then joined and aggregated per (workload, nemesis, bug) on the driver
by `results.scoring.finish_scores`, as the single-process engine (`results.scoring.score_pandas`) does.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from faultline.history.parquet import SCHEMA, frame_to_ops, table_to_frame
from faultline.results import metrics
from faultline.results.scoring import (
    OP_COLUMNS,
    Progress,
    ScoreResult,
    Stores,
    conclude,
    default_out_dir,
    prepare_stores,
    say,
    score_run,
)

METRIC_COLUMNS = ["index", "time", "type", "f", "process", "is_nemesis"]
PLANS = ("runs", "groups")
TASKS_PER_CORE = 3  # plan "runs": tasks per executor core (a slow core gives up the rest of the work)


def load_store(spark: Any, path: Stores, progress: Progress | None = None) -> tuple[Any, Any]:
    """(runs, history) as Spark DataFrames: one row per run, and every op of every run with its `run_id`.

    The history columns are history.parquet.SCHEMA's plus `run_id`. `path` is a store or several (their
    run ids then start with each store's label). On a standalone cluster the stores must be readable at
    the same paths on every worker (a shared filesystem)."""
    runs_pd = prepare_stores(path, progress)
    return _frames(spark, runs_pd)


def _frames(spark: Any, runs_pd: pd.DataFrame) -> tuple[Any, Any]:
    runs_sdf = spark.createDataFrame(
        runs_pd.astype(object).where(runs_pd.notna(), None), schema=_runs_schema()
    )
    return runs_sdf, _history(spark, runs_pd)


def _history(spark: Any, runs_pd: pd.DataFrame) -> Any:
    """Every run's history.parquet as one DataFrame with a `run_id` column taken from the file's path
    (test names and stamps are restricted to characters that file URIs leave as they are). Runs of
    several stores are read one store at a time, each adding its label before the ids."""
    from pyspark.sql import functions as F

    by_prefix: dict[str, list[str]] = {}  # store label ("" for one store) -> its runs' Parquet files
    for rid, pq_path in zip(runs_pd["run_id"], runs_pd["parquet"], strict=True):
        if isinstance(pq_path, str):
            parts = str(rid).split("/")  # [label,] test, stamp
            by_prefix.setdefault("/".join(parts[:-2]), []).append(str(Path(pq_path).absolute()))
    frames = []
    for prefix, paths in by_prefix.items():
        hist = spark.read.schema(_arrow_to_spark(SCHEMA)).parquet(*paths)
        rid = F.regexp_extract(F.input_file_name(), r"([^/]+/[^/]+)/history\.parquet$", 1)
        frames.append(hist.withColumn("run_id", F.concat(F.lit(prefix + "/"), rid) if prefix else rid))
    if not frames:
        return spark.createDataFrame([], schema=_history_schema())
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def to_pandas_exact(sdf: Any) -> pd.DataFrame:
    """A Spark DataFrame in pandas with its integers exact (nullable Int64): plain `toPandas()` turns a
    long column holding a null into float64, which rounds above 2**53."""
    return table_to_frame(sdf.toArrow())


def _arrow_to_spark(schema: Any) -> Any:
    from pyspark.sql import types as T

    conv = {"int64": T.LongType(), "string": T.StringType(), "bool": T.BooleanType()}
    return T.StructType([T.StructField(f.name, conv[str(f.type)], True) for f in schema])


def _history_schema() -> Any:
    from pyspark.sql import types as T

    s = _arrow_to_spark(SCHEMA)
    return T.StructType([*s.fields, T.StructField("run_id", T.StringType(), True)])


def _runs_schema() -> str:
    return (
        "run_id string, test_name string, stamp string, workload string, nemesis string, bug string, "
        "seed long, status string, recorded_verdict string, model string, parquet string, warning string, "
        "start_time string, recorded_anomaly_s double"
    )


# ------------------------------------------------------------------------------------------- the work
def _metrics_fn(gap_s: float) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        row = metrics.run_metrics(pdf, str(pdf["run_id"].iloc[0]), gap_s)
        return pd.DataFrame([row], columns=[c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")])

    return fn


def _verdict_fn(models: dict[str, str], time_limit: float | None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values("index", kind="stable")
        run_id = str(pdf["run_id"].iloc[0])
        key = pdf["gkey"].iloc[0]
        ops = frame_to_ops(pdf[[c for c in pdf.columns if c not in ("run_id", "gkey")]])
        row = metrics.key_verdict(
            ops, run_id, None if key == metrics.NO_KEY else key, models[run_id], time_limit
        )
        return pd.DataFrame([row], columns=[c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")])

    return fn


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
    path: Stores,
    out_dir: Path | str | None = None,
    *,
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    plan: str = "runs",
    progress: Progress | None = None,
    reason: str = "",
) -> ScoreResult:
    """Scores every run in the store (or stores) on `spark`; writes scores.parquet, scorecard.json and
    scorecard.html to `out_dir` (default STORE/_score; needed for several stores). `time_limit` bounds
    each key's check (then "unknown"); `reason` says on the scorecard why Spark was chosen.

    plan "runs" (default): one executor task per run reads its history.parquet and computes its metrics and
    each key's verdict; no history crosses the network, so it scales with executors.
    plan "groups": the histories as one DataFrame, `groupBy(run_id)` and `groupBy(run_id, key)` with
    `applyInPandas`; the same numbers, but every op is shuffled twice (see docs/benchmarks.md)."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; choose one of {', '.join(PLANS)}")
    started = time.monotonic()
    out_dir = (
        out_dir if out_dir is not None else default_out_dir(path)
    )  # before the work: several stores need one
    runs_pd = prepare_stores(path, progress)
    say(progress, f"scoring {len(runs_pd)} runs on Spark ({spark.sparkContext.master}, plan {plan})")
    if plan == "runs":
        met, kv = _score_by_run(spark, runs_pd, time_limit, gap_s, progress)
    else:
        met, kv = _score_by_groups(spark, runs_pd, time_limit, gap_s, progress)
    engine = f"spark {spark.sparkContext.master} ({plan})"
    return conclude(runs_pd, met, kv, engine, reason, started, path, out_dir, progress)


def _score_by_groups(
    spark: Any, runs_pd: pd.DataFrame, time_limit: float | None, gap_s: float, progress: Progress | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    from pyspark.sql import functions as F

    hist = _history(spark, runs_pd)
    models = {r: m for r, m in zip(runs_pd["run_id"], runs_pd["model"], strict=True) if isinstance(m, str)}
    with _StageProgress(spark, progress, "metrics"):
        met = (
            hist.select(*METRIC_COLUMNS, "run_id")
            .groupBy("run_id")
            .applyInPandas(_metrics_fn(gap_s), metrics.RUN_SCHEMA)
            .toPandas()
        )
    say(progress, "metrics done; checking linearizability per (run, key)")
    checked = hist.filter(F.col("run_id").isin(list(models)) & ~F.col("is_nemesis"))
    with _StageProgress(spark, progress, "linearizability"):
        # the time as text: Arrow hands pandas a long column holding a null as float64, rounding above 2**53
        kv = (
            checked.select(
                *[F.col(c).cast("string").alias(c) if c == "time" else c for c in OP_COLUMNS], "run_id"
            )
            .withColumn("gkey", F.coalesce(F.col("key"), F.lit(metrics.NO_KEY)))
            .groupBy("run_id", "gkey")
            .applyInPandas(_verdict_fn(models, time_limit), metrics.KEY_SCHEMA)
            .toPandas()
        )
    return met, kv


def _batches(jobs: list[tuple[str, str, str | None]], slots: int) -> list[list[tuple[str, str, str | None]]]:
    """The runs in `slots` batches of about equal work (a history's file size stands for it), the largest
    batch first: each batch is one task, and Spark starts tasks in order, so the longest ones start first
    and no core waits alone at the end (longest processing time first)."""

    def size(job: tuple[str, str, str | None]) -> int:
        try:
            return Path(job[1]).stat().st_size
        except OSError:
            return 0

    bins: list[tuple[int, int, list[tuple[str, str, str | None]]]] = [(0, i, []) for i in range(slots)]
    for job in sorted(jobs, key=size, reverse=True):
        load, i, batch = heapq.heappop(bins)
        batch.append(job)
        heapq.heappush(bins, (load + size(job), i, batch))
    return [batch for _, _, batch in sorted(bins, key=lambda b: (-b[0], b[1])) if batch]


def _score_batch(time_limit: float | None, gap_s: float) -> Callable[[Any], Any]:
    """The task: each run of its batch scored by `score_run` in the executor's Python worker, on one
    thread (Arrow's pool would otherwise read each Parquet file on every core, under the other tasks)."""

    def fn(batches: Any) -> Any:
        import pyarrow

        pyarrow.set_cpu_count(1)
        for batch in batches:
            for rid, pq_path, model in batch:
                yield score_run(pq_path, rid, model, time_limit, gap_s)

    return fn


def _score_by_run(
    spark: Any, runs_pd: pd.DataFrame, time_limit: float | None, gap_s: float, progress: Progress | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Plan "runs" as plain Python tasks: the driver hands each task a batch of (run, file, model) and gets
    back the rows `score_run` made. No DataFrame of the runs, no repartition (a shuffle), no Arrow batch:
    each of those was a job or a stage of fixed cost before the first run was scored."""
    jobs = [
        (str(rid), str(Path(pq).absolute()), model if isinstance(model, str) else None)
        for rid, pq, model in zip(runs_pd["run_id"], runs_pd["parquet"], runs_pd["model"], strict=True)
        if isinstance(pq, str) and pq
    ]
    met_cols = [c.split()[0] for c in metrics.RUN_SCHEMA.split(", ")]
    key_cols = [c.split()[0] for c in metrics.KEY_SCHEMA.split(", ")]
    if not jobs:
        return pd.DataFrame(columns=met_cols), pd.DataFrame(columns=key_cols)
    sc = spark.sparkContext
    batches = _batches(jobs, max(1, min(len(jobs), sc.defaultParallelism * TASKS_PER_CORE)))
    with _StageProgress(spark, progress, "runs"):
        rows = sc.parallelize(batches, len(batches)).mapPartitions(_score_batch(time_limit, gap_s)).collect()
    met = pd.DataFrame([m for m, _ in rows], columns=met_cols)
    kv = pd.DataFrame([k for _, keys in rows for k in keys], columns=key_cols)
    return met, kv
