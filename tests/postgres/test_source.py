"""``df.sources.postgres`` against a real server: a table's snapshot then random
transactions (inserts, updates, deletes), the output after each time equal to the view
recomputed by SQL in the same database at that transaction; a job resumed on its checkpoint
continues exactly after it; errors name the table."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import cli
from tests.postgres.shop import (
    VIEW,
    make_orders,
    make_orders_and_customers,
    random_transaction,
)

import deltaflow as df
from deltaflow.adapters.postgres.connect import DatabaseError
from deltaflow.adapters.postgres.source import lsn_value

psycopg = pytest.importorskip("psycopg")


class Revenue(df.Pipeline):
    """Revenue per region: orders ``(id, customer, amount)`` joined with customers
    ``(id, region)``; here from one table, orders carrying the region."""

    def build(self, orders: df.Collection) -> df.Collection:
        return orders.map(lambda o: (o[1], o[2])).sum()


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("workers", [1, 2])
async def test_changes_against_sql_view(pg_dsn: str, seed: int, workers: int) -> None:
    rng = random.Random(seed)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)
        source = df.sources.postgres(pg_dsn, "orders", slot="orders_job", poll=0.05)
        async with df.open(Revenue(), workers=workers, sources={"orders": source}) as job:
            reader = await source.open("orders", None, None)
            # Changes committed after the slot's snapshot, before the job reads them.
            views = []
            try:
                first = await reader.read(False)
                assert first is not None
                job.inputs["orders"].extend(first.data, first.diffs)
                await job.advance_to(1)
                views.append(Counter(conn.execute(VIEW).fetchall()))
                for _ in range(8):
                    random_transaction(conn, rng, next_id)
                    conn.execute("INSERT INTO other VALUES (1)")  # another table: no time
                    views.append(Counter(conn.execute(VIEW).fetchall()))
                fed = 0
                while fed < 8:
                    batch = await reader.read(True)
                    assert batch is not None
                    job.inputs["orders"].extend(batch.data, batch.diffs)
                    fed += 1
                    await job.advance_to(job.time + 1)
                assert await reader.read(False) is None
            finally:
                await reader.aclose()
            for t, view in enumerate(views):
                got = Counter({k: n for k, n in job.output.at(t).items() if n})
                assert got == Counter({tuple(r): n for r, n in view.items()}), f"time {t}"


async def test_follow_resumes_after_checkpoint(pg_dsn: str, tmp_path: Path) -> None:
    rng = random.Random(3)
    location = str(tmp_path / "ckpt")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)
        source = df.sources.postgres(pg_dsn, "orders", slot="resume_job", poll=0.05)
        async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
            assert await job.follow(once=True) == 1  # the snapshot
        for _ in range(4):
            random_transaction(conn, rng, next_id)
        async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
            assert job.resumed_at == 1
            assert await job.follow(once=True, checkpoint_every=2) == 4
        confirmed = slot_position(conn, "resume_job")
        for _ in range(3):
            random_transaction(conn, rng, next_id)
        async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
            assert job.resumed_at == 5
            assert await job.follow(once=True) == 3
            got = Counter({k: n for k, n in job.output.at(job.time - 1).items() if n})
        assert got == Counter(tuple(r) for r in conn.execute(VIEW).fetchall())
        # The slot moved only to positions a durable checkpoint held: the third job took no
        # checkpoint while it followed, so the slot is where the second job's left it; a
        # fourth job, resuming on the third's closing checkpoint, reads nothing and moves it.
        assert slot_position(conn, "resume_job") == confirmed
        async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
            assert job.resumed_at == 8
            assert await job.follow(once=True) == 0
        assert lsn_value(slot_position(conn, "resume_job")) > lsn_value(confirmed)


def slot_position(conn: Any, slot: str) -> str:
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    assert row is not None
    return str(row[0])


async def test_errors_name_the_table(pg_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE plain (id int, region text, amount int)")
        with pytest.raises(DatabaseError, match="no table 'nowhere'"):
            await df.sources.postgres(pg_dsn, "nowhere", slot="s1").open("orders", None, None)
        with pytest.raises(DatabaseError, match=r"table 'plain'.*REPLICA IDENTITY FULL"):
            await df.sources.postgres(pg_dsn, "plain", slot="s1").open("orders", None, None)
        conn.execute("ALTER TABLE plain REPLICA IDENTITY FULL")
        wrong = df.sources.postgres(pg_dsn, "plain", slot="s1", schema="id INT, amount INT")
        with pytest.raises(DatabaseError, match=r"table 'plain'.*declared columns"):
            await wrong.open("orders", None, None)
        # A slot dropped under a checkpoint that continues from it.
        source = df.sources.postgres(pg_dsn, "plain", slot="s2", poll=0.05)
        location = str(tmp_path / "ckpt")
        async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
            await job.follow(once=True)
        conn.execute("SELECT pg_drop_replication_slot('s2')")
        with pytest.raises(DatabaseError, match=r"table 'plain'.*slot 's2'.*dropped"):
            async with df.open(Revenue(), checkpoint=location, sources={"orders": source}) as job:
                await job.follow(once=True)
    dsn = "postgresql://ann:s3cret-pw@127.0.0.1:1/shop"
    source = df.sources.postgres(dsn, "orders", slot="s3")
    with pytest.raises(DatabaseError, match=r"table 'orders'.*cannot connect") as info:
        await source.open("orders", None, None)
    assert "s3cret" not in str(info.value) and "s3cret" not in repr(source)


class RegionRevenue(df.Pipeline):
    """The guide's example: orders ``(id, customer, amount)`` and customers
    ``(id, region)`` to revenue per region."""

    def build(self, orders: df.Collection, customers: df.Collection) -> df.Collection:
        by_customer = orders.map(lambda o: (o[1], o[2]))
        region = customers.map(lambda c: (c[0], c[1]))
        return by_customer.join(region).map(lambda kv: (kv[1][1], kv[1][0])).sum()


JOINED = (
    "SELECT c.region, sum(o.amount)::bigint FROM orders o JOIN customers c "
    "ON o.customer = c.id GROUP BY c.region"
)


@pytest.mark.parametrize("workers", [1, 2])
async def test_two_tables_into_a_sink_against_sql(pg_dsn: str, workers: int) -> None:
    rng = random.Random(workers)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        make_orders_and_customers(conn)
        conn.execute("CREATE TABLE revenue (region text PRIMARY KEY, total bigint)")
        for c in range(6):
            conn.execute("INSERT INTO customers VALUES (%s, %s)", (c, rng.choice("NSEW")))
        sources = {
            "orders": df.sources.postgres(pg_dsn, "orders", slot="o_slot", poll=0.05),
            "customers": df.sources.postgres(pg_dsn, "customers", slot="c_slot", poll=0.05),
        }
        sinks = {"output": df.sinks.postgres(pg_dsn, "revenue", key="region")}
        async with df.open(RegionRevenue(), workers=workers, sources=sources, sinks=sinks) as job:
            await job.follow(once=True)
            for i in range(12):
                with conn.transaction():
                    if i % 4 == 3:
                        conn.execute(
                            "UPDATE customers SET region = %s WHERE id = %s",
                            (rng.choice("NSEW"), rng.randrange(6)),
                        )
                    elif i % 4 == 2:
                        conn.execute("DELETE FROM orders WHERE id = %s", (i - 1,))
                    else:
                        conn.execute(
                            "INSERT INTO orders VALUES (%s, %s, %s)",
                            (i, rng.randrange(6), rng.randrange(1, 50)),
                        )
                await job.follow(once=True)
                table = Counter(conn.execute("SELECT region, total FROM revenue").fetchall())
                assert table == Counter(conn.execute(JOINED).fetchall()), f"step {i}"


def test_cli_input_from_a_table(pg_dsn: str, postgres_server: Any, tmp_path: Path) -> None:
    """``--input orders=postgresql://.../db/orders``: the table's rows, and no slot left."""
    import json

    rng = random.Random(9)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        make_orders(conn, rng)
        want = Counter(tuple(r) for r in conn.execute(VIEW).fetchall())
        dbname = conn.info.dbname
        module = tmp_path / "revenue.py"
        module.write_text(
            "import deltaflow as df\n"
            "class Revenue(df.Pipeline):\n"
            "    def build(self, orders):\n"
            "        return orders.map(lambda o: (o[1], o[2])).sum()\n"
        )
        url = f"postgresql://df@/{dbname}/orders?host={postgres_server.root}"
        done = cli(tmp_path, "run", f"{module}:Revenue", "--input", f"orders={url}")
        assert done.returncode == 0, done.stderr
        got: Counter[tuple[Any, ...]] = Counter()
        for line in done.stdout.splitlines():
            record = json.loads(line)
            got[tuple(record["data"])] += record["diff"]
        assert +got == want
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
        assert not [s for (s,) in slots if s.startswith("deltaflow_cli")]
        bad = cli(
            tmp_path,
            "run",
            f"{module}:Revenue",
            "--input",
            f"orders=postgresql://df:hunter2@/{dbname}/missing?host={postgres_server.root}",
        )
        assert bad.returncode == 1
        assert "no table 'missing'" in bad.stderr and "hunter2" not in bad.stderr


async def test_a_row_reads_the_same_from_the_snapshot_and_a_change(pg_dsn: str) -> None:
    """Odd names and many types: a row read from the snapshot equals the same row read from
    an insert, an update's old and new rows, and a delete (nulls and quotes included)."""
    import datetime
    import decimal

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            'CREATE TABLE "Odd Table" ("my col" text, b boolean, d date, ts timestamp, '
            "f double precision, n numeric(10,2), arr int[], v varchar(20), k int)"
        )
        conn.execute('ALTER TABLE "Odd Table" REPLICA IDENTITY FULL')
        row = (
            "it's new-tuple: x[y]:'z' null",
            True,
            datetime.date(2024, 2, 29),
            datetime.datetime(2024, 1, 2, 3, 4, 5, 600000),
            0.1,
            decimal.Decimal("12.50"),
            "{1,2,3}",
            None,
            1,
        )
        insert = 'INSERT INTO "Odd Table" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)'
        conn.execute(insert, (*row[:6], [1, 2, 3], *row[7:]))
        source = df.sources.postgres(pg_dsn, "Odd Table", slot="odd", poll=0.05)
        reader = await source.open("odd", None, None)
        try:
            snapshot = await reader.read(False)
            assert snapshot is not None
            assert list(snapshot.data) == [row]
            conn.execute(insert, (*row[:6], [1, 2, 3], *row[7:8], 2))
            conn.execute('UPDATE "Odd Table" SET b = false WHERE k = 2')
            conn.execute('DELETE FROM "Odd Table" WHERE k = 2')
            batches = [await reader.read(True) for _ in range(3)]
        finally:
            await reader.aclose()
        second = (*row[:8], 2)
        flipped = (second[0], False, *second[2:])
        assert [(list(b.data), list(b.diffs)) for b in batches if b is not None] == [
            ([second], [1]),
            ([second, flipped], [-1, 1]),
            ([flipped], [-1]),
        ]


def pending_changes(conn: Any, slot: str) -> int:
    """How many change lines the slot still holds (the WAL it keeps the server from
    recycling)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_logical_slot_peek_changes(%s, NULL, NULL)", (slot,)
    ).fetchone()
    return int(row[0])


async def test_a_job_without_a_checkpoint_moves_its_slot_as_it_goes(pg_dsn: str) -> None:
    """A job without ``checkpoint=`` can never resume from its slot (started again, it reads
    the table afresh through a new slot): the slot moves past each transaction once it is
    fed, following for ever or once, so the server keeps no WAL for it."""
    import trio

    rng = random.Random(11)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)
        source = df.sources.postgres(pg_dsn, "orders", slot="no_ckpt", poll=0.05)
        async with df.open(Revenue(), sources={"orders": source}) as job:
            assert await job.follow(once=True) == 1
            for _ in range(3):
                random_transaction(conn, rng, next_id)
            assert pending_changes(conn, "no_ckpt") > 0
            assert await job.follow(once=True) == 3
            assert pending_changes(conn, "no_ckpt") == 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(job.follow)
                for _ in range(3):
                    before = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
                    random_transaction(conn, rng, next_id)
                # Following for ever, the slot moves while the job runs (the reader holds
                # the slot: its position is read, not peeked).
                with trio.fail_after(30):
                    while lsn_value(slot_position(conn, "no_ckpt")) <= lsn_value(before):  # noqa: ASYNC110
                        await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
            assert pending_changes(conn, "no_ckpt") == 0
            got = Counter({k: n for k, n in job.output.at(job.time - 1).items() if n})
        assert got == Counter(tuple(r) for r in conn.execute(VIEW).fetchall())
