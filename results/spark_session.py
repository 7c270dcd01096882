"""One way to start a SparkSession for Faultline, used by the CLI, notebooks and tests."""

from __future__ import annotations

import os
import sys
from typing import Any


def get_session(master: str = "local[2]", app_name: str = "faultline", shuffle_partitions: int = 4) -> Any:
    """A SparkSession whose Python workers run this interpreter (so they see this venv's packages)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
