"""One way to start a SparkSession for Faultline, used by the CLI, notebooks and tests."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# JVM options for a driver whose JVM does little but hand Python tasks their input (plan "runs"): the
# client compiler alone and one GC thread. The JVM's start-up, most of it compiling Spark's own classes with
# C2 on threads that compete with the Python workers for the cores, took 13-16 s with them against 32-56 s
# without on the 2-core machine under load (docs/benchmarks.md, "Spark scoring").
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SCORING_DAEMON = "faultline.results.spark_daemon"  # Python workers forked with the scoring modules imported


def get_session(
    master: str = "local[2]",
    app_name: str = "faultline",
    shuffle_partitions: int = 4,
    log_file: Path | str | None = None,
    driver_java_options: str | None = None,
    python_daemon: str | None = None,
) -> Any:
    """A SparkSession whose Python workers run this interpreter (so they see this venv's packages).
    `driver_java_options` become spark.driver.extraJavaOptions (QUICK_JVM_OPTIONS for work done in Python);
    `python_daemon` is the module that forks the Python workers (SCORING_DAEMON: imports done before the fork).

    With `log_file`, the JVM's own output (its start-up warnings, log4j's lines) goes to that file instead
    of the terminal, and Spark logs errors only: a user sees Faultline's progress, not eight JVM warnings.
    Errors still reach Python as exceptions."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if (master.startswith("local") and log_file is not None) or is_loopback_cluster(master):
        # no "hostname resolves to a loopback" warning; a cluster on this machine reaches the driver there
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
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
    if driver_java_options:
        builder = builder.config("spark.driver.extraJavaOptions", driver_java_options)
    if python_daemon:
        builder = builder.config("spark.python.daemon.module", python_daemon)
    if log_file is None:
        return builder.getOrCreate()
    with _stderr_to(Path(log_file)):  # the JVM starts here and keeps this stderr for its lifetime
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def is_loopback_cluster(master: str) -> bool:
    """A standalone master on this machine (spark://127.0.0.1:P or spark://localhost:P)."""
    return bool(re.match(r"^spark://(127\.0\.0\.1|localhost)(:\d+)?$", master))


def executors(session: Any) -> int:
    """How many executors have joined the application (the driver not counted)."""
    return max(0, int(session.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1)


def wait_for_executors(
    session: Any, timeout_s: float = 180.0, say: Callable[[str], None] | None = None, settle_s: float = 2.0
) -> int:
    """Waits until at least one executor has joined a cluster application; a job submitted before that
    would wait silently for ever. Raises UsageError after `timeout_s` (no worker registered with the
    master, or none with enough free cores and memory). Then it waits while more join (until none has
    for `settle_s`): the master starts one on every worker at once, but a loaded worker's may join seconds
    after the first, too late for a short job to use it."""
    from faultline.core.errors import UsageError

    master = session.sparkContext.master
    if master.startswith("local"):
        return 0
    deadline = time.monotonic() + timeout_s
    told = False
    while (n := executors(session)) == 0:
        if time.monotonic() > deadline:
            raise UsageError(
                f"no executor joined from {master} in {timeout_s:.0f} s: is a worker registered with "
                "that master, with a free core and spark.executor.memory (1g) free?"
            )
        if say and not told:
            say(f"waiting for executors from {master}")
            told = True
        time.sleep(0.5)
    return _settled(session, n, settle_s, deadline)


def _settled(session: Any, joined: int, settle_s: float, deadline: float) -> int:
    """The executor count once `settle_s` went by with no new one (or at `deadline`)."""
    quiet_until = time.monotonic() + settle_s
    while time.monotonic() < min(quiet_until, deadline):
        time.sleep(min(0.25, settle_s))
        if (n := executors(session)) > joined:
            joined, quiet_until = n, time.monotonic() + settle_s
    return joined


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
