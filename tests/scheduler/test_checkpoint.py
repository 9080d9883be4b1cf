"""Durable state: a job that crashes after a checkpoint resumes exactly where it stopped.

Each oracle test runs a pipeline over a churning graph (edges and roots inserted and retracted
at every time) in a job that checkpoints at random times and then *crashes* (its ``async
with`` left by an exception, which writes no checkpoint) at a random later time, with a random
number of workers; then a second job, with another random number of workers (or processes),
opens the same location, must stand at the last checkpoint's time ``T``, and is fed what the
first had been fed at times ``>= T`` (some of it again). Its outputs must equal the
from-scratch recompute at every time from ``T - 1`` on, and ``subscribe`` (``capture``) must
see times ``>= T`` only. The shapes cover loops with reductions (the shared ones of
:mod:`tests.loops`), shared arrangements, a delta query, consolidation, and
temporal filters (whose retractions, at later times, are held in the state when it is taken).
"""

from __future__ import annotations

import json
import random
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.jobs import pipeline_of
from tests.loops import SHAPES, Multiset, churning_graphs, join_map
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.framework.durable.manifest import seal
from deltaflow.framework.durable.store import VERSION, CheckpointStore
from deltaflow.operators import reduce as R
from deltaflow.scheduler import checkpoint as checkpoint_module
from deltaflow.scheduler.net.processes import ProcessPool
from deltaflow.testing import accumulate

Update = tuple[Any, int, int]
Inputs = dict[str, list[Update]]


class Crash(Exception):
    """Leaves a job's block the way a crash would: no checkpoint is written."""


# -- more shapes: flat ones over the same graphs ------------------------------------------------
def out_degrees(roots: df.Collection, edges: df.Collection) -> df.Collection:
    return edges.count()


def q_out_degrees(c: dict[str, Multiset]) -> Multiset:
    counts: Counter[Any] = Counter()
    for (a, _), n in c["edges"].items():
        counts[a] += n
    return Counter({(a, n): 1 for a, n in counts.items() if n})


def two_hops(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """One arrangement of the edges read by two joins (a trace kept, shared)."""
    arranged = edges.arrange_by_key()
    back = edges.map(lambda e: (e[1], e[0]))
    forward = back.join_map(arranged, lambda b, a, c: (a, c))
    rooted = roots.map(lambda r: (r, ())).join_map(arranged, lambda r, _u, b: (r, b))
    return forward.concat(rooted).consolidate()


def q_two_hops(c: dict[str, Multiset]) -> Multiset:
    edges = c["edges"]
    back = Counter({(b, a): n for (a, b), n in edges.items()})
    rooted = Counter({(r, ()): n for r, n in c["roots"].items()})
    return join_map(back, edges, lambda b, a, c: (a, c)) + join_map(
        rooted, edges, lambda r, _u, b: (r, b)
    )


def triangles(roots: df.Collection, edges: df.Collection) -> df.Collection:
    return df.multiway_join(("a", "b", "c"), (edges, ("a", "b")), (edges, ("b", "c")),
                            (edges, ("a", "c")))  # fmt: skip


def q_triangles(c: dict[str, Multiset]) -> Multiset:
    edges = c["edges"]
    out: Multiset = Counter()
    for (a, b), n in edges.items():
        for (b2, c2), m in edges.items():
            if b2 == b and (a, c2) in edges:
                out[(a, b, c2)] += n * m * edges[(a, c2)]
    return Counter({d: n for d, n in out.items() if n})


def windowed(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """Each edge ``(a, b)`` is counted from time ``a % 3`` to ``a % 3 + 3`` (a temporal
    filter: its retractions wait at later times, in the state a checkpoint takes)."""
    return edges.temporal_filter(lambda e: e[0] % 3, lambda e: e[0] % 3 + 3).distinct()


def windowed_inputs(inputs: Inputs) -> Inputs:
    """What :func:`windowed` sees: each edge update moved into its window."""
    out = []
    for (a, b), t, r in inputs["edges"]:
        lo, hi = a % 3, a % 3 + 3
        start = max(t, lo)
        if start < hi:
            out.append(((a, b), start, r))
            out.append(((a, b), hi, -r))
    return {"edges": out}


def q_windowed(c: dict[str, Multiset]) -> Multiset:
    return Counter({e: 1 for e, n in c["edges"].items() if n > 0})


def kept_sums(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """A reduction that keeps its output as a trace too (``reduce_core(arrange_output=True)``):
    its trace is state a checkpoint saves and a resume rebuilds."""

    def total(_key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        return [(sum(v * n for v, n in vals), 1)]

    out, _ = R.reduce_core(edges.arrange_by_key(), total, name="kept_sums", arrange_output=True)
    return out


def q_kept_sums(c: dict[str, Multiset]) -> Multiset:
    sums: Counter[Any] = Counter()
    keys = set()
    for (a, b), n in c["edges"].items():
        if n > 0:
            sums[a] += b * n
            keys.add(a)
    return Counter({(a, sums[a]): 1 for a in keys})


def sessions(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """Session windows with a retention: each session's close waits at a later time, under
    a capability a checkpoint saves (no recompute here: the uninterrupted run is the oracle)."""
    by_src = edges.window(df.session(2), at=lambda e: e[1], key=lambda e: e[0], retention=3)
    return by_src.map(lambda wd: (wd[0], wd[1][0])).count()


def slides(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """Sliding windows with a retention (as :func:`sessions`)."""
    return edges.window(df.sliding(4, 2), at=lambda e: e[1], retention=2).count()


def later_in_a_loop(roots: df.Collection, edges: df.Collection) -> df.Collection:
    """Inside a loop, each edge is also sent on to a later outer time (``a % 5 + 3``): the
    loop's reduction holds messages ahead of its frontier, state a checkpoint takes (no
    recompute: the uninterrupted run is the oracle)."""

    def step(x: df.Collection) -> df.Collection:
        later = x.join_function(lambda e: [(e, df.Product(e[0] % 5 + 3, 0), 1)]).distinct()
        return x.concat(later).map(lambda e: (e[0], e[1] % 4)).distinct()

    return edges.iterate(step)


Shape = tuple[Callable[..., df.Collection], Callable[..., Multiset] | None]
FLAT: dict[str, Shape] = {
    "count": (out_degrees, q_out_degrees),
    "shared-arrangement": (two_hops, q_two_hops),
    "multiway-join": (triangles, q_triangles),
    "temporal-filter": (windowed, q_windowed),
    "kept-output-trace": (kept_sums, q_kept_sums),
    "session-windows": (sessions, None),
    "sliding-windows": (slides, None),
    "later-times-in-a-loop": (later_in_a_loop, None),
}
ALL: dict[str, Shape] = {**SHAPES, **FLAT}


# -- running a job that crashes, and the one that resumes it ------------------------------------
def _times(inputs: Inputs) -> list[int]:
    return sorted({t for ups in inputs.values() for _, t, _ in ups})


def _feed(job: df.Job, inputs: Inputs, time: int) -> None:
    for name, ups in inputs.items():
        for d, t, r in ups:
            if t == time:
                job.inputs[name].update(d, r)


async def crash_after_checkpoints(
    pipe: df.Pipeline,
    location: Path,
    inputs: Inputs,
    checkpoints: list[int],
    crash: int,
    workers: int,
    processes: int = 1,
) -> int | None:
    """Feed time by time, checkpoint after advancing to each of ``checkpoints``, and crash
    once at ``crash`` (with updates of that time fed, and some at the next time given ahead);
    the last checkpoint's time, if any."""
    last = None
    with pytest.raises(Crash):
        async with df.open(pipe, workers, processes=processes, checkpoint=location) as job:
            for time in range(crash + 1):
                await job.advance_to(time)
                if time in checkpoints:
                    last = await job.checkpoint()
                    assert last == time
                _feed(job, inputs, time)
                if time == crash:
                    for name, ups in inputs.items():
                        for d, t, r in ups:
                            if t == time + 1:
                                job.inputs[name].update_at(d, t, r)
                    job.flush()
                    raise Crash
    return last


async def resume_and_finish(
    pipe: df.Pipeline,
    location: Path,
    inputs: Inputs,
    resumed: int | None,
    end: int,
    workers: int,
    processes: int = 1,
) -> tuple[list[Update], list[Any]]:
    """Open the location again, check where the job stands, feed every time from there on;
    the output's updates, and the times ``capture`` saw."""
    async with df.open(pipe, workers, processes=processes, checkpoint=location) as job:
        assert job.resumed_at == resumed
        start = 0 if resumed is None else resumed
        assert job.time == start
        seen = job.output.capture()
        if start > 0:
            with pytest.raises(ValueError, match="already at time"):
                await job.advance_to(start - 1)
        for time in range(start, end + 1):
            await job.advance_to(time)
            _feed(job, inputs, time)
    return job.output.updates(), [t for t, _ in seen]


def check_resumed(
    shape: str,
    updates: list[Update],
    seen: list[Any],
    inputs: Inputs,
    resumed: int | None,
    end: int,
) -> None:
    """The resumed job's outputs equal the recompute at every time from ``resumed - 1``."""
    start = 0 if resumed is None else resumed
    assert all(t >= start for t in seen), (start, seen)
    build, query = ALL[shape]
    horizon = end + 8  # windows close, and filters retract, a few times after the last input
    times = range(max(start - 1, 0), horizon)
    if query is None:  # the oracle is the uninterrupted run
        want = df.run(pipeline_of(build), **inputs)
        for t in times:
            assert accumulate(updates, t) == accumulate(want, t), t
        return
    seen_inputs = windowed_inputs(inputs) if shape == "temporal-filter" else inputs
    assert_matches_oracle(updates, seen_inputs, query, times=times)


@st.composite
def crash_plans(draw: st.DrawFn) -> tuple[Inputs, list[int], int]:
    """Inputs, the times to checkpoint at, and the time to crash at (after the first
    checkpoint, or with none: a fresh start)."""
    inputs = draw(churning_graphs())
    end = max(_times(inputs), default=0) + 1
    crash = draw(st.integers(0, end))
    checkpoints = draw(st.lists(st.integers(0, crash), max_size=3, unique=True))
    return inputs, sorted(checkpoints), crash


def run_crash_and_resume(
    shape: str,
    tmp: Path,
    plan: tuple[Inputs, list[int], int],
    first: tuple[int, int],
    second: tuple[int, int],
) -> None:
    inputs, checkpoints, crash = plan
    pipe = pipeline_of(ALL[shape][0])
    location = tmp / f"state-{secrets.token_hex(8)}"  # (hypothesis seeds ``random``)
    last = trio.run(crash_after_checkpoints, pipe, location, inputs, checkpoints, crash, *first)
    end = max(_times(inputs), default=0) + 1
    out, seen = trio.run(resume_and_finish, pipe, location, inputs, last, end, *second)
    check_resumed(shape, out, seen, inputs, last, end)


@pytest.mark.parametrize("shape", sorted(ALL))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    plan=crash_plans(),
    first=st.integers(1, 3),
    second=st.integers(1, 3),
)
def test_resume_after_a_crash_matches_the_recompute(
    shape: str, tmp_path: Path, plan: tuple[Inputs, list[int], int], first: int, second: int
) -> None:
    """Crash at a random time after random checkpoints, resume at another worker count."""
    run_crash_and_resume(shape, tmp_path, plan, (first, 1), (second, 1))


@st.composite
def checkpointing_every_time(draw: st.DrawFn) -> tuple[Inputs, list[int], int]:
    """Inputs, a checkpoint at every time up to the crash, and the time to crash at."""
    inputs = draw(churning_graphs())
    end = max(_times(inputs), default=0) + 1
    crash = draw(st.integers(0, end))
    return inputs, list(range(crash + 1)), crash


@pytest.mark.parametrize("shape", ["reach-distinct", "components-reduce", "nested-reach",
                                   "shared-arrangement", "later-times-in-a-loop", "count",
                                   "kept-output-trace", "session-windows"])  # fmt: skip
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    plan=checkpointing_every_time(),
    chain=st.integers(1, 3),
    first=st.integers(1, 3),
    second=st.integers(1, 3),
)
def test_histories_written_as_logs_then_whole_again_resume_exactly(
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
    tmp_path: Path,
    plan: tuple[Inputs, list[int], int],
    chain: int,
    first: int,
    second: int,
) -> None:
    """A checkpoint at every time, a history's chain (whole, then logs of the rows
    appended) cut short so that it is written whole again every ``chain + 1`` checkpoints:
    the resume, at another worker count, is exact wherever the crash falls."""
    monkeypatch.setattr(checkpoint_module, "LONGEST_CHAIN", chain)
    run_crash_and_resume(shape, tmp_path, plan, (first, 1), (second, 1))


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPool]:
    """Worker processes kept for the tests of this module that use them."""
    with ProcessPool() as p:
        yield p


@pytest.mark.parametrize(
    ("first", "second"),
    [((1, 1), (2, 2)), ((4, 2), (1, 1)), ((3, 1), (4, 2))],
    ids=["in-process->processes", "4-in-2-processes->in-process", "3->4-in-2-processes"],
)
@pytest.mark.parametrize("shape", ["components-reduce", "temporal-filter"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(plan=crash_plans())
def test_resume_across_processes_matches_the_recompute(
    pool: ProcessPool,
    shape: str,
    first: tuple[int, int],
    second: tuple[int, int],
    tmp_path: Path,
    plan: tuple[Inputs, list[int], int],
) -> None:
    """Checkpoints written by a job in one process resume in several, and back."""
    run_crash_and_resume(shape, tmp_path, plan, first, second)


# -- the contract, case by case -------------------------------------------------------------------
class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w[0], w)).count()


class Lengths(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(len)


async def _counts_until(location: Path, times: int, workers: int = 1) -> df.Job:
    """Count words fed at times ``0 .. times - 1``, leaving the block normally (which
    checkpoints at ``times``)."""
    async with df.open(Counts(), workers, checkpoint=location) as job:
        start = job.time
        for t in range(start, times):
            job.inputs["words"].insert_many([f"w{t}", f"x{t % 3}"])
            await job.advance_to(t + 1)
    return job


async def test_leaving_normally_checkpoints_at_the_jobs_time(tmp_path: Path) -> None:
    """The exit checkpoint holds every time before ``job.time``; the next job stands there,
    answers ``at(T - 1)`` with the checkpointed collection and nothing older."""
    first = await _counts_until(tmp_path, 4)
    before = first.output.at(3)
    async with df.open(Counts(), workers=2, checkpoint=tmp_path) as job:
        assert job.resumed_at == 4 and job.time == 4
        assert job.output.at(3) == before
        with pytest.raises(ValueError, match="before the checkpoint this job resumed from"):
            job.output.at(2)
        assert job.output.updates() == [(d, 3, r) for d, r in before.items()]


async def test_a_fresh_location_starts_afresh(tmp_path: Path) -> None:
    """No checkpoint there yet: ``resumed_at`` is None, time 0; a missing directory is made
    when the first checkpoint is written."""
    location = tmp_path / "a" / "b"
    async with df.open(Counts(), checkpoint=location) as job:
        assert job.resumed_at is None and job.time == 0
        job.inputs["words"].insert("ab")
        await job.advance_to(1)
        assert await job.checkpoint() == 1
    names = sorted(p.name for p in location.iterdir())
    assert names == ["checkpoint-000002.json", "data", "location.json", "lock"]


async def test_subscribe_after_resume_sees_later_times_only(tmp_path: Path) -> None:
    """Nothing the application saw before the checkpoint is sent again."""
    await _counts_until(tmp_path, 3)
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        seen: list[Any] = []

        async def read() -> None:
            async for time, _ in job.output.subscribe():
                seen.append(time)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            job.inputs["words"].insert("yz")
            await job.advance_to(5)
            await job.close()
    assert seen == [3]


async def test_a_checkpoint_of_another_pipeline_is_refused(tmp_path: Path) -> None:
    """Other operators (or inputs, or outputs) at the location: a ValueError naming it."""
    await _counts_until(tmp_path, 2)
    with pytest.raises(ValueError, match=f"checkpoint at {str(tmp_path)!r} holds a checkpoint"):
        async with df.open(Lengths(), checkpoint=tmp_path):
            pass

    class Renamed(df.Pipeline):
        def build(self, other: df.Collection) -> df.Collection:
            return other.map(lambda w: (w[0], w)).count()

    with pytest.raises(ValueError, match="another pipeline"):
        async with df.open(Renamed(), checkpoint=tmp_path):
            pass
    # The refused location is left as it was: the right pipeline still resumes.
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        assert job.resumed_at == 2


def _corrupt_data(location: Path) -> None:
    data = sorted((location / "data").iterdir())[0]
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))


def _truncate_data(location: Path) -> None:
    data = sorted((location / "data").iterdir())[0]
    data.write_bytes(data.read_bytes()[:-7])


def _remove_data(location: Path) -> None:
    for data in (location / "data").iterdir():
        data.unlink()


def _garble_manifest(location: Path) -> None:
    manifest = next(location.glob("checkpoint-*.json"))
    manifest.write_text(manifest.read_text()[:-20])


def _future_manifest(location: Path) -> None:
    """A manifest of a newer format (sealed again: the version is what is refused)."""
    manifest = next(location.glob("checkpoint-*.json"))
    body = json.loads(manifest.read_bytes().rpartition(b"\n#sha256=")[0])
    assert body["version"] == VERSION
    manifest.write_bytes(seal({**body, "version": 99}))


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_corrupt_data, "is corrupted"),
        (_truncate_data, "is corrupted"),
        (_remove_data, "cannot be read"),
        (_garble_manifest, "is damaged"),
        (_future_manifest, "version 99"),
    ],
)
async def test_a_damaged_checkpoint_is_an_error_naming_it(
    tmp_path: Path, damage: Callable[[Path], None], says: str
) -> None:
    """Never a silent fresh start: the error names the location (and the file)."""
    await _counts_until(tmp_path, 3)
    damage(tmp_path)
    with pytest.raises(df.CheckpointError, match=str(tmp_path)) as info:
        async with df.open(Counts(), checkpoint=tmp_path):
            pass
    assert says in str(info.value)


async def test_a_closed_input_stays_closed_with_what_it_was_fed(tmp_path: Path) -> None:
    """An input closed before the checkpoint: everything fed to it (later times included)
    is in the state; resumed, it is closed, and the other inputs go on."""

    class Both(df.Pipeline):
        def build(self, a: df.Collection, b: df.Collection) -> df.Collection:
            return a.concat(b).map(lambda x: (x % 2, x)).count()

    async with df.open(Both(), workers=2, checkpoint=tmp_path) as job:
        job.inputs["a"].insert_many([1, 2, 3])
        job.inputs["a"].update_at(5, 3)
        job.inputs["a"].close()
        job.inputs["b"].insert(10)
        await job.advance_to(1)
    async with df.open(Both(), workers=1, checkpoint=tmp_path) as job:
        assert job.resumed_at == 1
        assert job.inputs["a"].closed
        with pytest.raises(df.JobClosedError):
            job.inputs["a"].insert(7)
        job.inputs["b"].insert(11)
        await job.advance_to(4)
        assert job.output.at(3) == {(0, 2): 1, (1, 4): 1}


async def test_updates_fed_ahead_are_not_in_a_checkpoint(tmp_path: Path) -> None:
    """Updates at the job's time or later (``job.flush()`` and ``update_at`` included) wait
    in the inputs until the job advances past them: a checkpoint at ``T`` holds none."""
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        job.inputs["words"].insert("ab")
        await job.advance_to(1)
        job.inputs["words"].insert("ac")
        job.inputs["words"].update_at("ad", 3)
        job.flush()
        assert await job.checkpoint() == 1
        await job.advance_to(4)
        assert job.output.at(3) == {("a", 3): 1}
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        assert job.resumed_at == 4  # the exit checkpoint
    with pytest.raises(Crash):
        async with df.open(Counts(), checkpoint=tmp_path) as job:
            job.inputs["words"].insert("ae")
            await job.advance_to(5)
            await job.checkpoint()
            job.inputs["words"].insert("af")
            job.inputs["words"].update_at("ag", 6)
            job.flush()
            await job.checkpoint()
            raise Crash
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        assert job.resumed_at == 5
        assert job.output.at(4) == {("a", 4): 1}


async def test_checkpoint_needs_a_location() -> None:
    """``job.checkpoint()`` on a job opened without ``checkpoint=``: a ValueError."""
    async with df.open(Counts()) as job:
        with pytest.raises(ValueError, match="without checkpoint="):
            await job.checkpoint()


async def test_the_time_cannot_move_while_a_checkpoint_is_taken(tmp_path: Path) -> None:
    """``advance_to`` and closing an input from another task wait for no checkpoint: they
    are refused while one is under way (the checkpoint's time would move under it)."""
    errors: list[str] = []
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        job.inputs["words"].insert("ab")

        async def meddle() -> None:
            for attempt in (job.advance_to(9), _close(job)):
                try:
                    await attempt
                except RuntimeError as exc:
                    errors.append(str(exc))

        async with trio.open_nursery() as nursery:
            job._checkpointing = True  # as while job.checkpoint() waits
            nursery.start_soon(meddle)
            await trio.testing.wait_all_tasks_blocked()
            job._checkpointing = False
        await job.advance_to(2)
    assert len(errors) == 2 and all("a checkpoint is being taken" in e for e in errors)


async def _close(job: df.Job) -> None:
    job.inputs["words"].close()


async def test_history_is_bounded_after_resume(tmp_path: Path) -> None:
    """``history=h`` goes on trailing the frontier after a resume."""
    await _counts_until(tmp_path, 3)
    async with df.open(Counts(), checkpoint=tmp_path, history=1) as job:
        for t in range(3, 6):
            job.inputs["words"].insert(f"q{t}")
            await job.advance_to(t + 1)
        assert job.output.at(5) == {("q", 3): 1, ("w", 3): 1, ("x", 3): 1}
        with pytest.raises(ValueError, match="older than the history kept"):
            job.output.at(4)


async def test_a_second_checkpoint_writes_only_what_changed(tmp_path: Path) -> None:
    """After one changed edge, the next checkpoint's data file is a small fraction of the
    first's (the rest is referred to, not written again), and resuming from it is exact."""
    rng = random.Random(5)
    edges = [(rng.randrange(5000), rng.randrange(5000)) for _ in range(10_000)]
    pipe = pipeline_of(SHAPES["bfs-min"][0])
    async with df.open(pipe, workers=2, checkpoint=tmp_path) as job:
        job.inputs["roots"].insert_many([0, 1])
        job.inputs["edges"].insert_many(edges)
        await job.advance_to(1)
        await job.checkpoint()
        first = {p.name: p.stat().st_size for p in (tmp_path / "data").iterdir()}
        job.inputs["edges"].insert((5001, 5002))
        await job.advance_to(2)
        await job.checkpoint()
        files = {p.name: p.stat().st_size for p in (tmp_path / "data").iterdir()}
        added = [size for name, size in files.items() if name not in first]
        assert len(added) == 1 and added[0] * 20 < sum(first.values()), (first, added)
        want = job.output.at(1)
    async with df.open(pipe, workers=3, checkpoint=tmp_path) as job:
        assert job.resumed_at == 2
        assert job.output.at(1) == want


class LongestVisit(df.Pipeline):
    """Each user's sessions (a user's events: a counted index whose rows grow with the
    stream) and the longest one (a reduction whose values per key grow likewise)."""

    def build(self, visits: df.Collection) -> df.Collection:  # (user, second)
        sessions = visits.window(df.session(5), at=lambda v: v[1], key=lambda v: v[0])
        spans = sessions.map(lambda s: (s[1][0], s[0][1] - s[0][0]))
        return spans.max()


async def test_the_nth_checkpoint_writes_only_what_changed(tmp_path: Path) -> None:
    """Keys whose rows grow (a user's events in a session window, a user's session lengths
    under ``max``): after a few new events, the next checkpoint's data file holds those
    changes, not every changed key's rows again, and it reads no file; resuming from a
    chain of them is exact."""
    users, events = 40, 1000
    pipe = LongestVisit()
    # Every user has many sessions already (events 10 s apart: one session each).
    live = Counter((f"u{u}", 10 * i) for u in range(users) for i in range(events))
    async with df.open(pipe, checkpoint=tmp_path) as job:
        job.inputs["visits"].insert_many(list(live))
        await job.advance_to(1)
        await job.checkpoint()
        first = {p.name: p.stat().st_size for p in (tmp_path / "data").iterdir()}
        files = job.checkpointer.store.files  # type: ignore[union-attr]
        read: list[str] = []
        reading = files.read

        def counted(path: str) -> bytes:
            read.append(path)
            return reading(path)

        files.read = counted  # type: ignore[method-assign]
        added = []
        for t in range(1, 4):  # every user gets a new session; one loses an old one
            new = [(f"u{u}", 10 * (events + t)) for u in range(users)]
            job.inputs["visits"].insert_many(new)
            job.inputs["visits"].remove(("u0", 10 * t))
            live.update(new)
            live[("u0", 10 * t)] -= 1
            await job.advance_to(t + 1)
            before = {p.name for p in (tmp_path / "data").iterdir()}
            await job.checkpoint()
            files = {p.name: p.stat().st_size for p in (tmp_path / "data").iterdir()}
            (size,) = [size for name, size in files.items() if name not in before]
            added.append(size)
        assert max(added) * 8 < sum(first.values()), (first, added)
        assert read == []  # writing one reads nothing back
        want = job.output.at(3)
    async with df.open(pipe, workers=2, checkpoint=tmp_path) as job:
        assert job.resumed_at == 4
        assert job.output.at(3) == want
        job.inputs["visits"].insert(("u1", 10 * events + 45))  # joins u1's last session
        live[("u1", 10 * events + 45)] += 1
        await job.advance_to(5)
        batch = [(v, 0, n) for v, n in live.items() if n]
        whole = await trio.to_thread.run_sync(lambda: df.run(pipe, visits=batch))
        assert job.output.at(4) == accumulate(whole, 0)


def _as_version_1(location: Path) -> None:
    """Make the checkpoint at ``location`` (one with no logs) what format 1 wrote: no code
    digests, no checksum of its own."""
    (manifest,) = location.glob("checkpoint-*.json")
    body = json.loads(manifest.read_bytes().rpartition(b"\n#sha256=")[0])
    assert '"log":' not in json.dumps(body)
    del body["code"]
    manifest.write_text(json.dumps({**body, "version": 1}, separators=(",", ":")))


async def test_a_checkpoint_of_format_version_1_resumes(tmp_path: Path) -> None:
    """A checkpoint written before histories had logs (format version 1: the same files,
    no logs) resumes. A job's first checkpoint writes every history whole, no logs."""
    first = await _counts_until(tmp_path, 3)
    before = first.output.at(2)
    _as_version_1(tmp_path)
    async with df.open(Counts(), checkpoint=tmp_path) as job:
        assert job.resumed_at == 3 and job.output.at(2) == before


async def test_a_checkpoint_location_may_be_a_uri(tmp_path: Path) -> None:
    """``file://`` URIs name local directories (other schemes go to pyarrow or fsspec)."""
    uri = f"file://{tmp_path}/state"
    await _counts_until(Path(uri.removeprefix("file://")), 2)
    async with df.open(Counts(), checkpoint=uri) as job:
        assert job.resumed_at == 2


def _graph(seed: int, times: int = 8) -> Inputs:
    """A churning graph drawn from ``seed``: edges in and out at every time, roots too."""
    rng = random.Random(seed)
    edges: list[Update] = []
    present: list[tuple[int, int]] = []
    for t in range(times):
        for _ in range(12 if t == 0 else 3):
            e = (rng.randrange(10), rng.randrange(10))
            edges.append((e, t, 1))
            present.append(e)
        if t and present:
            edges.append((present.pop(rng.randrange(len(present))), t, -1))
    roots = [(0, 0, 1), (3, 2, 1), (0, 5, -1)]
    return {"roots": roots, "edges": edges}


@pytest.mark.parametrize(
    ("first", "second"),
    [((4, 2), (1, 1)), ((2, 1), (2, 2))],
    ids=["4-in-2-processes->in-process", "in-process->2-processes"],
)
def test_a_multi_process_checkpoint_resumes_exactly(
    pool: ProcessPool, tmp_path: Path, first: tuple[int, int], second: tuple[int, int]
) -> None:
    """Checkpoints at times 3 and 5 of a job crashing at 6, across layouts, both ways."""
    run_crash_and_resume("bfs-min", tmp_path, (_graph(11), [3, 5], 6), first, second)


def test_a_reductions_kept_output_trace_resumes(tmp_path: Path) -> None:
    """A reduction's output trace is saved and rebuilt on another worker count."""
    for seed, workers in ((1, (2, 1)), (2, (1, 3))):
        plan = (_graph(seed), [2, 4], 6)
        run_crash_and_resume("kept-output-trace", tmp_path, plan, (workers[0], 1), (workers[1], 1))


async def test_a_checkpoint_that_cannot_be_written_leaves_the_job_going(tmp_path: Path) -> None:
    """Its switch refused (here: a directory where the new manifest goes), a checkpoint
    raises CheckpointError naming the location; the job goes on, the previous checkpoint
    stays the current one, and the next checkpoint writes everything again, exactly."""
    async with df.open(Counts(), workers=2, checkpoint=tmp_path) as job:
        job.inputs["words"].insert_many(["ab", "ac", "bd"])
        await job.advance_to(1)
        await job.checkpoint()
        job.inputs["words"].insert_many(["ae", "bf"])
        await job.advance_to(2)
        blocker = tmp_path / "checkpoint-000002.json"
        blocker.mkdir()
        with pytest.raises(df.CheckpointError, match=str(tmp_path)):
            await job.checkpoint()
        blocker.rmdir()
        current = CheckpointStore(tmp_path).latest()
        assert current is not None and current["time"] == 1
        job.inputs["words"].insert("bg")
        await job.advance_to(3)
        assert await job.checkpoint() == 3
        want = job.output.at(2)
    async with df.open(Counts(), workers=3, checkpoint=tmp_path) as job:
        assert job.resumed_at == 3 and job.output.at(2) == want
