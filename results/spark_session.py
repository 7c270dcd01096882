"""One way to start a SparkSession for Faultline, used by the CLI, notebooks and tests."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def get_session(master: str = "local[2]", app_name: str = "faultline", shuffle_partitions: int = 4,
                log_file: Path | str | None = None) -> Any:
    """A SparkSession whose Python workers run this interpreter (so they see this venv's packages).

    With `log_file`, the JVM's own output (its start-up warnings, log4j's lines) goes to that file instead
    of the terminal, and Spark logs errors only: a user sees Faultline's progress, not eight JVM warnings.
    Errors still reach Python as exceptions."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if log_file is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to a loopback" warning
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if log_file is None:
        return builder.getOrCreate()
    with _stderr_to(Path(log_file)):  # the JVM starts here and keeps this stderr for its lifetime
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 points at `path` for the duration (child processes started meanwhile keep it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
