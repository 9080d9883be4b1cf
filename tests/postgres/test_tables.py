"""Several tables of one database as several inputs, through one slot, with consistent times:
random transactions across orders and customers (inserts, updates, deletes, many touching
both tables), each one time in both inputs; the join + aggregate output at every time equal
to the view SQL computes in the same database right after that transaction; the same across
a checkpoint and a resume (the job before it stopped by an error, not at a checkpoint)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import cli
from tests.postgres.shop import make_orders_and_customers

import deltaflow as df
from deltaflow.adapters.postgres.connect import DatabaseError

psycopg = pytest.importorskip("psycopg")


class RegionRevenue(df.Pipeline):
    """Revenue and orders per region: orders ``(id, customer, amount)`` joined with
    customers ``(id, region)``."""

    def build(self, orders: df.Collection, customers: df.Collection) -> df.Collection:
        by_customer = orders.map(lambda o: (o[1], o[2]))
        region = customers.map(lambda c: (c[0], c[1]))
        joined = by_customer.join(region).map(lambda kv: (kv[1][1], kv[1][0]))
        totals = joined.sum()
        counts = joined.map(lambda ra: ra[0]).map(lambda r: (r, None)).count()
        return totals.join(counts).map(lambda kv: (kv[0], kv[1][0], kv[1][1]))


VIEW = (
    "SELECT c.region, sum(o.amount)::bigint, count(*)::bigint FROM orders o "
    "JOIN customers c ON o.customer = c.id GROUP BY c.region"
)


class Shop:
    """The two tables (and one the job does not read), and a writer of random transactions
    that remembers the view after each."""

    def __init__(self, conn: Any, rng: random.Random) -> None:
        self.conn = conn
        self.rng = rng
        self.next_order = 0
        self.next_customer = 0
        make_orders_and_customers(conn)
        conn.execute("CREATE TABLE other (x int)")
        for _ in range(5):
            self.add_customer()
        for _ in range(8):
            self.add_order()

    def view(self) -> Counter[tuple[Any, ...]]:
        return Counter(tuple(r) for r in self.conn.execute(VIEW).fetchall())

    def ids(self, table: str) -> list[int]:
        return [r[0] for r in self.conn.execute(f"SELECT id FROM {table}").fetchall()]

    def add_customer(self) -> None:
        self.conn.execute(
            "INSERT INTO customers VALUES (%s, %s)", (self.next_customer, self.rng.choice("NSEW"))
        )
        self.next_customer += 1

    def add_order(self) -> None:
        # Now and then a customer that does not exist (yet, or any more): no region.
        customer = self.rng.randrange(self.next_customer + 1)
        self.conn.execute(
            "INSERT INTO orders VALUES (%s, %s, %s)",
            (self.next_order, customer, self.rng.randrange(1, 60)),
        )
        self.next_order += 1

    def change(self) -> None:
        """One change that surely touches a table read (a row there to update or delete)."""
        rng, conn = self.rng, self.conn
        orders, customers = self.ids("orders"), self.ids("customers")
        roll = rng.random()
        if roll < 0.25 or not orders:
            self.add_order()
        elif roll < 0.4:
            conn.execute(
                "UPDATE orders SET amount = %s, customer = %s WHERE id = %s",
                (rng.randrange(1, 60), rng.randrange(self.next_customer), rng.choice(orders)),
            )
        elif roll < 0.55:
            conn.execute("DELETE FROM orders WHERE id = %s", (rng.choice(orders),))
        elif roll < 0.75 and customers:
            conn.execute(
                "UPDATE customers SET region = %s WHERE id = %s",
                (rng.choice("NSEW"), rng.choice(customers)),
            )
        elif roll < 0.85 and len(customers) > 2:
            conn.execute("DELETE FROM customers WHERE id = %s", (rng.choice(customers),))
        else:
            self.add_customer()

    def transaction(self) -> None:
        """A transaction of one to four changes, most of them across both tables; now and
        then one the job does not see (only the other table), which is no time."""
        if self.rng.random() < 0.1:
            self.conn.execute("INSERT INTO other VALUES (1)")
            return
        with self.conn.transaction():
            for _ in range(self.rng.randrange(1, 5)):
                self.change()
            if self.rng.random() < 0.3:
                self.conn.execute("INSERT INTO other VALUES (2)")
        self.views.append(self.view())

    views: list[Counter[tuple[Any, ...]]]


def at(job: df.Job, time: int) -> Counter[tuple[Any, ...]]:
    return Counter({k: n for k, n in job.output.at(time).items() if n})


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize(("workers", "processes"), [(1, 1), (2, 1), (2, 2)])
async def test_one_transaction_is_one_time_in_both_inputs(
    pg_dsn: str, tmp_path: Path, seed: int, workers: int, processes: int
) -> None:
    rng = random.Random(seed)
    location = str(tmp_path / "ckpt")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        shop = Shop(conn, rng)
        source = df.sources.postgres(pg_dsn, ["orders", "customers"], slot="shop", poll=0.05)
        sources = {"orders": source, "customers": source}

        def opened() -> Any:
            return df.open(
                RegionRevenue(),
                workers=workers,
                processes=processes,
                checkpoint=location,
                sources=sources,
            )

        with pytest.raises(RuntimeError, match="stopped"):
            async with opened() as job:
                assert await job.follow(once=True) == 1  # both snapshots: one time
                shop.views = [shop.view()]
                for _ in range(10):
                    shop.transaction()
                fed = await job.follow(once=True, checkpoint_every=4)
                assert fed == len(shop.views) - 1
                assert fed >= 4
                for t, view in enumerate(shop.views):
                    assert at(job, t) == view, f"time {t}"
                # The snapshot, then a checkpoint after every fourth batch.
                checkpointed = 1 + fed // 4 * 4
                # Stopped by an error: no checkpoint at the end; the next job resumes at the
                # last one taken, and reads the transactions after it again.
                raise RuntimeError("stopped")
        for _ in range(8):
            shop.transaction()
        async with opened() as job:
            assert job.resumed_at == checkpointed
            # The offset was saved once, for both inputs.
            assert list(job._sources.offsets) == ["customers+orders"]
            fed = await job.follow(once=True)
            assert fed == len(shop.views) - checkpointed
            for t in range(checkpointed - 1, len(shop.views)):
                assert at(job, t) == shop.views[t], f"time {t}"


async def test_a_source_of_several_tables_refuses_what_it_cannot_read(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int, customer int, amount int)")
        conn.execute("ALTER TABLE orders REPLICA IDENTITY FULL")
        conn.execute("CREATE TABLE customers (id int, region text)")
        source = df.sources.postgres(
            pg_dsn, {"orders": "orders", "customers": "customers"}, slot="refuse"
        )
        with pytest.raises(DatabaseError, match=r"input 'customers' \(table 'customers'\).*FULL"):
            await source.open_inputs({"orders": None, "customers": None}, None)
        with pytest.raises(ValueError, match="none for 'clicks'"):
            await source.open_inputs({"orders": None, "clicks": None}, None)
    with pytest.raises(ValueError, match="distinct inputs"):
        df.sources.postgres(pg_dsn, ["orders", "shop.orders"], slot="x")
    with pytest.raises(ValueError, match="schema= declares one table"):
        df.sources.postgres(pg_dsn, ["orders", "customers"], slot="x", schema="id INT")


def test_cli_reads_the_tables_of_one_database_in_one_snapshot(
    pg_dsn: str, postgres_server: Any, tmp_path: Path
) -> None:
    """``--input orders=postgresql://.../db/orders --input customers=...``: one slot and one
    snapshot for both (every row at time 0), the join equal to SQL's, no slot left."""
    import json

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        shop = Shop(conn, random.Random(5))
        want = shop.view()
        dbname = conn.info.dbname
        module = tmp_path / "shop.py"
        module.write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from test_tables import RegionRevenue\n"
        )
        url = f"postgresql://df@/{dbname}/{{}}?host={postgres_server.root}"
        # Run from the repository, whose tests the module's import of test_tables imports.
        done = cli(
            Path(__file__).resolve().parents[2],
            "run",
            f"{module}:RegionRevenue",
            "--input",
            f"orders={url.format('orders')}",
            "--input",
            f"customers={url.format('customers')}",
        )
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in done.stdout.splitlines()]
        assert {r["time"] for r in records} == {0}
        got = Counter({tuple(r["data"]): r["diff"] for r in records})
        assert got == want
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
        assert not [s for (s,) in slots if s.startswith("deltaflow_cli")]


@pytest.mark.parametrize("saved", ["apart", "together"])
async def test_tables_regrouped_since_the_checkpoint_are_refused(
    pg_dsn: str, tmp_path: Path, saved: str
) -> None:
    """A job checkpointed with a source per table (offsets under ``"orders"`` and
    ``"customers"``) and resumed with one source for both (its offset under
    ``"customers+orders"``), or the other way round: refused when it opens, naming the keys,
    before any slot is read; resumed with the sources as they were, it goes on and its
    output equals the view SQL computes."""
    location = str(tmp_path / "ckpt")

    def apart() -> dict[str, Any]:
        return {
            "orders": df.sources.postgres(pg_dsn, "orders", slot="orders_only"),
            "customers": df.sources.postgres(pg_dsn, "customers", slot="customers_only"),
        }

    def together() -> dict[str, Any]:
        both = df.sources.postgres(pg_dsn, ["orders", "customers"], slot="both")
        return {"orders": both, "customers": both}

    before, after = (apart, together) if saved == "apart" else (together, apart)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        shop = Shop(conn, random.Random(3))
        shop.views = []
        async with df.open(RegionRevenue(), checkpoint=location, sources=before()) as job:
            await job.follow(once=True)
        for _ in range(4):
            shop.transaction()
        with pytest.raises(ValueError, match=r"grouped otherwise.*fresh=True") as info:
            async with df.open(RegionRevenue(), checkpoint=location, sources=after()) as job:
                await job.follow(once=True)
        assert "'customers+orders'" in str(info.value)
        assert pg_dsn not in str(info.value)
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots ORDER BY 1").fetchall()
        assert [s for (s,) in slots] == (
            ["customers_only", "orders_only"] if saved == "apart" else ["both"]
        )
        async with df.open(RegionRevenue(), checkpoint=location, sources=before()) as job:
            assert job.resumed_at is not None and job.resumed_at > 0
            await job.follow(once=True)
            assert at(job, job.time - 1) == shop.view()
