"""A Spark job's output into ``df.sinks.postgres`` (``dfspark.to_sink``) on a real local Spark
and a real PostgreSQL server: a stream's changelog table holds each micro-batch's changes
exactly once (equal to ``df.run``'s output) across a stop, a restart, and a micro-batch sunk
but not checkpointed and so run again; a new query into the same table starts it afresh; a
run's output written into an upsert table equals the recompute, written twice or not."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.postgres.conftest import pg_dsn as pg_dsn, postgres_server as postgres_server

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")
psycopg = pytest.importorskip("psycopg")


class Revenue(df.Pipeline):
    """Revenue per region from ``(order, region, amount)`` rows."""

    def build(self, orders: df.Collection) -> df.Collection:
        return orders.map(lambda o: (o[1], o[2])).sum()


SCHEMA = "region string, total long"
_EPOCH = time.time() - 600


def random_files(rng: random.Random, n: int) -> list[list[tuple[tuple[int, str, int], int]]]:
    """``n`` files of orders inserted, and some retracted later."""
    live: list[tuple[int, str, int]] = []
    files = []
    for i in range(n):
        rows = []
        for j in range(rng.randrange(1, 5)):
            if live and rng.random() < 0.3:
                rows.append((live.pop(rng.randrange(len(live))), -1))
            else:
                order = (i * 10 + j, rng.choice("NSEW"), rng.randrange(1, 50))
                live.append(order)
                rows.append((order, 1))
        files.append(rows)
    return files


def write_file(directory: Path, index: int, rows: list[tuple[tuple[int, str, int], int]]) -> None:
    """File ``index``, appearing whole, older than the next one."""
    tmp = directory.parent / f".{directory.name}-{index}.json"
    lines = [json.dumps({"id": o, "region": r, "amount": a, "diff": d}) for (o, r, a), d in rows]
    tmp.write_text("".join(line + "\n" for line in lines))
    os.utime(tmp, (_EPOCH + index, _EPOCH + index))
    tmp.rename(directory / f"{index:04d}.json")


def expected(files: list[list[tuple[tuple[int, str, int], int]]]) -> Counter[tuple[Any, ...]]:
    """``df.run``'s output, file ``b`` at time ``b``, as changelog rows."""
    updates = [(o, b, d) for b, rows in enumerate(files) for o, d in rows]
    return Counter((r, n, t, d) for (r, n), t, d in df.run(Revenue(), orders=updates))


def start(spark: Any, directory: Path, location: str, sink: Any) -> Any:
    orders = (
        spark.readStream.schema("id long, region string, amount long, diff long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )
    return dfspark.stream(
        Revenue(),
        spark,
        orders=orders,
        schema=SCHEMA,
        partitions=2,
        checkpoint_location=location,
        foreach_batch=sink,
    )


def table(dsn: str, name: str) -> Counter[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return Counter(tuple(r) for r in conn.execute(f"SELECT * FROM {name}").fetchall())


def test_a_stream_writes_each_micro_batch_once(spark: Any, pg_dsn: str, tmp_path: Path) -> None:
    files = random_files(random.Random(47), 4)
    directory = tmp_path / "in"
    directory.mkdir()
    location = str(tmp_path / "query")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE log (region text, total bigint, time bigint, diff int)")
    sink = dfspark.to_sink(df.sinks.postgres(pg_dsn, "log", mode="changelog"))
    try:
        with start(spark, directory, location, sink) as running:
            for b in range(2):
                write_file(directory, b, files[b])
                running.process_all_available()
                assert table(pg_dsn, "log") == expected(files[: b + 1])
            # The checkpoint of micro-batch 2 fails after the sink wrote it.
            blocker = Path(location) / "deltaflow" / "checkpoint-000003.json"
            blocker.mkdir()
            write_file(directory, 2, files[2])
            with pytest.raises(df.CheckpointError):
                running.process_all_available()
        assert table(pg_dsn, "log") == expected(files[:3])
        blocker.rmdir()
        # Restarted, the query runs micro-batch 2 again, with the same changes: not written
        # twice.
        with start(spark, directory, location, sink) as running:
            assert running.resumed_at == 2
            running.process_all_available()
            write_file(directory, 3, files[3])
            running.process_all_available()
        assert table(pg_dsn, "log") == expected(files[:4])
        # A new query (a fresh checkpoint location) into the same table starts it afresh.
        again = tmp_path / "again"
        again.mkdir()
        other = [((100, "N", 5), 1), ((101, "S", 7), 1), ((102, "N", 1), 1)]
        write_file(again, 0, other)
        with start(spark, again, str(tmp_path / "query2"), sink) as running:
            running.process_all_available()
        assert table(pg_dsn, "log") == expected([other])
    finally:
        sink.close()


def test_a_runs_output_into_an_upsert_table(spark: Any, pg_dsn: str) -> None:
    files = random_files(random.Random(7), 6)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE revenue (region text PRIMARY KEY, total bigint)")
    updates = [(o, b, d) for b, rows in enumerate(files) for o, d in rows]
    frame = spark.createDataFrame(
        [(o, r, a, t, d) for (o, r, a), t, d in updates],
        "id long, region string, amount long, time long, diff long",
    )
    out = dfspark.run(Revenue(), spark, orders=frame, schema=SCHEMA, partitions=2)
    totals: Counter[str] = Counter()
    for (_, region, amount), d in ((o, d) for rows in files for o, d in rows):
        totals[region] += amount * d
    want = Counter({(r, n): 1 for r, n in totals.items() if n})
    for _ in range(2):  # written again: emptied first, the same table
        dfspark.to_sink(df.sinks.postgres(pg_dsn, "revenue", key="region")).write(out)
        assert table(pg_dsn, "revenue") == want
    with pytest.raises(TypeError, match="not a sink"):
        dfspark.to_sink("revenue")  # type: ignore[arg-type]
