"""Which engine scores a store: the one choice `faultline score` and `faultline campaign` share.

`spark` starts a session on `master` (the JVM start, 10-60 s on a busy machine, dominates small stores)
and stops it afterwards; `pandas` scores in this process with the same functions and never starts a JVM
(pyspark is imported only once a session is asked for). `auto` (the default) takes pandas for a store
whose histories hold fewer than AUTO_SPARK_EVENTS events and Spark beyond; naming a master asks for
Spark. Both engines write scores.parquet, scorecard.json and scorecard.html to `out_dir` (default
STORE/_score), and the scorecard says which engine ran and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from faultline.results import metrics
from faultline.results.scoring import (
    Progress,
    ScoreResult,
    Stores,
    default_out_dir,
    say,
    score_pandas,
    store_paths,
)
from faultline.results.spark import score
from faultline.results.spark_session import (
    QUICK_JVM_OPTIONS,
    SCORING_DAEMON,
    get_session,
    wait_for_executors,
)
from faultline.results.store import Store

ENGINES = ("auto", "spark", "pandas")
DEFAULT_MASTER = "local[*]"
# Below this many history events pandas is done before Spark would be. On 2 cores the two broke even at
# about 4 M events (pandas 44-128 s, Spark local[2] 43-181 s including its JVM start; docs/benchmarks.md);
# with more executor cores Spark wins sooner, so the line is drawn at half that.
AUTO_SPARK_EVENTS = 2_000_000
BYTES_PER_EVENT = 100  # history.jsonl, for a run whose event count no index or Parquet footer gives


@dataclass(frozen=True)
class EngineChoice:
    engine: str  # spark | pandas
    reason: str


def count_events(stores: Sequence[Path]) -> tuple[int, int]:
    """(runs, history events) of the stores without reading a history: the index's op counts, else the
    Parquet footer's row count, else the JSONL's size."""
    import pyarrow.parquet as pq

    runs = events = 0
    for path in stores:
        store = Store(path, create=False)
        index = store.read_index()
        for run in store.run_dirs():
            runs += 1
            ops = getattr(index.get(run.run_id), "ops", None)
            if isinstance(ops, int):
                events += ops
            elif run.parquet_path.exists():
                try:
                    events += pq.read_metadata(run.parquet_path).num_rows
                except (OSError, ValueError):
                    events += run.parquet_path.stat().st_size // 20
            elif run.history_path.exists():
                events += run.history_path.stat().st_size // BYTES_PER_EVENT
    return runs, events


def choose_engine(stores: Stores, engine: str = "auto", master: str | None = None) -> EngineChoice:
    """The engine for `stores`, and why: as asked, or for `auto` by the size of the histories."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if engine != "auto":
        return EngineChoice(engine, f"--engine {engine} asked for it")
    if master is not None:
        return EngineChoice("spark", f"auto: --master {master} asked for Spark")
    runs, events = count_events(store_paths(stores))
    if events >= AUTO_SPARK_EVENTS:
        return EngineChoice(
            "spark",
            f"auto: {runs} runs, {events:,} history events, at least "
            f"{AUTO_SPARK_EVENTS:,}: worth starting Spark",
        )
    return EngineChoice(
        "pandas",
        f"auto: {runs} runs, {events:,} history events, under {AUTO_SPARK_EVENTS:,}: "
        "one process is done before Spark would have started (--engine spark to force it)",
    )


def score_store(
    store: Stores,
    out_dir: Path | str | None = None,
    *,
    engine: str = "auto",
    master: str | None = None,
    plan: str = "runs",
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    app_name: str = "faultline-score",
    progress: Progress | None = None,
    verbose: bool = False,
) -> ScoreResult:
    """Scores every run of `store` (or of several stores together: then `out_dir` is needed) with
    `engine`; `master` (default local[*]) and `plan` apply to Spark only. Unless `verbose`, the JVM's own
    output goes to spark.log in the output directory, not the terminal."""
    out = Path(out_dir) if out_dir is not None else default_out_dir(store)
    choice = choose_engine(store, engine, master)
    say(progress, f"engine {choice.engine} ({choice.reason})")
    if choice.engine == "pandas":
        return score_pandas(
            store, out, time_limit=time_limit, gap_s=gap_s, progress=progress, reason=choice.reason
        )
    master = master or DEFAULT_MASTER
    log_file = None if verbose else out / "spark.log"
    say(progress, f"starting Spark ({master})" + ("" if log_file is None else f"; its own log: {log_file}"))
    # plan runs leaves the work to Python workers: a JVM that starts quickly is worth more than its JIT
    quick = plan == "runs"
    spark = get_session(
        master,
        app_name=app_name,
        log_file=log_file,
        driver_java_options=QUICK_JVM_OPTIONS if quick else None,
        python_daemon=SCORING_DAEMON if quick else None,
    )
    try:
        joined = wait_for_executors(spark, say=progress)
        if joined:
            say(progress, f"{joined} executor(s) joined from {master}")
        return score(
            spark,
            store,
            out,
            time_limit=time_limit,
            gap_s=gap_s,
            plan=plan,
            progress=progress,
            reason=choice.reason,
        )
    finally:
        spark.stop()
