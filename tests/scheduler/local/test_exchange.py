"""The exchange cuts a message into one part per owning worker: every update goes to the
worker of its key, in order, in its run, whether the keys are read as numpy columns or one
by one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from deltaflow.framework.hashing import COLUMNS_FROM, worker_of
from deltaflow.operators.base import RunsBatch, UpdateBatch
from deltaflow.operators.dataflow import identity_key, pair_key
from deltaflow.scheduler.local.exchange import split

# Keys the columns take (small ints, pairs of them) and keys they do not (strings, negative
# ints, big ints, mixed): both routes must agree with ``worker_of``.
int_keys = st.integers(0, 50)
any_keys = st.one_of(
    st.integers(-5, 50), st.text(max_size=2), st.just(2**62), st.tuples(int_keys, int_keys)
)
times = st.one_of(st.integers(0, 4), st.tuples(st.integers(0, 3), st.integers(0, 3)))


def _expected(
    runs: list[tuple[Any, list[Any]]], key: Any, peers: int
) -> dict[int, list[tuple[Any, Any, int]]]:
    """Per worker, its ``(time, datum, diff)`` updates in order, from ``worker_of``."""
    out: dict[int, list[tuple[Any, Any, int]]] = {}
    for t, data in runs:
        for i, d in enumerate(data):
            out.setdefault(worker_of(key(d), peers), []).append((t, d, i - 1))
    return out


def _updates(part: Any, time: Any) -> list[tuple[Any, Any, int]]:
    if part.__class__ is UpdateBatch:
        return [(time, d, r) for d, r in zip(part.data, part.diffs)]
    assert all(part.lengths), "a part keeps no empty run"
    return [(t, b.data[i], b.diffs[i]) for t, b in part.per_time() for i in range(len(b))]


def _batch(runs: list[tuple[Any, list[Any]]]) -> RunsBatch:
    runs = [(t, data) for t, data in runs if data]
    return RunsBatch(
        [t for t, _ in runs],
        [len(data) for _, data in runs],
        [d for _, data in runs for d in data],
        [i - 1 for _, data in runs for i in range(len(data))],
        consolidated=True,
    )


#: Keys all of one kind: ints and int pairs take the numpy columns (past ``COLUMNS_FROM``
#: keys), anything else the key-by-key route.
KEYS = {"int": int_keys, "pair": st.tuples(int_keys, int_keys), "any": any_keys}


@given(st.data(), st.sampled_from(sorted(KEYS)), st.integers(1, 5), st.booleans())
def test_parts_hold_each_update_at_its_owner_in_order(
    draw: st.DataObject, kind: str, peers: int, many: bool
) -> None:
    """Runs at partially ordered times, keyed by pair: each part holds exactly its worker's
    updates, in order and at their runs' times, marked as the message was."""
    pairs = st.lists(st.tuples(KEYS[kind], int_keys), max_size=40)
    runs = draw.draw(st.lists(st.tuples(times, pairs), max_size=6))
    if many:  # past ``COLUMNS_FROM``
        runs = [*runs, (5, [draw.draw(st.tuples(KEYS[kind], int_keys))] * COLUMNS_FROM)]
    batch = _batch(runs)
    parts = split(batch, pair_key, peers)
    assert [w for w, _ in parts] == sorted({w for w, _ in parts})
    got = {w: _updates(p, None) for w, p in parts}
    assert got == _expected([(t, d) for t, d in runs if d], pair_key, peers)
    assert all(p.consolidated for _, p in parts)


@given(st.lists(any_keys, max_size=80), st.integers(1, 4))
def test_an_update_batch_by_its_own_key(data: list[Any], peers: int) -> None:
    batch = UpdateBatch(data, [i - 1 for i in range(len(data))])
    got = {w: _updates(p, 7) for w, p in split(batch, identity_key, peers)}
    assert got == _expected([(7, data)], identity_key, peers)


def test_a_message_owned_by_one_worker_goes_whole() -> None:
    batch = _batch([(1, [(4, "a")] * 40), (2, [(8, "b")])])
    assert split(batch, pair_key, 2) == [(0, batch)]


def test_a_datum_that_is_no_pair_is_named() -> None:
    batch = UpdateBatch([(1, 2)] * 40 + ["ab"], [1] * 41)
    with pytest.raises(TypeError, match="expected \\(key, value\\) pairs, got 'ab'"):
        split(batch, pair_key, 2)


def test_only_update_batches_cross() -> None:
    with pytest.raises(TypeError, match="only update batches"):
        split([1, 2], identity_key, 2)
