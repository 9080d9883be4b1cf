"""The PostgreSQL sink is exactly once: a job following a source into a changelog table,
killed with SIGKILL at random moments (twice per trial) and restarted on its checkpoint until
it finishes, leaves the table holding every time's updates once, no time twice and none
missing, equal to a from-scratch recompute. Twenty kills in all: twelve of a job following
batches, eight of one following a table's changes while they are committed.

The job checkpoints every few batches, so the sink is usually ahead of the checkpoint when
killed: the resumed job recomputes times the table already holds, and must not write them.
Each job runs in a process forked from one that imported deltaflow once
(:mod:`tests.postgres.killing`): a kill costs a fork, not an interpreter's start.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.postgres.killing import follow_batches, follow_table, run_killed

psycopg = pytest.importorskip("psycopg")

TRIALS = 6  # of a job following batches: 12 kills landed
CDC_TRIALS = 4  # of a job following a table's changes: 8 kills
KILLS = 2  # per trial, then it runs to the end
BATCHES = 14


def batches(rng: random.Random) -> list[list[tuple[tuple[int, str, int], int]]]:
    """Batches of orders ``(id, region, amount)`` inserted and retracted."""
    live: list[tuple[int, str, int]] = []
    out = []
    for i in range(BATCHES):
        batch = []
        for j in range(rng.randrange(1, 6)):
            if live and rng.random() < 0.35:
                batch.append((live.pop(rng.randrange(len(live))), -1))
            else:
                row = (i * 10 + j, rng.choice("NSEW"), rng.randrange(1, 50))
                live.append(row)
                batch.append((row, 1))
        out.append(batch)
    return out


def expected(data: list[list[tuple[tuple[int, str, int], int]]]) -> Counter[tuple[Any, ...]]:
    """``(region, total, time, diff)`` of every time's change, from scratch."""
    out: Counter[tuple[Any, ...]] = Counter()
    rows: Counter[tuple[int, str, int]] = Counter()
    before: dict[str, int] = {}
    for t, batch in enumerate(data):
        for row, diff in batch:
            rows[row] += diff
        view: dict[str, int] = {}
        for (_, region, amount), n in rows.items():
            if n:
                view[region] = view.get(region, 0) + amount * n
        for region in set(before) | set(view):
            if before.get(region) != view.get(region):
                if region in before:
                    out[(region, before[region], t, -1)] += 1
                if region in view:
                    out[(region, view[region], t, 1)] += 1
        before = view
    return out


def test_killed_job_writes_each_time_once(pg_dsn: str, tmp_path: Path) -> None:
    rng = random.Random(47)
    kills = 0
    trial = 0
    pause = 0.3
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # A kill lands only if the job has not finished first: trials go on (fresh data each)
        # until TRIALS * KILLS kills have landed, within a bound.
        while kills < TRIALS * KILLS and trial < 4 * TRIALS:
            data = batches(rng)
            table = f"log{trial}"
            conn.execute(f"CREATE TABLE {table} (region text, total bigint, time bigint, diff int)")
            args = (pg_dsn, table, str(tmp_path / f"ckpt{trial}"), data)
            for _ in range(KILLS):
                landed = run_killed(follow_batches, args, rng, kill=True, pause=pause)
                kills += landed
                # A job that beat its kill is faster than the pause: aim earlier, as far as
                # this machine's speed asks.
                pause = min(0.3, pause * 1.25) if landed else max(0.002, pause / 2)
            run_killed(follow_batches, args, rng, kill=False)
            rows = conn.execute(f"SELECT region, total, time, diff FROM {table}").fetchall()
            assert Counter(tuple(r) for r in rows) == expected(data), f"trial {trial}"
            trial += 1
    assert kills >= TRIALS * KILLS, f"only {kills} kills landed in {trial} trials"


def test_killed_cdc_job_keeps_the_table_equal_to_sql(pg_dsn: str, tmp_path: Path) -> None:
    """Orders changing while a job following them is killed and restarted: the changelog
    table, replayed time by time, is always a collection (no row twice: no time written
    twice), and ends equal to the view SQL computes."""
    from tests.postgres.shop import VIEW, make_orders, random_transaction

    rng = random.Random(4747)
    kills = 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)

        def write() -> None:
            for _ in range(3):
                random_transaction(conn, rng, next_id)
                time.sleep(rng.uniform(0.0, 0.05))

        for trial in range(CDC_TRIALS):
            table = f"cdc{trial}"
            conn.execute(f"CREATE TABLE {table} (region text, total bigint, time bigint, diff int)")
            location = str(tmp_path / f"cdc-ckpt{trial}")
            for _ in range(KILLS):
                args = (pg_dsn, f"cdc{trial}", table, location, False)
                kills += run_killed(follow_table, args, rng, kill=True, during=write)
            random_transaction(conn, rng, next_id)
            run_killed(
                follow_table, (pg_dsn, f"cdc{trial}", table, location, True), rng, kill=False
            )
            rows = conn.execute(
                f"SELECT region, total, time, diff FROM {table} ORDER BY time"
            ).fetchall()
            state: Counter[tuple[Any, ...]] = Counter()
            for region, total, _, diff in rows:
                state[(region, total)] += diff
                assert state[(region, total)] in (0, 1), f"trial {trial}: {rows}"
            final = Counter({k: n for k, n in state.items() if n})
            assert final == Counter(tuple(r) for r in conn.execute(VIEW).fetchall())
    assert kills == CDC_TRIALS * KILLS  # following for ever, it never finishes first
