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

TRIALS = 3
KILLS = 2  # per trial, then it runs to the end (a child starts slowly on a loaded machine)
BATCHES = 14

CHILD = """
import sys, trio
import deltaflow as df
sys.path.insert(0, {tests!r})
from test_sink import Revenue

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
