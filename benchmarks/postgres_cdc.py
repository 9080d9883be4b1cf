"""PostgreSQL in and out (issue #47): orders + customers -> revenue per region, kept in a
table by a job following both tables through one slot (``df.sources.postgres``, each
transaction one time) into an upsert sink (``df.sinks.postgres``), beside the same view kept
by a ``REFRESH MATERIALIZED VIEW`` loop in the same server.

Needs a server with ``wal_level=logical`` (give ``--dsn``; the database is used as is and
its tables ``bench_*`` replaced). A ``pgbench``-style writer commits one order per
transaction (an insert, or an update of an earlier order's amount) at ``--rate``
transactions/s for ``--seconds``; the figures:

* ``backlog``: changes/s the job drains when ``--backlog`` transactions wait in the slot
  (checkpointing every ``--checkpoint-every`` transactions);
* ``lag``: commit to the sink's commit, p50 / p99, at ``--rate``;
* ``refresh``: the same writer against a loop refreshing a materialized view: lag from a
  commit to the end of the first refresh that began after it, p50 / p99.

    python benchmarks/postgres_cdc.py --dsn "host=/tmp/pg user=df dbname=bench"
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import random
import statistics
import tempfile
import threading
import time
from typing import Any

import psycopg
import trio

import deltaflow as df

CUSTOMERS = 200


class Revenue(df.Pipeline):
    def build(self, orders: df.Collection, customers: df.Collection) -> df.Collection:
        by_customer = orders.map(lambda o: (o[1], o[2]))
        region = customers.map(lambda c: (c[0], c[1]))
        return by_customer.join(region).map(lambda kv: (kv[1][1], kv[1][0])).sum()


def setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for slot in ("bench_orders", "bench_customers", "bench_shop"):
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS bench_mv")
        conn.execute("DROP TABLE IF EXISTS deltaflow_sink_progress")
        for table in ("bench_orders", "bench_customers", "bench_revenue"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("CREATE TABLE bench_orders (id int PRIMARY KEY, customer int, amount int)")
        conn.execute("CREATE TABLE bench_customers (id int PRIMARY KEY, region text)")
        conn.execute("CREATE TABLE bench_revenue (region text PRIMARY KEY, total bigint)")
        conn.execute("ALTER TABLE bench_orders REPLICA IDENTITY FULL")
        conn.execute("ALTER TABLE bench_customers REPLICA IDENTITY FULL")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_customers VALUES (%s, %s)",
                [(c, f"region{c % 8}") for c in range(CUSTOMERS)],
            )
        conn.execute(
            "CREATE MATERIALIZED VIEW bench_mv AS SELECT c.region, sum(o.amount) AS total "
            "FROM bench_orders o JOIN bench_customers c ON o.customer = c.id GROUP BY c.region"
        )


class Writer:
    """Commits one order per transaction, remembering each commit's time (by order)."""

    def __init__(self, dsn: str, seed: int = 1) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.rng = random.Random(seed)
        self.next = 0
        self.commits: list[float] = []

    def one(self) -> None:
        if self.next and self.rng.random() < 0.3:
            self.conn.execute(
                "UPDATE bench_orders SET amount = %s WHERE id = %s",
                (self.rng.randrange(1, 100), self.rng.randrange(self.next)),
            )
        else:
            self.conn.execute(
                "INSERT INTO bench_orders VALUES (%s, %s, %s)",
                (self.next, self.rng.randrange(CUSTOMERS), self.rng.randrange(1, 100)),
            )
            self.next += 1
        self.commits.append(time.monotonic())

    def run(self, rate: float, seconds: float) -> None:
        start = time.monotonic()
        n = int(rate * seconds)
        for i in range(n):
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.one()


class Timed:
    """A sink recording when each time's transaction committed."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.done: dict[int, float] = {}

    async def open(self, output: str) -> Any:
        writer = await self.sink.open(output)
        outer = self

        class Writer:
            written = writer.written

            async def write(self, t: int, updates: list[tuple[Any, int]]) -> None:
                await writer.write(t, updates)
                self.written = t
                outer.done[t] = time.monotonic()

            async def aclose(self) -> None:
                await writer.aclose()

        return Writer()


def percentiles(lags: list[float]) -> tuple[float, float]:
    ordered = sorted(lags)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def reached(job: df.Job, time: int) -> None:
    """Wait until the job has fed every batch before ``time``."""
    while True:
        if job.time >= time:
            return
        await trio.sleep(0.01)


async def follow(dsn: str, rate: float, seconds: float, backlog: int, every: int) -> dict[str, Any]:
    setup(dsn)
    # Both tables through one slot: one change stream, each transaction one time.
    shop = df.sources.postgres(
        dsn,
        {"orders": "bench_orders", "customers": "bench_customers"},
        slot="bench_shop",
        poll=0.01,
    )
    sources = {"orders": shop, "customers": shop}
    timed = Timed(df.sinks.postgres(dsn, "bench_revenue", key="region"))
    writer = Writer(dsn)
    with tempfile.TemporaryDirectory() as location:
        opened = df.open(Revenue(), checkpoint=location, sources=sources, sinks={"output": timed})
        async with opened as job, trio.open_nursery() as nursery:
            await job.follow(once=True)  # the two tables' snapshot: time 0
            base = job.time
            for _ in range(backlog):
                writer.one()
            started = time.monotonic()
            nursery.start_soon(functools.partial(job.follow, checkpoint_every=every))
            await reached(job, base + backlog)
            drained = backlog / (time.monotonic() - started)
            first = len(writer.commits)
            await trio.to_thread.run_sync(writer.run, rate, seconds)
            last = base + len(writer.commits)
            await reached(job, last)
            await trio.sleep(0.2)
            nursery.cancel_scope.cancel()
    # A transaction that changes no total (an amount set to itself) is in the next write.
    times = sorted(timed.done)
    lags = []
    for i in range(first, len(writer.commits)):
        k = bisect.bisect_left(times, base + i)
        if k < len(times):
            lags.append(timed.done[times[k]] - writer.commits[i])
    p50, p99 = percentiles(lags)
    with psycopg.connect(dsn) as conn:
        got = sorted(conn.execute("SELECT region, total FROM bench_revenue").fetchall())
        conn.execute("REFRESH MATERIALIZED VIEW bench_mv")
        want = sorted(conn.execute("SELECT region, total FROM bench_mv").fetchall())
    return {
        "figure": "postgres cdc",
        "checkpoint_every": every,
        "backlog_changes_per_s": round(drained, 1),
        "rate": rate,
        "lag_p50_ms": round(p50 * 1000, 1),
        "lag_p99_ms": round(p99 * 1000, 1),
        "check": "ok" if got == want else "MISMATCH",
    }


def refresh_loop(dsn: str, rate: float, seconds: float) -> dict[str, Any]:
    setup(dsn)
    writer = Writer(dsn)
    refreshes: list[tuple[float, float]] = []
    stop = threading.Event()

    def loop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                began = time.monotonic()
                conn.execute("REFRESH MATERIALIZED VIEW bench_mv")
                refreshes.append((began, time.monotonic()))

    thread = threading.Thread(target=loop)
    thread.start()
    writer.run(rate, seconds)
    time.sleep(0.5)
    stop.set()
    thread.join()
    lags = []
    for commit in writer.commits:
        ends = [end for began, end in refreshes if began >= commit]
        if ends:
            lags.append(ends[0] - commit)
    p50, p99 = percentiles(lags)
    took = statistics.median(end - began for began, end in refreshes)
    return {
        "figure": "postgres refresh materialized view",
        "rate": rate,
        "refresh_ms": round(took * 1000, 1),
        "lag_p50_ms": round(p50 * 1000, 1),
        "lag_p99_ms": round(p99 * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=10, help="batches")
    args = parser.parse_args()
    figures = trio.run(
        follow, args.dsn, args.rate, args.seconds, args.backlog, args.checkpoint_every
    )
    print(json.dumps(figures))
    print(json.dumps(refresh_loop(args.dsn, args.rate, args.seconds)))


if __name__ == "__main__":
    main()
