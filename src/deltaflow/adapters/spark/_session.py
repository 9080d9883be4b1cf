"""A SparkSession on this machine, set up the way deltaflow's barrier jobs want it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["LOCAL_CONFIG", "local_session"]

#: The settings every local session gets: no console progress bars, and Spark's own check
#: for free barrier slots fails fast when another job holds them (see the package docstring).
LOCAL_CONFIG: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "3",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "2s",
}


def local_session(
    master: str = "local[2]", app_name: str = "deltaflow", config: Mapping[str, str] | None = None
) -> Any:
    """A SparkSession on this machine (``master``: ``local[n]`` for ``n`` task slots).

    Loopback addresses (``SPARK_LOCAL_IP``) and this interpreter for the executors
    (``PYSPARK_PYTHON``) unless the environment says otherwise, :data:`LOCAL_CONFIG` updated
    by ``config``, and only errors logged. The caller stops it.

        spark = dfspark.local_session("local[3]", config={"spark.ui.enabled": "false"})
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_CONFIG, **(config or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
