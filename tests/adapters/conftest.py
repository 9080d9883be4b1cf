"""The session-wide local SparkSession of the Spark adapter's tests.

One session serves every test (starting one costs 10-20 s and about 1 GB): ``local[5]``, so
a streaming job's workers and its micro-batches fit beside each other; the UI and progress
bars off; Spark's barrier slot check failing within seconds instead of ten minutes. Every
Spark process listens on 127.0.0.1 and runs this interpreter. The pipelines the tests run are
defined in the test modules, which the adapter sends to the executors by value.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

SLOTS = 5


@pytest.fixture(scope="session")
def spark(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A local SparkSession with :data:`SLOTS` task slots, stopped when the tests end."""
    if request.config.getoption("--schedule"):
        pytest.skip("Spark runs its workers in processes of its own, out of --schedule's reach")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from deltaflow.adapters import spark as dfspark

    config = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.barrier.sync.timeout": "120",
        "spark.driver.memory": "768m",
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    }
    session = dfspark.local_session(f"local[{SLOTS}]", "deltaflow-tests", config)
    yield session
    session.stop()
