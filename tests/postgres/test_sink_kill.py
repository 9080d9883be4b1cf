"""The PostgreSQL sink is exactly once: a job following a source into a changelog table,
killed with SIGKILL at random moments (twice per trial) and restarted on its checkpoint until
it finishes, leaves the table holding every time's updates once, no time twice and none
missing, equal to a from-scratch recompute.

The child checkpoints every third batch, so the sink is usually ahead of the checkpoint when
killed: the resumed job recomputes times the table already holds, and must not write them.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

TRIALS = 4
KILLS = 2  # per trial, then it runs to the end (a child starts slowly on a loaded machine)
BATCHES = 14

CHILD = """
import sys, trio
import deltaflow as df
sys.path.insert(0, {tests!r})
from shop import Revenue

BATCHES = {batches!r}

async def main():
    sink = df.sinks.postgres({dsn!r}, {table!r}, mode="changelog")
    source = df.sources.iterable(BATCHES, updates=True)
    async with df.open(Revenue(), workers=2, checkpoint={location!r},
                       sources={{"orders": source}}, sinks={{"output": sink}}) as job:
        print("started", job.time, flush=True)
        await job.follow(checkpoint_every=3)
    print("done", flush=True)

trio.run(main)
"""


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


def run_until_done(script: Path, rng: random.Random) -> int:
    """Start the child, kill it at a random moment once it runs, again until it finishes;
    returns how many times it was killed."""
    kills = 0
    for attempt in range(KILLS + 1):
        child = subprocess.Popen(
            [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert child.stdout is not None
        child.stdout.readline()  # "started": the job runs (or the child failed)
        if attempt < KILLS:
            time.sleep(rng.uniform(0.0, 0.3))
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.communicate()
                kills += 1
                continue
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err.decode()
        assert b"done" in out
        return kills
    raise AssertionError("the child never finished")


def test_killed_job_writes_each_time_once(pg_dsn: str, tmp_path: Path) -> None:
    rng = random.Random(47)
    tests = str(Path(__file__).parent)
    killed = 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for trial in range(TRIALS):
            data = batches(rng)
            table = f"log{trial}"
            conn.execute(f"CREATE TABLE {table} (region text, total bigint, time bigint, diff int)")
            script = tmp_path / f"child{trial}.py"
            location = str(tmp_path / f"ckpt{trial}")
            script.write_text(
                CHILD.format(tests=tests, batches=data, dsn=pg_dsn, table=table, location=location)
            )
            killed += run_until_done(script, rng)
            rows = conn.execute(f"SELECT region, total, time, diff FROM {table}").fetchall()
            assert Counter(tuple(r) for r in rows) == expected(data), f"trial {trial}"
    assert killed > 0, "no trial was killed: the test checked nothing of resuming"


CDC_CHILD = """
import sys, trio
import deltaflow as df
sys.path.insert(0, {tests!r})
from shop import Revenue

async def main():
    source = df.sources.postgres({dsn!r}, "orders", slot={slot!r}, poll=0.05)
    sink = df.sinks.postgres({dsn!r}, {table!r}, mode="changelog")
    async with df.open(Revenue(), checkpoint={location!r},
                       sources={{"orders": source}}, sinks={{"output": sink}}) as job:
        print("started", job.time, flush=True)
        await job.follow(once=sys.argv[1] == "once", checkpoint_every=2)
    print("done", flush=True)

trio.run(main)
"""


def test_killed_cdc_job_keeps_the_table_equal_to_sql(pg_dsn: str, tmp_path: Path) -> None:
    """Orders changing while a job following them is killed and restarted: the changelog
    table, replayed time by time, is always a collection (no row twice: no time written
    twice), and ends equal to the view SQL computes."""
    from tests.postgres.test_source import VIEW, make_orders, random_transaction

    rng = random.Random(4747)
    tests = str(Path(__file__).parent)
    kills = 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        next_id = make_orders(conn, rng)
        for trial in range(2):
            table = f"cdc{trial}"
            conn.execute(f"CREATE TABLE {table} (region text, total bigint, time bigint, diff int)")
            script = tmp_path / f"cdc{trial}.py"
            script.write_text(
                CDC_CHILD.format(
                    tests=tests,
                    dsn=pg_dsn,
                    slot=f"cdc{trial}",
                    table=table,
                    location=str(tmp_path / f"cdc-ckpt{trial}"),
                )
            )
            for _ in range(KILLS):
                child = subprocess.Popen(
                    [sys.executable, str(script), "follow"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                assert child.stdout is not None
                child.stdout.readline()
                for _ in range(4):
                    random_transaction(conn, rng, next_id)
                    time.sleep(rng.uniform(0.0, 0.1))
                time.sleep(rng.uniform(0.0, 0.3))
                assert child.poll() is None, child.communicate()[1].decode()
                child.send_signal(signal.SIGKILL)
                child.communicate()
                kills += 1
            random_transaction(conn, rng, next_id)
            done = subprocess.run(
                [sys.executable, str(script), "once"], capture_output=True, timeout=120
            )
            assert done.returncode == 0, done.stderr.decode()
            rows = conn.execute(
                f"SELECT region, total, time, diff FROM {table} ORDER BY time"
            ).fetchall()
            state: Counter[tuple[Any, ...]] = Counter()
            for region, total, _, diff in rows:
                state[(region, total)] += diff
                assert state[(region, total)] in (0, 1), f"trial {trial}: {rows}"
            final = Counter({k: n for k, n in state.items() if n})
            assert final == Counter(tuple(r) for r in conn.execute(VIEW).fetchall())
    assert kills > 0
