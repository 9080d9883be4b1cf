"""The Spark sessions of the Spark adapter's tests: a local one, and one on a standalone cluster.

``spark``: one local session serves every test (starting one costs 10-20 s and about 1 GB):
``local[5]``, so a streaming job's workers and its micro-batches fit beside each other; the UI
and progress bars off; Spark's barrier slot check failing within seconds instead of ten
minutes. Every Spark process listens on 127.0.0.1 and runs this interpreter. The pipelines the
tests run are defined in the test modules, which the adapter sends to the executors by value.

``cluster``: a session on a standalone cluster started for the tests (a master and two workers
of two slots, each its own JVM, every executor in a directory of its own). A process holds
one Spark context at a time, so it stops the local session; the tests marked ``cluster`` run
last (see ``tests/conftest.py``).

Neither runs under ``--schedule`` (Spark's workers are processes of their own, out of its
reach: the second run of the suite would only repeat them), nor where there is no Java.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

SLOTS = 5
#: The standalone cluster: workers, and task slots on each.
CLUSTER_WORKERS = 2
CLUSTER_CORES = 2

_sessions: list[Any] = []


def _requires_spark(request: pytest.FixtureRequest) -> None:
    """Skip under ``--schedule``, or without Java."""
    if request.config.getoption("--schedule"):
        pytest.skip("Spark runs its workers in processes of its own, out of --schedule's reach")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 or newer: no java on PATH and JAVA_HOME is not set")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable


def _config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.barrier.sync.timeout": "120",
        "spark.driver.memory": "768m",
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    }


def _stop_sessions() -> None:
    while _sessions:
        _sessions.pop().stop()


@pytest.fixture(scope="session")
def spark(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A local SparkSession with :data:`SLOTS` task slots, stopped when the tests end."""
    _requires_spark(request)
    from deltaflow.adapters import spark as dfspark

    session = dfspark.local_session(f"local[{SLOTS}]", "deltaflow-tests", _config(tmp_path_factory))
    _sessions.append(session)
    yield session
    _stop_sessions()


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A SparkSession on a standalone cluster of :data:`CLUSTER_WORKERS` workers with
    :data:`CLUSTER_CORES` slots each, stopped (and the cluster with it) when the tests end."""
    _requires_spark(request)
    from deltaflow.adapters.spark._standalone import StandaloneCluster

    _stop_sessions()
    standalone = StandaloneCluster(
        tmp_path_factory.mktemp("standalone"), workers=CLUSTER_WORKERS, cores=CLUSTER_CORES
    )
    with standalone:
        session = standalone.session("deltaflow-cluster-tests", _config(tmp_path_factory))
        _sessions.append(session)
        try:
            yield session
        finally:
            _stop_sessions()


@pytest.fixture(params=["driver", "tasks"])
def stream_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The way a stream's micro-batches go, each test run both ways: ``"driver"`` (small ones
    collected by the driver as Arrow, the output returned with the workers' answers: the
    default for the tests' few rows) or ``"tasks"`` (feeding tasks deal the rows, fetching
    tasks return the output: the way of micro-batches too large for the driver)."""
    if request.param == "tasks":
        from deltaflow.adapters.spark import _stream_driver

        monkeypatch.setattr(_stream_driver, "INLINE_BYTES", -1)
        monkeypatch.setattr(_stream_driver, "INLINE_OUTPUT_BYTES", -1)
    return str(request.param)
