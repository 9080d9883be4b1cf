"""``df.sinks.postgres`` against a real server: after every time, the sink table equals the
view recomputed by SQL from a mirror of the inputs in the same database (upsert and
changelog modes, 1-3 workers); bad tables and credentials give clear errors."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from tests.postgres.shop import REGIONS, Revenue

import deltaflow as df
from deltaflow.adapters.postgres import sink as sink_module
from deltaflow.adapters.postgres.connect import DatabaseError

psycopg = pytest.importorskip("psycopg")


def random_batches(rng: random.Random, times: int) -> list[list[tuple[tuple[int, str, int], int]]]:
    """Batches of order insertions and retractions of live orders."""
    live: list[tuple[int, str, int]] = []
    batches = []
    ident = 0
    for _ in range(times):
        batch = []
        for _ in range(rng.randrange(0, 8)):
            if live and rng.random() < 0.35:
                batch.append((live.pop(rng.randrange(len(live))), -1))
            else:
                ident += 1
                row = (ident, rng.choice(REGIONS), rng.randrange(1, 100))
                live.append(row)
                batch.append((row, 1))
        batches.append(batch)
    return batches


def feed_and_mirror(job: Any, conn: Any, batch: list[tuple[tuple[int, str, int], int]]) -> None:
    """Give the job's ``orders`` the ``batch``, and apply it to the table ``mirror`` too."""
    for row, diff in batch:
        job.inputs["orders"].update(row, diff)
        if diff > 0:
            conn.execute("INSERT INTO mirror VALUES (%s, %s, %s)", row)
        else:
            conn.execute("DELETE FROM mirror WHERE id = %s", (row[0],))


def sql_view(conn: Any) -> Counter[tuple[Any, ...]]:
    rows = conn.execute("SELECT region, sum(amount)::bigint FROM mirror GROUP BY region")
    return Counter(tuple(r) for r in rows.fetchall())


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (3, 1), (2, 2)])
async def test_upsert_table_equals_sql_view(
    pg_dsn: str, seed: int, workers: int, processes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each time's rows in one round trip (a pipeline), or for seed 1 by COPY."""
    if seed == 1:
        monkeypatch.setattr(sink_module, "PIPELINE_ROWS", 0)
    rng = random.Random(seed)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE mirror (id int PRIMARY KEY, region text, amount int)")
        conn.execute("CREATE TABLE revenue (region text PRIMARY KEY, total bigint)")
        sink = df.sinks.postgres(pg_dsn, "revenue", key="region")
        opened = df.open(Revenue(), workers, processes=processes, sinks={"output": sink})
        async with opened as job:
            for t, batch in enumerate(random_batches(rng, 12)):
                feed_and_mirror(job, conn, batch)
                await job.advance_to(t + 1)
                table = Counter(conn.execute("SELECT region, total FROM revenue").fetchall())
                assert table == sql_view(conn), f"time {t}"
        progress = conn.execute("SELECT time FROM deltaflow_sink_progress WHERE sink = 'revenue'")
        assert progress.fetchone() is not None


@pytest.mark.parametrize("pipeline_rows", [sink_module.PIPELINE_ROWS, 0])
async def test_changelog_table_sums_to_sql_view(
    pg_dsn: str, pipeline_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each time's rows in one round trip (a pipeline), or by COPY."""
    monkeypatch.setattr(sink_module, "PIPELINE_ROWS", pipeline_rows)
    rng = random.Random(7)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE mirror (id int PRIMARY KEY, region text, amount int)")
        conn.execute("CREATE TABLE log (region text, total bigint, time bigint, diff bigint)")
        sink = df.sinks.postgres(pg_dsn, "log", mode="changelog")
        async with df.open(Revenue(), workers=2, sinks={"output": sink}) as job:
            for t, batch in enumerate(random_batches(rng, 10)):
                feed_and_mirror(job, conn, batch)
                await job.advance_to(t + 1)
                got = conn.execute(
                    "SELECT region, total, sum(diff) FROM log GROUP BY region, total "
                    "HAVING sum(diff) <> 0"
                ).fetchall()
                assert Counter({(r, s): int(n) for r, s, n in got}) == sql_view(conn)
        times = conn.execute("SELECT DISTINCT time FROM log ORDER BY time").fetchall()
        assert [t for (t,) in times] == sorted({t for _, t, _ in job.output.updates()})


async def test_errors_name_the_table_and_hide_the_password(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE wrong (a int, b int)")
    missing = df.sinks.postgres(pg_dsn, "nowhere", key="region")
    with pytest.raises(DatabaseError, match="no table 'nowhere'"):
        async with df.open(Revenue(), sinks={"output": missing}) as job:
            job.inputs["orders"].insert((1, "north", 3))
            await job.advance_to(1)
    bad_key = df.sinks.postgres(pg_dsn, "wrong", key="region")
    with pytest.raises(DatabaseError, match=r"sink table 'wrong'.*key columns \['region'\]"):
        async with df.open(Revenue(), sinks={"output": bad_key}) as job:
            await job.advance_to(1)
    dsn = "postgresql://ann:s3cret-pw@127.0.0.1:1/shop"
    unreachable = df.sinks.postgres(dsn, "revenue", key="region")
    assert "s3cret" not in repr(unreachable)
    with pytest.raises(DatabaseError, match=r"sink table 'revenue'.*cannot connect") as info:
        async with df.open(Revenue(), sinks={"output": unreachable}) as job:
            await job.advance_to(1)
    assert "s3cret" not in str(info.value)
    with pytest.raises(ValueError, match="needs key="):
        df.sinks.postgres(pg_dsn, "revenue")


def test_redact() -> None:
    from deltaflow.adapters.postgres.connect import redact, scrub

    assert redact("postgresql://a:pw@h/d?password=x&sslmode=require") == (
        "postgresql://a@h/d?sslmode=require"
    )
    assert redact("host=h password='p w' user=a") == "host=h user=a"
    assert scrub("failed for pw", "postgresql://a:pw@h/d") == "failed for ***"


async def test_a_fresh_job_empties_a_sink_holding_an_earlier_runs_times(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE revenue (region text PRIMARY KEY, total bigint)")
        sink = df.sinks.postgres(pg_dsn, "revenue", key="region")
        async with df.open(Revenue(), sinks={"output": sink}) as job:
            job.inputs["orders"].insert((1, "north", 3))
            job.inputs["orders"].insert((2, "west", 1))
            await job.advance_to(5)
        async with df.open(Revenue(), sinks={"output": sink}) as job:
            job.inputs["orders"].insert((2, "south", 4))
            await job.advance_to(1)
        assert conn.execute("SELECT region, total FROM revenue").fetchall() == [("south", 4)]
        progress = conn.execute("SELECT time FROM deltaflow_sink_progress").fetchall()
        assert progress == [(0,)]
