"""Spark jobs admit only their own: strangers on the workers' mesh of a barrier job and on a
stream driver's server are refused, never decoded, and change no answer; a user's own secret
and TLS work end to end; the adapter's own parameters are refused as input names.

The strangers connect at moments the test controls: the workers' mesh through the barrier
task's rendezvous (:class:`tests.attacks.FileGather`: each task publishes its port to a file
and waits for the test before the ``allGather``), the stream driver's server before the
workers' job is submitted."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.adapters import spark_pipelines as pipes
from tests.adapters.spark_data import (
    BATCHES,
    WordCounts,
    expected,
    line_updates,
    random_edges,
    rows,
    word_counts,
)
from tests.attacks import ATTACKS, FileGather, Stranger, make_tls, payload, split_address

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")

from deltaflow.adapters.spark import _batch, _stream  # noqa: E402
from deltaflow.adapters.spark._convert import OutputLayout, tag_inputs  # noqa: E402
from deltaflow.adapters.spark._logs import records_accumulator, relog  # noqa: E402
from deltaflow.adapters.spark._ship import ship  # noqa: E402

EDGES = random_edges(7, 12, 30, 3)


def _edges_frame(spark: Any) -> Any:
    return spark.createDataFrame(EDGES, "src long, dst long, time long, diff long")


def test_strangers_on_the_workers_mesh_change_nothing(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real barrier task of ``dfspark.run``, its rendezvous held while strangers of every
    kind connect to both tasks' mesh ports: the output equals ``df.run``'s, no pickle of
    theirs was loaded, and task 0's refusals (it accepts; task 1 only dials) reach the
    driver's log as ``run`` relays them."""
    caplog.set_level(logging.WARNING, "deltaflow")
    logs = records_accumulator(spark.sparkContext)
    marker = tmp_path / "marker"
    pipeline, layouts, frames, builder = _batch.check_inputs(
        pipes.Degrees(), {"edges": _edges_frame(spark)}, streaming=False
    )
    output = OutputLayout.of("degree long, n long", single=True, names=list(builder.stores))
    security = _batch.Security.of(None, None)
    shipped = ship(pipeline).blob
    task = _batch.barrier_task(
        shipped, 2, layouts, output, security, None, FileGather(tmp_path), logs=logs
    )
    tagged = tag_inputs(spark, layouts, frames).repartition(2)
    result: list[Any] = []

    def job() -> None:
        try:
            result.append(tagged.mapInArrow(task, output.combined, barrier=True).collect())
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=job)
    thread.start()
    crowd: list[Stranger] = []
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"address-{i}").exists() for i in range(2)):
            assert time.monotonic() < deadline and thread.is_alive(), result
            time.sleep(0.05)
        for i in range(2):
            address = split_address((tmp_path / f"address-{i}").read_text())
            crowd += [Stranger(address, payload(a, marker, "mesh")) for a in ATTACKS]
        (tmp_path / "go").touch()
        thread.join(120)
        assert not thread.is_alive(), "the job hangs"
    finally:
        (tmp_path / "go").touch()
        for s in crowd:
            s.close()
    (got,) = result
    assert not isinstance(got, Exception), got
    want = df.run(pipes.Degrees(), edges=[((s, d), t, r) for s, d, t, r in EDGES])
    assert sorted((tuple(r) for r in got), key=repr) == expected(want)
    assert not marker.exists(), "a task loaded a stranger's pickle"
    relog(logs.value)
    refusals = [m for m in caplog.messages if "task 0 on " in m and "peer 0 refused" in m]
    for stranger in crowd[: len(ATTACKS)]:
        assert any(f"from {stranger.name} to port" in m for m in refusals), (stranger, refusals)


def test_strangers_on_the_stream_driver_are_refused_and_logged(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the workers' job is submitted, a stranger of every kind connects to the
    driver's server: each is refused and logged by its address, none is decoded, and the
    stream's micro-batches are right."""
    marker = tmp_path / "marker"
    crowd: list[Stranger] = []
    start_workers = _stream.SparkStream._start_workers

    def strangers_first(self: Any, job: Any) -> None:
        address = self._server.getsockname()[:2]
        crowd.extend(Stranger(address, payload(a, marker, "stream")) for a in ATTACKS)
        start_workers(self, job)

    monkeypatch.setattr(_stream.SparkStream, "_start_workers", strangers_first)
    caplog.set_level(logging.WARNING, "deltaflow")
    words = WordCounts(tmp_path)
    try:
        with words.stream(spark) as running:
            for b, rows_ in enumerate(BATCHES[:2]):
                words.feed(running, b, rows_)
    finally:
        for s in crowd:
            s.close()
    assert words.sink.rows() == word_counts(line_updates(BATCHES[:2]))
    assert not marker.exists(), "the driver loaded a stranger's pickle"
    refusals = [r.getMessage() for r in caplog.records if "stream driver refused" in r.getMessage()]
    for stranger in crowd:
        assert any(f"from {stranger.name} " in r for r in refusals), (stranger.name, refusals)


def _strangers_on(running: Any, attacks: Sequence[str], marker: Path) -> list[Stranger]:
    """A stranger of each of ``attacks`` on each of a running stream's workers' data ports."""
    return [
        Stranger(split_address(address), payload(a, marker, "mesh"))
        for address in running._addresses
        for a in attacks
    ]


def test_strangers_on_the_stream_workers_ports_change_nothing(spark: Any, tmp_path: Path) -> None:
    """The ports where a stream's workers take its micro-batches' rows stay open while it runs:
    strangers of every kind on them, connected between micro-batches and held open, hold up
    no micro-batch, none is decoded, and every micro-batch is right."""
    marker = tmp_path / "marker"
    words = WordCounts(tmp_path)
    crowd: list[Stranger] = []
    try:
        with words.stream(spark) as running:
            for b, rows_ in enumerate(BATCHES):
                crowd += _strangers_on(running, ATTACKS, marker)
                start = time.monotonic()
                words.feed(running, b, rows_)
                assert time.monotonic() - start < 30
    finally:
        for s in crowd:
            s.close()
    assert words.sink.rows() == word_counts(line_updates(BATCHES))
    assert not marker.exists(), "a worker loaded a stranger's pickle"


def test_a_users_secret_and_tls_end_to_end(spark: Any, tmp_path: Path) -> None:
    """``secret=`` and ``tls=`` reach every task: the run's output equals ``df.run``'s."""
    tls = make_tls(tmp_path)
    out = dfspark.run(
        pipes.Degrees(),
        spark,
        edges=_edges_frame(spark),
        schema="degree long, n long",
        partitions=2,
        secret="a secret from the cluster's secret store",
        tls=tls,
    )
    want = df.run(pipes.Degrees(), edges=[((s, d), t, r) for s, d, t, r in EDGES])
    assert rows(out) == expected(want)


def test_a_stream_over_tls(spark: Any, tmp_path: Path) -> None:
    words = WordCounts(tmp_path)
    with words.stream(spark, tls=make_tls(tmp_path)) as running:
        words.feed(running, 0, BATCHES[0])
    assert words.sink.rows() == word_counts(line_updates(BATCHES[:1]))


def test_bad_security_arguments_are_refused_before_any_job(spark: Any) -> None:
    edges = _edges_frame(spark)
    with pytest.raises(ValueError, match="at least 16 bytes, not 5"):
        dfspark.run(pipes.Degrees(), spark, edges=edges, schema="d long, n long", secret="short")
    with pytest.raises(TypeError, match=r"tls must be a deltaflow\.TLS, not str"):
        dfspark.run(pipes.Degrees(), spark, edges=edges, schema="d long, n long", tls="cert.pem")

    class Secretive(df.Pipeline):
        def build(self, secret: df.Collection) -> df.Collection:
            return secret

    with pytest.raises(TypeError, match=r"inputs named \['secret'\].*adapter's own parameters"):
        dfspark.run(Secretive(), spark, schema="x long")


def test_strangers_refused_on_executors_reach_the_drivers_log_and_statistics(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Strangers on the workers' data ports are refused on the executors, whose Python
    workers have no logging configured: each refusal is logged on the driver, under the
    ``deltaflow`` logger, naming the worker, its executor and the stranger; the stream's
    ``statistics()`` count them; the micro-batch is right."""
    caplog.set_level(logging.WARNING, "deltaflow")
    marker = tmp_path / "marker"
    words = WordCounts(tmp_path)
    crowd: list[Stranger] = []
    try:
        with words.stream(spark) as running:
            crowd += _strangers_on(running, ("garbage", "http", "pickle"), marker)
            words.feed(running, 0, BATCHES[0])
            stats = running.statistics()
    finally:
        for s in crowd:
            s.close()
    assert words.sink.rows() == word_counts(line_updates(BATCHES[:1]))
    assert not marker.exists(), "a worker loaded a stranger's pickle"
    refusals = [
        r.getMessage()
        for r in caplog.records
        if r.name == "deltaflow" and r.levelno == logging.WARNING and "refused" in r.getMessage()
    ]
    for i, address in enumerate(running._addresses):
        port = split_address(address)[1]
        for stranger in crowd[3 * i : 3 * i + 3]:
            assert any(
                f"stream worker {i} on " in r
                and f"refused a connection from {stranger.name} to port {port}" in r
                for r in refusals
            ), (stranger.name, refusals)
    assert stats["refused"] == len(crowd), stats
