"""An input sends many times known at once as one message (``RunsBatch``) to the arrangements
absorbed into its readers' ports, with the same answers as one message per time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.operators import arrange, io
from deltaflow.operators.base import RunsBatch, UpdateBatch

Query = Callable[[dict[str, Counter[Any]]], Counter[Any]]


def _count(c: Counter[Any], key: Callable[[Any], Any]) -> Counter[Any]:
    totals: Counter[Any] = Counter()
    for d, n in c.items():
        totals[key(d)] += n
    return Counter({(k, n): 1 for k, n in totals.items() if n > 0})


def _join(c: dict[str, Counter[Any]]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for x, n in c["xs"].items():
        for y, m in c["ys"].items():
            if x % 4 == y % 4:
                out[(x % 4, (x, -y))] += n * m
    return Counter({k: v for k, v in out.items() if v})


CASES: dict[str, tuple[Callable[..., df.Collection], Query]] = {
    # a step in place (map) before the arrangement: the runs stay one message
    "map_count": (
        lambda xs, ys: xs.map(lambda k: (k % 4, k)).count(),
        lambda c: _count(c["xs"], lambda k: k % 4),
    ),
    # a step that drops data (filter): the runs go through it one time at a time
    "filter_distinct": (
        lambda xs, ys: xs.filter(lambda k: k % 3 != 0).distinct(),
        lambda c: Counter({d: 1 for d, n in c["xs"].items() if n > 0 and d % 3 != 0}),
    ),
    # no step: with two workers the runs are exchanged by key
    "distinct": (
        lambda xs, ys: xs.distinct(),
        lambda c: Counter({d: 1 for d, n in c["xs"].items() if n > 0}),
    ),
    "join": (
        lambda xs, ys: xs.map(lambda k: (k % 4, k)).join(ys.map(lambda k: (k % 4, -k))),
        _join,
    ),
}

_updates = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 6), st.sampled_from([1, 1, -1, 2])),
    max_size=40,
).map(nonnegative)


def _run(name: str, workers: int, xs: list[Any], ys: list[Any]) -> tuple[list[Any], list[bool]]:
    """The job's output, and for each time an input had several times to send at once
    whether it sent them as one ``RunsBatch``."""
    build, _ = CASES[name]

    class P(df.Pipeline):
        def build(self, xs: df.Collection, ys: df.Collection) -> df.Collection:
            return build(xs, ys)

    sent = []

    def as_runs(pending: Any) -> Any:
        runs = original(pending)
        sent.append(runs is not None)
        return runs

    original = io._as_runs
    with mock.patch.object(io, "_as_runs", as_runs):
        out = df.run(P(), workers=workers, xs=xs, ys=ys)
    return out, sent


@pytest.mark.parametrize("as_batch", [False, True], ids=["raw", "batch"])
@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(xs=_updates, ys=_updates)
def test_runs_from_inputs_match_oracle(
    name: str, as_batch: bool, xs: list[Any], ys: list[Any], workers: int
) -> None:
    """Updates at many times, all known when the job starts, reach the arrangements in one
    message per input (where the inputs feed arrangements absorbed into their readers), and
    every output equals its plain-Python meaning at every time (``batch``: every activation
    forwarded as a trace batch, read into int columns from the runs)."""
    with mock.patch.object(arrange, "FORWARD_AS_BATCH", 0 if as_batch else 10**9):
        out, runs = _run(name, workers, xs, ys)
    assert_matches_oracle(out, {"xs": xs, "ys": ys}, CASES[name][1])
    assert all(runs)  # int data: every time an input had several times, one message
    if workers == 1 and len({t for _, t, _ in xs}) > 1:
        assert runs  # the inputs' readers take the runs


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.lists(st.tuples(st.integers(), st.integers()), min_size=1)),
        min_size=1,
        max_size=6,
        unique_by=lambda r: r[0],
    ),
    st.data(),
)
def test_runs_batch_per_time_and_take(
    runs: list[tuple[int, list[Any]]], data: st.DataObject
) -> None:
    """A ``RunsBatch`` holds its runs in order: ``per_time`` gives each run back as a message
    of its time, ``take(mask)`` the updates kept with their times, runs left empty dropped."""
    runs.sort()
    batch = RunsBatch(
        [t for t, _ in runs],
        [len(rs) for _, rs in runs],
        [d for _, rs in runs for d, _ in rs],
        [r for _, rs in runs for _, r in rs],
    )
    assert batch.per_time() == [
        (t, UpdateBatch([d for d, _ in rs], [r for _, r in rs])) for t, rs in runs
    ]
    mask = data.draw(st.lists(st.booleans(), min_size=len(batch), max_size=len(batch)))
    flat = [(t, d, r) for t, rs in runs for d, r in rs]
    kept = [u for u, m in zip(flat, mask) if m]
    part = batch.take(mask)
    assert [(t, d, r) for t, b in part.per_time() for d, r in zip(b.data, b.diffs)] == kept
    assert all(part.lengths) and part.times == sorted({t for t, _, _ in kept})


def test_runs_cross_processes_split_by_key() -> None:
    """An input read by two arrangements of different keys (no one worker owns a datum
    before the exchange, so the input's data are dealt in contiguous parts) sends its runs
    to be split by each key, parts of them to workers of the other process: the answers are
    those of one worker (which took the runs)."""

    class P(df.Pipeline):
        def build(self, xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
            return {"d": xs.distinct(), "j": xs.join(ys)}

    xs = nonnegative(  # retractions of data inserted at time 0 (distinct needs a collection)
        [
            ((k % 7, k), t, 1 - 2 * (k % 5 == 0))
            for t in range(6)
            for k in range(40 * t, 40 * t + 60)
        ]
    )
    ys = [((k, -k), 0, 1) for k in range(7)]
    sent: list[bool] = []
    original = io._as_runs

    def as_runs(pending: Any) -> Any:
        runs = original(pending)
        sent.append(runs is not None)
        return runs

    with mock.patch.object(io, "_as_runs", as_runs):
        one = df.run(P(), workers=1, xs=xs, ys=ys)
    assert sent and all(sent)
    many = df.run(P(), workers=4, processes=2, xs=xs, ys=ys)
    for name in ("d", "j"):
        assert Counter(map(tuple, many[name])) == Counter(map(tuple, one[name]))
