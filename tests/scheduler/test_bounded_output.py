"""Long-running jobs: a bounded output history and subscriptions that may fall behind."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import accumulate
from tests.strategies import nonnegative

import deltaflow as df


class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w, ())).count()


def as_collection(rounds: list[list[tuple[str, int]]]) -> list[list[tuple[str, int]]]:
    """``rounds`` (round ``i`` at time ``i``) with, in the first round, as many more
    insertions of each word as it is ever retracted: no count is negative at any time (a
    collection, as ``count`` requires) and every retraction still retracts.

    >>> as_collection([[("a", 1)], [("b", -1)]])
    [[('a', 1), ('b', 1)], [('b', -1)]]
    """
    updates = nonnegative([(w, i, r) for i, changes in enumerate(rounds) for w, r in changes])
    out: list[list[tuple[str, int]]] = [[] for _ in rounds]
    for w, i, r in updates:
        out[i].append((w, r))
    return out


ROUNDS = st.lists(
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([1, 1, -1])), max_size=4),
    min_size=1,
    max_size=120,
).map(as_collection)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=ROUNDS, h=st.integers(0, 6))
async def test_bounded_history_answers_like_the_unbounded_one(
    rounds: list[list[tuple[str, int]]], h: int, workers: int
) -> None:
    """at(t) for t >= job.time - h equals the unbounded answer, an older t is a ValueError,
    and updates() is the unbounded list with times before the bound moved up to it."""
    async with df.open(Counts(), workers) as full, df.open(Counts(), workers, history=h) as job:
        for i, changes in enumerate(rounds):
            for w, diff in changes:
                full.inputs["words"].update(w, diff)
                job.inputs["words"].update(w, diff)
            await full.advance_to(i + 1)
            await job.advance_to(i + 1)
            for t in range(max(0, job.time - h - 2), job.time):
                if t >= job.time - h:
                    assert job.output.at(t) == full.output.at(t)
                else:
                    with pytest.raises(ValueError, match="older than the history kept"):
                        job.output.at(t)
        since = job.time - h
        compacted = job.output.updates()
        assert all(t >= since for _, t, _ in compacted)
        everything = full.output.updates()
        for t in range(max(since, 0), job.time):
            assert accumulate(compacted, t) == accumulate(everything, t)


async def test_bounded_history_keeps_the_store_small() -> None:
    """Over many rounds the kept updates stay proportional to h, not to the rounds."""
    async with df.open(Counts(), history=3) as job:
        for i in range(2000):
            job.inputs["words"].insert("abcdefgh"[i % 8])
            await job.advance_to(i + 1)
        store = job.output._store
        assert len(store.history) < 200
        assert job.output.at(job.time - 1) == {(w, 250): 1 for w in "abcdefgh"}


def test_history_must_be_a_non_negative_int() -> None:
    for bad in (-1, 1.5, "3"):
        with pytest.raises(ValueError, match="history must be a non-negative int"):
            df.Job(Counts(), history=bad)  # type: ignore[arg-type]


async def test_a_subscriber_that_falls_behind_fails_alone(workers: int) -> None:
    """Overflowing max_buffer ends that subscription with a clear error after the times it
    holds; the job and an unbounded subscriber go on."""
    async with df.open(Counts(), workers) as job:
        slow = job.output.subscribe(max_buffer=2)
        everything = job.output.subscribe()
        for i in range(5):
            job.inputs["words"].insert("a")
            await job.advance_to(i + 1)
        job.inputs["words"].insert("b")
        await job.close()
        got = []
        with pytest.raises(df.SubscriptionOverflowError, match="more than 2 times behind"):
            async for time, _ in slow:
                got.append(time)
        assert got == [0, 1]
        assert [t async for t, _ in everything] == [0, 1, 2, 3, 4, 5]
        assert job.output.at(5) == {("a", 5): 1, ("b", 1): 1}


async def test_a_subscriber_that_keeps_up_never_overflows() -> None:
    async with df.open(Counts()) as job:
        sub = job.output.subscribe(max_buffer=1)
        async with trio.open_nursery() as nursery:
            seen: list[Any] = []

            async def read() -> None:
                async for time, _ in sub:
                    seen.append(time)

            nursery.start_soon(read)
            for i in range(10):
                job.inputs["words"].insert("a")
                await job.advance_to(i + 1)
                await trio.testing.wait_all_tasks_blocked()
            await job.close()
        assert seen == list(range(10))


def test_max_buffer_must_be_positive() -> None:
    async def main() -> None:
        async with df.open(Counts()) as job:
            with pytest.raises(ValueError, match="max_buffer must be a positive int"):
                job.output.subscribe(max_buffer=0)

    trio.run(main)
