"""Which engine scores a store: the one choice `faultline score` and `faultline campaign` share.

`spark` starts a session on `master` (the JVM start dominates small stores) and stops it afterwards;
`pandas` scores in this process with the same functions and never starts a JVM (pyspark is imported only
once a session is asked for). Both write scores.parquet, scorecard.json and
scorecard.html to `out_dir` (default STORE/_score).
"""

from __future__ import annotations

from pathlib import Path

from faultline.results import metrics
from faultline.results.scoring import Progress, ScoreResult, say, score_pandas
from faultline.results.spark import score
from faultline.results.spark_session import get_session

ENGINES = ("spark", "pandas")


def score_store(
    store: Path | str,
    out_dir: Path | str | None = None,
    *,
    engine: str = "spark",
    master: str = "local[*]",
    plan: str = "runs",
    time_limit: float | None = None,
    gap_s: float = metrics.OUTAGE_GAP_S,
    app_name: str = "faultline-score",
    progress: Progress | None = None,
    verbose: bool = False,
) -> ScoreResult:
    """Scores every run of `store` with `engine`; `master` and `plan` apply to Spark only. Unless
    `verbose`, the JVM's own output goes to spark.log in the output directory, not the terminal."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if engine == "pandas":
        return score_pandas(store, out_dir, time_limit=time_limit, gap_s=gap_s, progress=progress)
    log_file = None if verbose else Path(out_dir if out_dir is not None else Path(store) / "_score") / "spark.log"
    say(progress, f"starting Spark ({master})" + ("" if log_file is None else f"; its own log: {log_file}"))
    spark = get_session(master, app_name=app_name, log_file=log_file)
    try:
        return score(spark, store, out_dir, time_limit=time_limit, gap_s=gap_s, plan=plan, progress=progress)
    finally:
        spark.stop()
