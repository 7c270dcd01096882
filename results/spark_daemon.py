"""PySpark's Python worker daemon, started with the scoring modules already imported.

Spark starts this module (`spark.python.daemon.module`, set by `faultline score` for plan "runs") once per
executor; the daemon forks one Python worker per concurrent task. Imported here, before the fork, pandas,
pyarrow and the checkers are loaded once and shared by every worker, instead of each worker importing them
when it unpickles its first task (seconds of the job's fixed cost on a 2-core machine, docs/benchmarks.md).
"""

from __future__ import annotations

from pyspark import daemon

from faultline.results import scoring  # noqa: F401  (imported for the workers the daemon forks)

if __name__ == "__main__":
    daemon.manager()
