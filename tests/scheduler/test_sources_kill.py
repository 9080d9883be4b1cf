"""A job following a files source, killed with SIGKILL at random moments and restarted on its
checkpoint, ends with the output of an uninterrupted run: no file lost, none fed twice.

Each trial writes a few small CSV files (with retractions), then starts a child that follows
them (``follow(once=True)``, one file per time, a checkpoint after every batch), kills it at
a random moment, and starts it again until one finishes. After every kill the location must
resume at some time ``T`` holding, at ``T - 1``, exactly the output of the first ``T`` files
recomputed from scratch, with the offset naming exactly those files; the child that finishes
must print the uninterrupted run's final output.
"""

from __future__ import annotations

import importlib
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

import deltaflow as df

TRIALS = 20
FILES = 8
ROWS = 40

CHILD = """
import json, sys, trio
import deltaflow as df
sys.path.insert(0, {tests!r})
from test_sources_kill import Visitors

async def main():
    source = df.sources.files({folder!r}, max_files=1)
    async with df.open(Visitors(), workers={workers}, checkpoint={location!r},
                       sources={{"clicks": source}}) as job:
        print("started", job.time, flush=True)
        await job.follow(once=True, checkpoint_every=1)
        final = sorted(job.output.at(job.time - 1).items())
    print("done", json.dumps(final), flush=True)

trio.run(main)
"""


class Visitors(df.Pipeline):
    """How many distinct users visited each page."""

    def build(self, clicks: df.Collection) -> df.Collection:
        return clicks.map(lambda c: (c[1], c[0])).distinct().count()


def make_files(folder: Path, rng: random.Random) -> list[list[tuple[str, str, int]]]:
    """``FILES`` CSV files of clicks, some retracting earlier ones; returns their rows."""
    folder.mkdir()
    out: list[list[tuple[str, str, int]]] = []
    live: list[tuple[str, str]] = []
    for i in range(FILES):
        rows = []
        for _ in range(ROWS):
            if live and rng.random() < 0.3:
                u, p = live.pop(rng.randrange(len(live)))
                rows.append((u, p, -1))
            else:
                u, p = f"u{rng.randrange(12)}", f"p{rng.randrange(5)}"
                live.append((u, p))
                rows.append((u, p, 1))
        body = "".join(f"{u},{p},{r}\n" for u, p, r in rows)
        (folder / f"part-{i:04d}.csv").write_text("user,page,diff\n" + body)
        out.append(rows)
    return out


def expected_after(files: list[list[tuple[str, str, int]]], n: int) -> dict[Any, int]:
    """The output collection once the first ``n`` files are fed, recomputed from scratch."""
    clicks: Counter[Any] = Counter()
    for rows in files[:n]:
        for u, p, r in rows:
            clicks[(u, p)] += r
    pages: Counter[Any] = Counter(p for (_, p), c in clicks.items() if c > 0)
    return dict.fromkeys(pages.items(), 1)


class Verified(Exception):
    """Leaves the verifying job without writing a checkpoint."""


def as_the_child_imports_it() -> type[df.Pipeline]:
    """``Visitors`` from this module imported as the child does (a checkpoint names its
    operators' code, module included)."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        module = importlib.import_module("test_sources_kill")
    finally:
        sys.path.pop(0)
    pipeline: type[df.Pipeline] = module.Visitors
    return pipeline


async def resumed_state(location: Path, folder: Path) -> tuple[int | None, Any, Any]:
    """The time the location resumes at, the output there and the source's offset."""
    Visitors = as_the_child_imports_it()
    with pytest.raises(Verified):
        source = df.sources.files(folder, max_files=1)
        async with df.open(Visitors(), checkpoint=location, sources={"clicks": source}) as job:
            at = job.resumed_at
            state = None if at is None else job.output.at(at - 1)
            offset = job._sources.offsets_at("clicks")
            raise Verified
    return at, state, offset


def latest_sequence(location: Path) -> int:
    """The sequence number of the newest checkpoint manifest at ``location`` (0: none)."""
    names = [p.name for p in location.glob("checkpoint-*.json")]
    return max((int(n[len("checkpoint-") : -len(".json")]) for n in names), default=0)


def run_child(code: str, location: Path, kill_at: tuple[int, float] | None) -> str | None:
    """Run the child; with ``kill_at = (k, delay)``, kill it ``delay`` seconds after it has
    committed ``k`` more checkpoints than it found (so that kills land all along its run,
    whatever the machine's speed), or once it has ended by itself; ``None``: let it finish.
    Returns its ``done`` line, if it printed one."""
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        try:
            line = child.stdout.readline().decode()
            assert line.startswith("started"), (line, child.stderr.read().decode())
            if kill_at is None:
                out, err = child.communicate(timeout=120)
                assert child.returncode == 0, err.decode()
                return out.decode()
            k, delay = kill_at
            target = latest_sequence(location) + k
            deadline = time.monotonic() + 60
            while child.poll() is None and latest_sequence(location) < target:
                assert time.monotonic() < deadline, "the child made no checkpoint in 60 s"
                time.sleep(0.002)
            time.sleep(delay)
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGKILL)
                child.wait()
        rest = child.stdout.read().decode()
        done = [x for x in rest.splitlines() if x.startswith("done")]
        return done[0] if done else None


def test_a_files_source_killed_with_9_resumes_exactly_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Twenty trials, each killed at random moments until a child finishes."""
    if request.config.getoption("--schedule"):
        pytest.skip("real processes: a randomized in-process schedule changes nothing here")
    tests = str(Path(__file__).parent)
    rng = random.Random(4545)
    kills = resumed = 0
    for trial in range(TRIALS):
        folder, location = tmp_path / f"in{trial}", tmp_path / f"state{trial}"
        files = make_files(folder, rng)
        code = CHILD.format(
            tests=tests, folder=str(folder), location=str(location), workers=1 + trial % 2
        )
        done = None
        last = 0
        for attempt in range(3):
            kill_at = (rng.randrange(FILES // 2), rng.uniform(0.0, 0.02))
            done = run_child(code, location, None if attempt == 2 else kill_at)
            if done is not None:
                break
            kills += 1
            at, state, offset = trio.run(resumed_state, location, folder)
            if at is None:
                assert last == 0, f"trial {trial}: the checkpoint at {last} is gone"
                continue
            resumed += 1
            assert at >= last, (trial, last, at)
            assert state == expected_after(files, at), f"trial {trial}: wrong state at {at}"
            assert [Path(p).name for p in offset] == [f"part-{i:04d}.csv" for i in range(at)]
            last = at
        assert done is not None, f"trial {trial}: no child finished"
        final = json.loads(done.split(" ", 1)[1])
        got = {tuple(tuple(x) if isinstance(x, list) else x for x in d): n for d, n in final}
        assert got == expected_after(files, FILES), f"trial {trial}"
        uninterrupted = df.run(Visitors(), clicks=df.sources.files(folder, max_files=1))
        acc: Counter[Any] = Counter()
        for d, _, r in uninterrupted:
            acc[d] += r
        assert got == {d: n for d, n in acc.items() if n}
    assert kills >= TRIALS // 2 and resumed > 0, (kills, resumed)
