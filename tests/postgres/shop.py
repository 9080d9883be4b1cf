"""The orders schema the PostgreSQL tests share: the revenue pipeline, the view it must equal,
and random transactions against the tables. A module of its own so that the tests, and the
child processes they kill, import it by name."""

from __future__ import annotations

import random
from typing import Any

import deltaflow as df

REGIONS = ["north", "south", "east", "west"]


class Revenue(df.Pipeline):
    """Revenue per region from ``(order, region, amount)`` rows."""

    def build(self, orders: df.Collection) -> df.Collection:
        return orders.map(lambda o: (o[1], o[2])).sum()


VIEW = "SELECT region, sum(amount)::bigint FROM orders GROUP BY region"


def random_transaction(conn: Any, rng: random.Random, next_id: list[int]) -> None:
    """A few inserts, updates and deletes in one transaction."""
    with conn.transaction():
        for _ in range(rng.randrange(1, 5)):
            ids = [r[0] for r in conn.execute("SELECT id FROM orders").fetchall()]
            roll = rng.random()
            if ids and roll < 0.25:
                conn.execute("DELETE FROM orders WHERE id = %s", (rng.choice(ids),))
            elif ids and roll < 0.55:
                conn.execute(
                    "UPDATE orders SET amount = %s, region = %s WHERE id = %s",
                    (rng.randrange(1, 90), rng.choice("NSEW"), rng.choice(ids)),
                )
            else:
                next_id[0] += 1
                conn.execute(
                    "INSERT INTO orders VALUES (%s, %s, %s, %s)",
                    (next_id[0], rng.choice("NSEW"), rng.randrange(1, 90), None),
                )


def make_orders_and_customers(conn: Any) -> None:
    """Empty tables ``orders (id, customer, amount)`` and ``customers (id, region)``, whose
    changes carry their whole old rows (``REPLICA IDENTITY FULL``)."""
    conn.execute("CREATE TABLE orders (id int PRIMARY KEY, customer int, amount int)")
    conn.execute("CREATE TABLE customers (id int PRIMARY KEY, region text)")
    for table in ("orders", "customers"):
        conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")


def make_orders(conn: Any, rng: random.Random) -> list[int]:
    conn.execute("CREATE TABLE orders (id int PRIMARY KEY, region text, amount int, note text)")
    conn.execute("ALTER TABLE orders REPLICA IDENTITY FULL")
    conn.execute("CREATE TABLE other (x int)")
    for i in range(10):
        conn.execute(
            "INSERT INTO orders VALUES (%s, %s, %s, %s)",
            (i, rng.choice("NSEW"), rng.randrange(1, 90), "it's" if i % 2 else None),
        )
    return [10]
