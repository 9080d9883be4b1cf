"""A process killed with SIGKILL at any moment leaves a usable checkpoint with the right state.

A child process runs BFS over a graph that changes at every time, checkpointing after every
time it advances past (so most of its life is spent writing checkpoints), resuming each time
from whatever the previous child left. The test kills it at a random moment, again and
again; after every kill the location must open (never an unreadable checkpoint), stand at
some time ``T``, and hold at ``T - 1`` exactly the BFS distances of the graph fed before
``T``, recomputed from scratch; and the children together must make progress.
"""

from __future__ import annotations

import functools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

import deltaflow as df
from deltaflow.graphs import Bfs, bfs_distances

NODES = 400
INITIAL = 1_200
TRIALS = 20

CHILD = """
import sys, trio
import deltaflow as df
from deltaflow.graphs import Bfs
sys.path.insert(0, {tests!r})
from test_checkpoint_kill import edges_at

async def main():
    async with df.open(Bfs(), workers={workers}, checkpoint={location!r}) as job:
        start = job.time
        print("started", start, flush=True)
        job.inputs["roots"].insert(0) if start == 0 else None
        for t in range(start, start + 1_000_000):
            for edge, diff in edges_at(t):
                job.inputs["edges"].update(edge, diff)
            await job.advance_to(t + 1)
            await job.checkpoint()

trio.run(main)
"""


@functools.cache
def edges_at(time: int) -> list[tuple[tuple[int, int], int]]:
    """What the source feeds at ``time``: a graph at 0, then one new edge in and one of the
    first graph's out (each once; the first graph is gone after ``INITIAL`` times)."""
    rng = random.Random(time)
    new = ((rng.randrange(NODES), rng.randrange(NODES)), 1)
    if time == 0:
        return [((rng.randrange(NODES), rng.randrange(NODES)), 1) for _ in range(INITIAL)]
    if time >= INITIAL:
        return [new]
    return [new, (edges_at(0)[time][0], -1)]


def expected_at(time: int) -> dict[Any, int]:
    """The BFS output collection after every time up to ``time``."""
    live: dict[tuple[int, int], int] = {}
    for t in range(time + 1):
        for edge, diff in edges_at(t):
            live[edge] = live.get(edge, 0) + diff
    distances = bfs_distances([0], [e for e, n in live.items() if n > 0])
    return dict.fromkeys(distances.items(), 1)


class Verified(Exception):
    """Leaves the verifying job without writing a checkpoint."""


async def resumed_state(location: Path) -> tuple[int | None, dict[Any, int] | None]:
    """The time the location resumes at, and the output there (``None``s: empty)."""
    with pytest.raises(Verified):
        async with df.open(Bfs(), checkpoint=location) as job:
            at = job.resumed_at
            state = None if at is None else job.output.at(at - 1)
            raise Verified
    return at, state


def test_kill_9_at_random_moments_leaves_a_usable_checkpoint(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Kill the checkpointing child at random moments, over and over."""
    if request.config.getoption("--schedule"):
        pytest.skip("real processes: a randomized in-process schedule changes nothing here")
    location = tmp_path / "state"
    tests = str(Path(__file__).parent)
    rng = random.Random(2718)
    seen: list[int] = []
    for trial in range(TRIALS):
        code = CHILD.format(tests=tests, location=str(location), workers=1 + trial % 2)
        with subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as child:
            try:
                assert child.stdout is not None and child.stderr is not None
                line = child.stdout.readline().decode()
                assert line.startswith("started"), (line, child.stderr.read().decode())
                time.sleep(rng.uniform(0.0, 0.45))
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait()
        at, state = trio.run(resumed_state, location)
        if at is None:
            assert not seen, f"trial {trial}: the checkpoint at {seen[-1]} is gone"
            continue
        assert state == expected_at(at - 1), f"trial {trial}: wrong state at {at}"
        assert not seen or at >= seen[-1], (trial, seen, at)
        seen.append(at)
    assert len(seen) > TRIALS // 2 and seen[-1] > seen[0], seen  # the children got somewhere
