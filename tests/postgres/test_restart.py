"""A job following a table into a sink survives a server restart: the source and the sink
reconnect with backoff, the slot gives the changes committed since, and the sink table ends
equal to the view SQL computes, no time written twice."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
import trio
from tests.postgres.conftest import Server
from tests.postgres.shop import VIEW, Revenue, make_orders, random_transaction

import deltaflow as df

psycopg = pytest.importorskip("psycopg")


async def until(condition: Any, seconds: float) -> None:
    """Poll ``condition`` (a database query) until it holds, failing after ``seconds``."""
    for _ in range(int(seconds * 10)):
        if await trio.to_thread.run_sync(condition):
            return
        await trio.sleep(0.1)
    raise AssertionError(f"not caught up after {seconds} s")


async def test_server_restart_mid_stream(pg_dsn: str, postgres_server: Server) -> None:
    rng = random.Random(5)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)
        conn.execute("CREATE TABLE log (region text, total bigint, time bigint, diff int)")
    source = df.sources.postgres(pg_dsn, "orders", slot="restart_job", poll=0.05)
    sink = df.sinks.postgres(pg_dsn, "log", mode="changelog")

    def caught_up() -> bool:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            got = conn.execute(
                "SELECT region, total FROM log GROUP BY region, total HAVING sum(diff) <> 0"
            ).fetchall()
            return Counter(got) == Counter(conn.execute(VIEW).fetchall())

    def write(n: int) -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for _ in range(n):
                random_transaction(conn, rng, next_id)

    opened = df.open(Revenue(), sources={"orders": source}, sinks={"output": sink})
    async with opened as job, trio.open_nursery() as nursery:
        nursery.start_soon(job.follow)
        await trio.to_thread.run_sync(write, 3)
        await until(caught_up, 30)
        await trio.to_thread.run_sync(postgres_server.ctl, "restart", "-m", "fast")
        await trio.to_thread.run_sync(write, 4)
        await until(caught_up, 60)
        nursery.cancel_scope.cancel()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT region, total, diff FROM log ORDER BY time").fetchall()
    state: Counter[tuple[Any, ...]] = Counter()
    for region, total, diff in rows:
        state[(region, total)] += diff
        assert state[(region, total)] in (0, 1)
