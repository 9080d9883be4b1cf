"""Many times per message: what an activation sends on a port leaves as one message per
destination (a ``RunsBatch`` when it holds several times), whose time is a lower bound of
its updates' times; readers take each update's time from the data.

The oracle tests run at 1-3 workers; under ``--schedule`` the transport also cuts
multi-time messages into pieces (tests/schedule.py).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any
from unittest import mock

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.reference import assert_matches_oracle, expected_at
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework.lattice import Product, less_equal, meet_all
from deltaflow.graphs import Reachability
from deltaflow.operators.base import RunsBatch, UpdateBatch, expand_runs
from deltaflow.scheduler.local import actor as actor_module

products = st.builds(Product, st.integers(0, 4), st.integers(0, 4))


class CountByMod(df.Pipeline):
    """Per residue mod 3, how many records: a reduction whose every activation over a
    static input finishes many times at once."""

    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: (x % 3, x)).count().map(lambda kv: (kv[0], kv[1] % 2)).count()


def _messages(workers: int, times: int) -> int:
    updates = [(x, t, 1) for t in range(times) for x in range(t, t + 4)]

    async def main() -> int:
        async with df.open(CountByMod(), workers) as job:
            for t in range(times):
                job.inputs["xs"].extend([x for x, s, _ in updates if s == t], [1] * 4, time=t)
            await job.close()
            return sum(w["messages"] for w in job.statistics()["workers"])

    return trio.run(main)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_activation_sends_one_message_per_destination(workers: int) -> None:
    """Ten times as many times known at once cost (about) the same messages: each
    reduction activation sends its many times' output as one message per destination,
    not one per time (one per time: the count grows tenfold)."""
    few, many = _messages(workers, 5), _messages(workers, 50)
    assert many <= few + 2 * workers * workers, (few, many)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), products), min_size=1, max_size=12))
def test_runs_of_sends_keep_every_update_at_its_time(sends: list[tuple[str, Product]]) -> None:
    """``RunsBatch.of`` keeps the sends' updates, each at its own time and in send order,
    whatever the order of the times (partially ordered, repeated)."""
    messages = [(t, UpdateBatch([d], [1], True)) for d, t in sends]
    runs = RunsBatch.of(messages)
    assert runs.per_time() == messages
    assert expand_runs([(meet_all(runs.times), runs)]) == messages
    assert all(less_equal(meet_all(runs.times), t) for t in runs.times)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(products, products), min_size=1, max_size=10))
def test_sends_grouped_under_rights_that_cover_their_meet(pairs: list[Any]) -> None:
    """A flushed message's time (the meet of its updates' times) is at or after a right it
    was sent under, even when its rights are incomparable: every group of sends has one
    right below all of theirs."""
    # Each send at a time at or after the right it was checked against.
    out = [(right, Product(max(right.outer, t.outer), max(right.inner, t.inner)), None)
           for right, t in pairs]  # fmt: skip
    groups = actor_module._by_lower_right(out)
    assert sorted(map(id, (i for g in groups for i in g))) == sorted(map(id, out))
    for group in groups:
        meet = meet_all(t for _, t, _ in group)
        assert any(less_equal(right, meet) for right, _, _ in group)
    minimal = {r for r, _, _ in out if not any(less_equal(s, r) and s != r for s, _, _ in out)}
    assert len(groups) == len(minimal)


def test_map_times_drops_and_moves_runs() -> None:
    runs = RunsBatch([Product(1, 0), Product(0, 2)], [2, 1], ["a", "b", "c"], [1, 2, 3])
    later = runs.map_times(lambda t: None if t.inner >= 2 else Product(t.outer, t.inner + 1))
    assert later == RunsBatch([Product(1, 1)], [2], ["a", "b"], [1, 2])


def _with_retractions(drawn: list[Any]) -> list[Any]:
    """Edges inserted at a time, some retracted ``later`` times after (a graph's edges)."""
    updates = []
    for edge, t, later in drawn:
        updates.append((edge, t, 1))
        if later is not None:
            updates.append((edge, t + later, -1))
    return updates


def _reach(c: dict[str, Counter[Any]]) -> Counter[Any]:
    roots = [r for r, n in c["roots"].items() if n > 0]
    edges = [e for e, n in c["edges"].items() if n > 0]
    out: Counter[Any] = Counter()
    for r in roots:
        seen, todo = {r}, [r]
        while todo:
            n = todo.pop()
            for a, b in edges:
                if a == n and b not in seen:
                    seen.add(b)
                    todo.append(b)
        out.update({(r, n): 1 for n in seen})
    return Counter(dict.fromkeys(out, 1))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edges=st.lists(
        st.tuples(
            st.tuples(st.integers(0, 7), st.integers(0, 7)),
            st.integers(0, 4),
            st.one_of(st.none(), st.integers(1, 4)),
        ),
        max_size=25,
    ).map(_with_retractions),
    roots=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 4), st.just(1)), max_size=3),
    workers=st.integers(1, 3),
)
def test_loop_messages_over_partially_ordered_times_match_oracle(
    edges: list[Any], roots: list[Any], workers: int
) -> None:
    """Reachability with its changes at several times known at once: inside the loop an
    activation sends updates at rounds of several times, ``Product(t, i)`` (partially
    ordered), as one message; the answers at every time are the oracle's."""
    out = df.run(Reachability(), workers, roots=roots, edges=edges)
    assert_matches_oracle(out, {"roots": roots, "edges": edges}, _reach)


def test_loop_messages_hold_incomparable_times() -> None:
    """The loop test above reaches messages whose runs' times are incomparable (or it would
    not test what it says); each message's time is at or before its runs' times."""
    seen = {"incomparable": 0}
    emit = actor_module.Actor._emit

    def spy_emit(self: Any, port: int, time: Any, payload: Any) -> None:
        if payload.__class__ is RunsBatch:
            ts = set(payload.times)
            if any(not less_equal(a, b) and not less_equal(b, a) for a in ts for b in ts):
                seen["incomparable"] += 1
            assert all(less_equal(time, t) for t in ts), "a message's time bounds its runs"
        emit(self, port, time, payload)

    rng = random.Random(1)
    edges = _with_retractions(
        [
            ((rng.randrange(12), rng.randrange(12)), rng.randrange(5), rng.choice([None, 1, 2]))
            for _ in range(40)
        ]
    )
    roots = [(0, 0, 1), (3, 2, 1)]
    with mock.patch.object(actor_module.Actor, "_emit", spy_emit):
        out = df.run(Reachability(), 2, roots=roots, edges=edges)
    assert_matches_oracle(out, {"roots": roots, "edges": edges}, _reach)
    assert seen["incomparable"], seen


class Distinct(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.distinct()


@settings(max_examples=30, deadline=None)
@given(
    updates=st.lists(
        st.tuples(st.integers(0, 4), st.integers(1, 6), st.sampled_from([1, 1, -1])),
        min_size=1,
        max_size=30,
    ),
    cut=st.integers(1, 6),
    workers=st.integers(1, 3),
)
def test_frontier_passes_a_messages_time_while_its_later_times_wait(
    updates: list[Any], cut: int, workers: int
) -> None:
    """Every time is fed at once (one message, its time the least of them), then the input
    advances only to ``cut``: the times before it are answered, right, while the message's
    later updates wait, and are answered right once the input moves on."""
    updates = nonnegative(updates)  # a collection: distinct refuses a count below zero

    async def main() -> tuple[dict[int, Any], dict[int, Any], bool]:
        async with df.open(Distinct(), workers) as job:
            by_time: dict[int, tuple[list[Any], list[int]]] = {}
            for x, t, r in updates:
                data, diffs = by_time.setdefault(t, ([], []))
                data.append(x)
                diffs.append(r)
            for t in sorted(by_time):
                job.inputs["xs"].extend(*by_time[t], time=t)
            await job.advance_to(cut)
            early = {t: job.output.at(t) for t in range(cut)}
            waiting = not job.output.is_complete(cut)
            await job.advance_to(7)
            late = {t: job.output.at(t) for t in range(7)}
        return early, late, waiting

    early, late, waiting = trio.run(main)
    inputs = {"xs": updates}

    def distinct(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return Counter({x: 1 for x, n in c["xs"].items() if n > 0})

    assert waiting
    for t, got in early.items():
        assert got == dict(expected_at(inputs, distinct, t)), t
    for t, got in late.items():
        assert got == dict(expected_at(inputs, distinct, t)), t


def test_the_schedule_cuts_multi_time_messages_and_answers_stay_right() -> None:
    """Under the randomized schedule a multi-time message is sometimes delivered in pieces
    (each counted and drained on its own): the answers are the oracle's all the same."""
    from tests.schedule import ScheduledTransport, scheduled

    cuts = []
    pieces = ScheduledTransport._pieces

    def spy(self: ScheduledTransport, runs: RunsBatch) -> list[RunsBatch]:
        out = pieces(self, runs)
        cuts.append(len(out))
        return out

    rng = random.Random(3)
    edges = _with_retractions(
        [
            ((rng.randrange(10), rng.randrange(10)), rng.randrange(4), rng.choice([None, 1]))
            for _ in range(30)
        ]
    )
    roots = [(0, 0, 1), (5, 1, 1)]
    with mock.patch.object(ScheduledTransport, "_pieces", spy), scheduled(11):
        out = df.run(Reachability(), 3, roots=roots, edges=edges)
    assert_matches_oracle(out, {"roots": roots, "edges": edges}, _reach)
    assert max(cuts) > 1, cuts
