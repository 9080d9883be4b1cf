"""``dfspark.stream`` on a real local Spark: micro-batches written by the test, each one
time, the state kept across them, every micro-batch's output changes equal to ``df.run``'s
at that time."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest
from tests.adapters import spark_pipelines as pipes
from tests.adapters.spark_data import (
    BATCHES,
    Collected,
    WordCounts,
    assert_split_tables,
    line_updates,
    source,
    split_stream,
    word_counts,
    write_batch,
)

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")


def test_micro_batches_match_run_and_keep_state(
    spark: Any, tmp_path: Path, stream_path: str
) -> None:
    """After every micro-batch, its output changes equal df.run's at its time: the count of a
    word seen before changes (a retraction of the old count), so the state was kept; by the
    driver and by feeding and fetching tasks alike."""
    words = WordCounts(tmp_path)
    with words.stream(spark) as running:
        for b, rows in enumerate(BATCHES):
            words.feed(running, b, rows)
            assert words.sink.rows() == word_counts(line_updates(BATCHES[: b + 1])), b
            assert sorted(words.sink.batches) == list(range(b + 1))
        stats = running.statistics()
        inline = list(running.inline_batches)
    assert stats["batches"] == len(BATCHES)
    assert inline == [stream_path == "driver"] * len(BATCHES)
    assert ("the", 2, 1, -1) in words.sink.batches[1]  # the count of 'the' moved from 2 to 3


def test_micro_batches_over_several_partitions(
    spark: Any, tmp_path: Path, stream_path: str
) -> None:
    """A micro-batch spread over several partitions (some of them empty), read by as many
    tasks each dealing its rows to the workers, or collected by the driver: every
    micro-batch equals df.run's, and the workers were fed each micro-batch's rows exactly
    once."""
    words = WordCounts(tmp_path)
    with words.stream(spark, words.lines(spark).repartition(5), partitions=3) as running:
        for b, rows in enumerate(BATCHES):
            words.feed(running, b, rows)
        fed = list(running.batch_rows)
    assert words.sink.rows() == word_counts(line_updates(BATCHES))
    assert fed == [len(rows) for rows in BATCHES]


def test_parquet_sink_and_stop_frees_the_slots(spark: Any, tmp_path: Path) -> None:
    """The parquet sink appends every micro-batch's changes; stopping the stream ends the
    workers' job, so its slots are free again."""
    from deltaflow.adapters.spark._slots import free_slots

    directory = tmp_path / "in"
    directory.mkdir()
    out = tmp_path / "out"
    lines = source(spark, directory, "line string")
    running = dfspark.stream(
        pipes.WordCount(),
        spark,
        lines=lines,
        schema="word string, n long",
        path=str(out),
        partitions=2,
    )
    try:
        for b, rows in enumerate(BATCHES[:2]):
            write_batch(directory, b, [{"line": r["line"]} for r in rows])
            running.process_all_available()
    finally:
        running.stop()
    updates = [(r["line"], b, 1) for b, rows in enumerate(BATCHES[:2]) for r in rows]
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert got == word_counts(updates)
    deadline = time.monotonic() + 10
    while free_slots(spark.sparkContext)[0] < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert free_slots(spark.sparkContext)[0] == 5


def test_dict_outputs_to_tables(spark: Any, tmp_path: Path) -> None:
    """A ``build()`` returning a dict streams each output to its own table."""
    directory = tmp_path / "in"
    directory.mkdir()
    tables = {"words": "stream_words", "lengths": "stream_lengths"}
    batches = [["cat", "horse"], ["cat", "dog"], ["emu"]]
    with split_stream(spark, directory, tables) as running:
        for b, rows in enumerate(batches):
            write_batch(directory, b, [{"word": w} for w in rows])
            running.process_all_available()
    assert_split_tables(spark, tables, batches)


def test_stream_static_join_matches_run(spark: Any, tmp_path: Path, stream_path: str) -> None:
    """Streamed views joined with a static page table (a DataFrame) and a list of users'
    tiers, both loaded once at the stream's first micro-batch: every micro-batch's changes
    equal ``dfspark.run``'s at its time, with the views at their batch's time and the tables
    at time 0; Spark ``timestamp`` columns arrive as ``datetime`` (the pipeline reads
    ``.hour``) and go out as timestamps; by the driver and by tasks alike."""
    directory = tmp_path / "in"
    directory.mkdir()
    ddl = "user string, page string, at timestamp"
    views = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).json(str(directory))
    pages = spark.createDataFrame([("/a", "news"), ("/b", "news"), ("/c", "sport")],
                                  "page string, category string")  # fmt: skip
    tiers = [("ann", "gold"), ("bob", "free"), ("cy", "gold")]
    batches = [
        [("ann", "/a", "2026-01-02T10:15:00"), ("bob", "/c", "2026-01-02T11:00:00")],
        [("cy", "/b", "2026-01-02T12:30:00"), ("ann", "/c", "2026-01-02T09:00:00")],
        [("bob", "/a", "2026-01-02T13:45:00"), ("dan", "/a", "2026-01-02T14:00:00")],
    ]
    schema = {"latest": "category string, tier string, at timestamp",
              "hours": "category string, hour int, views long"}  # fmt: skip
    got: dict[str, list[tuple[Any, ...]]] = {"latest": [], "hours": []}

    def sink(frames: dict[str, Any], _batch_id: int) -> None:
        for name, frame in frames.items():
            got[name] += [tuple(r) for r in frame.collect()]

    with dfspark.stream(
        pipes.LatestByCategory(), spark, views=views, pages=pages, tiers=tiers,
        schema=schema, foreach_batch=sink, partitions=2,
    ) as running:  # fmt: skip
        for b, rows in enumerate(batches):
            write_batch(directory, b, [dict(zip(("user", "page", "at"), r)) for r in rows])
            running.process_all_available()
    timed = [(*r, b) for b, rows in enumerate(batches) for r in rows]
    whole = dfspark.run(
        pipes.LatestByCategory(), spark, schema=schema,
        views=spark.createDataFrame(timed, "user string, page string, at string, time long")
        .selectExpr("user", "page", "cast(at as timestamp) as at", "time"),
        pages=pages, tiers=spark.createDataFrame(tiers, "user string, tier string"),
    )  # fmt: skip
    assert isinstance(whole, dict)
    for name, frame in whole.items():
        assert sorted(got[name]) == sorted(tuple(r) for r in frame.collect()), name
    assert got["latest"] and got["hours"]
    assert all(isinstance(r[2], datetime.datetime) for r in got["latest"])
    assert ("news", 14, 1, 2, 1) in got["hours"]  # dan has no tier, but his view counts


def test_failing_worker_fails_the_query(spark: Any, tmp_path: Path) -> None:
    """User code raising in a worker stops the query within seconds with the OperatorError
    df.run raises (the operator's name, the user's exception and message), from the query's
    exception."""
    directory = tmp_path / "in"
    directory.mkdir()
    xs = spark.readStream.schema("x long").option("maxFilesPerTrigger", 1).json(str(directory))
    running = dfspark.stream(
        pipes.Fails(), spark, xs=xs, schema="x long", foreach_batch=Collected(), partitions=2
    )
    try:
        write_batch(directory, 0, [{"x": 1}, {"x": 2}])
        running.process_all_available()
        write_batch(directory, 1, [{"x": 13}])
        start = time.monotonic()
        with pytest.raises(df.OperatorError) as info:
            running.process_all_available()
        assert time.monotonic() - start < 30
    finally:
        running.stop()
    with pytest.raises(df.OperatorError) as local:
        df.run(pipes.Fails(), xs=[(1, 0, 1), (2, 0, 1), (13, 1, 1)])
    assert str(info.value) == str(local.value)
    assert "explode" in info.value.operator
    assert type(info.value.__cause__) is ValueError  # the user's exception
    assert type(info.value.__context__).__module__.startswith("pyspark")
    assert running.error is info.value
    assert running.failure == f"OperatorError: {local.value}"


def test_bad_row_fails_the_query_naming_it(spark: Any, tmp_path: Path) -> None:
    """A null diff in a micro-batch stops the query, naming the input, the column and the row."""
    directory = tmp_path / "in"
    directory.mkdir()
    xs = spark.readStream.schema("x long, diff long").json(str(directory))
    running = dfspark.stream(
        pipes.Identity(), spark, xs=xs, schema="x long", foreach_batch=Collected(), partitions=2
    )
    try:
        write_batch(directory, 0, [{"x": 1, "diff": 1}, {"x": 2}])
        with pytest.raises(
            ValueError, match=r"input 'xs': column 'diff' is null in the row \(x=2\)"
        ) as info:
            running.process_all_available()
        assert type(info.value) is ValueError
    finally:
        running.stop()


def test_output_that_does_not_fit_stops_the_query_naming_it(spark: Any, tmp_path: Path) -> None:
    """An output datum that does not fit the schema (found where the sink reads the output)
    stops the query with the TypeError df.run's conversion raises, naming the output."""
    directory = tmp_path / "in"
    directory.mkdir()
    xs = spark.readStream.schema("x string").json(str(directory))
    running = dfspark.stream(
        pipes.Identity(), spark, xs=xs, schema="x long", foreach_batch=Collected(), partitions=2
    )
    try:
        write_batch(directory, 0, [{"x": "a"}])
        with pytest.raises(
            TypeError, match=r"output 'output': datum 'a' does not fit column 'x' \(bigint\)"
        ):
            running.process_all_available()
    finally:
        running.stop()
    assert isinstance(running.error, TypeError)


def test_streaming_inputs_are_checked(spark: Any, tmp_path: Path) -> None:
    """A ``time`` column, static inputs alone, no sink or too many partitions are refused."""
    timed = spark.readStream.schema("x long, time long").json(str(tmp_path))
    with pytest.raises(ValueError, match="input 'xs': a streaming input has no 'time' column"):
        dfspark.stream(pipes.Identity(), spark, xs=timed, schema="x long", path="p")
    static = spark.createDataFrame([(1,)], "x long")
    with pytest.raises(TypeError, match=r"needs at least one streaming input \(inputs \['xs'\]"):
        dfspark.stream(pipes.Identity(), spark, xs=static, schema="x long", path="p")
    xs = spark.readStream.schema("x long").json(str(tmp_path))
    with pytest.raises(TypeError, match="pass exactly one sink"):
        dfspark.stream(pipes.Identity(), spark, xs=xs, schema="x long")
    with pytest.raises(RuntimeError, match="needs 6 free task slots"):
        dfspark.stream(pipes.Identity(), spark, xs=xs, schema="x long", path="p", partitions=5)
