"""A checkpoint's columns are written by one of two paths (``DELTAFLOW_KERNELS``): vectorised
(strings and tuples encoded a column at a time) or general (value by value). Both must write
the same columns, and a job must resume the same from either.

The column test encodes random columns both ways and compares the Arrow arrays and the values
read back; the job test feeds a clickstream-like pipeline (string users and pages, some not
ASCII, tuple keys, retractions) with one path, checkpoints, crashes, resumes with the other
path at another worker count, and compares every output from the resumed time on with a
recompute from scratch.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import identical, kernel_mode

import deltaflow as df
from deltaflow.framework.durable.columns import decode_column, encode_column
from deltaflow.testing import accumulate

Event = tuple[str, str, int]
Update = tuple[Event, int, int]


texts = st.one_of(st.text(max_size=4), st.sampled_from(["u1", "/p2", "", "é", "\ud800", "日本"]))
atoms = st.one_of(
    texts, st.integers(-5, 300), st.integers(-(2**70), 2**70), st.booleans(), st.floats()
)
rows = st.one_of(
    st.tuples(texts, texts, st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.tuples(st.integers(0, 50), st.integers(0, 9)), texts),
    st.tuples(st.tuples(st.integers(0, 50), texts), atoms),
    st.tuples(st.integers(-3, 3), st.integers(-(2**64), 2**64)),
    st.tuples(atoms, atoms, atoms),
)


@settings(max_examples=200, deadline=None)
@given(
    column=st.one_of(
        st.lists(texts, max_size=200),
        st.lists(rows, max_size=200),
        st.lists(st.one_of(texts, rows), max_size=100),
        st.lists(st.sampled_from(["ab", "c", "é"]), min_size=100, max_size=300),
    )
)
def test_the_vectorised_path_writes_what_the_general_path_writes(column: list[Any]) -> None:
    """Same Arrow arrays, same codecs, and values read back equal to those written."""
    with kernel_mode("always"):
        fast = encode_column(column)
    with kernel_mode("never"):
        general = encode_column(column)
    assert fast.spec == general.spec
    assert fast.array.equals(general.array)
    back = decode_column(fast.array, fast.spec)
    assert len(back) == len(column)
    assert all(identical(a, b) for a, b in zip(column, back)), (column, back)


class Clicks(df.Pipeline):
    """Distinct users per (page, ten seconds); each user's latest second."""

    def build(self, events: df.Collection) -> dict[str, df.Collection]:
        visits = events.map(lambda e: ((e[1], e[2] // 10), e[0])).distinct()
        return {
            "visitors": visits.map(lambda kv: (kv[0], 1)).count(),
            "latest": events.map(lambda e: (e[0], e[2])).max(),
        }


def recompute(events: dict[Event, int]) -> dict[str, dict[Any, int]]:
    """The outputs of :class:`Clicks` over a collection of events, from scratch."""
    visits = {((p, s // 10), u) for (u, p, s), n in events.items() if n > 0}
    visitors = Counter(key for key, _ in visits)
    latest: dict[str, int] = {}
    for (u, _, s), n in events.items():
        if n > 0:
            latest[u] = max(latest.get(u, s), s)
    return {
        "visitors": dict.fromkeys(visitors.items(), 1),
        "latest": dict.fromkeys(latest.items(), 1),
    }


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[Update], int, int]:
    """Updates at times ``0 .. end - 1`` (inserts, and retractions of earlier ones), a time
    to checkpoint at, and a later one to crash at."""
    if draw(st.booleans()):  # (all ASCII: the strings written at once)
        users, pages = st.sampled_from(["u1", "u2", "u33", "u5"]), st.sampled_from(["/a", "/bb"])
    else:
        users = st.sampled_from(["u1", "u2", "é3", "ü", "u5", "日"])
        pages = st.sampled_from(["/a", "/b", "/ç", "/d"])
    end = draw(st.integers(2, 8))
    updates: list[Update] = []
    live: list[Event] = []
    for t in range(end):
        for _ in range(draw(st.integers(0, 30))):
            e = (draw(users), draw(pages), draw(st.integers(0, 60)))
            updates.append((e, t, 1))
            live.append(e)
        for _ in range(draw(st.integers(0, 3))):
            if live:
                e = live.pop(draw(st.integers(0, len(live) - 1)))
                updates.append((e, t, -1))
    checkpoint = draw(st.integers(1, end - 1))
    crash = draw(st.integers(checkpoint, end - 1))
    return updates, checkpoint, crash


class Crash(Exception):
    """Leaves a job's block as a crash would: no checkpoint written."""


def _feed(job: df.Job, updates: list[Update], time: int) -> None:
    for e, t, r in updates:
        if t == time:
            job.inputs["events"].update(e, r)


async def _crash_then_resume(
    location: Path, plan: tuple[list[Update], int, int], workers: tuple[int, int],
    modes: tuple[str, str],
) -> dict[str, list[tuple[Any, Any, int]]]:  # fmt: skip
    updates, checkpoint, crash = plan
    end = max(t for _, t, _ in updates) + 1 if updates else 1
    with kernel_mode(modes[0]), pytest.raises(Crash):
        async with df.open(Clicks(), workers[0], checkpoint=location) as job:
            for time in range(crash + 1):
                await job.advance_to(time)
                if time == checkpoint:
                    assert await job.checkpoint() == checkpoint
                _feed(job, updates, time)
            raise Crash
    with kernel_mode(modes[1]):
        async with df.open(Clicks(), workers[1], checkpoint=location) as job:
            assert job.resumed_at == checkpoint
            for time in range(checkpoint, end + 1):
                await job.advance_to(time)
                _feed(job, updates, time)
            await job.advance_to(end + 1)
            return {name: out.updates() for name, out in job.outputs.items()}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=plans(),
    workers=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    modes=st.sampled_from([("always", "never"), ("never", "always"), ("always", "always")]),
)
def test_a_job_resumes_the_same_from_either_path(
    plan: tuple[list[Update], int, int], workers: tuple[int, int], modes: tuple[str, str]
) -> None:
    """Checkpointed with one path, resumed with the other: every output at every time from
    the checkpoint's on equals the recompute."""
    updates, checkpoint, _ = plan
    with tempfile.TemporaryDirectory() as location:
        outputs = trio.run(_crash_then_resume, Path(location), plan, workers, modes)
    end = max(t for _, t, _ in updates) + 1 if updates else 1
    events = [(e, t, r) for e, t, r in updates]
    for time in range(checkpoint - 1, end + 1):
        want = recompute(accumulate(events, time))
        for name, got in outputs.items():
            assert accumulate(got, time) == want[name], (name, time)
