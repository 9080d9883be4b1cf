"""Counting reductions at ``Product(int, int)`` times corrected in columns, a row at a time,
against the general search and the oracle.

The frontier first steps one iteration at a time (what a loop does when many rounds go
through it together: the kernel's case), then moves by random antichains (the per-key paths'
case); the kernel is forced on or off at random from one activation to the next, so the two
paths take turns over one state. Keys are ints, pairs of ints, or pairs beyond 32 bits (which
the kernel refuses); diffs retract; messages may come before the frontier passes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import (
    BY_COUNT,
    GENERAL,
    FakeContext,
    by_self_query,
    consolidated,
    drive_counting,
    frontier_join,
    kernel_mode,
    switching,
)
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.framework import kernels
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, advance_by
from deltaflow.framework.time_domain import PAIR
from deltaflow.framework.trace.ints import decode_keys, key_codes
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators import reduce as R
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.join.history import KeyedHistory
from deltaflow.operators.reduce import pair_counts
from deltaflow.operators.reduce.pair_counts import PairCounts

KEYS = {
    "ints": st.integers(0, 5),
    "pairs": st.tuples(st.integers(-1, 1), st.integers(-2, 1)),
    "wide pairs": st.tuples(st.sampled_from([0, 2**40]), st.integers(0, 1)),
}
TIMES = st.builds(Product, st.integers(0, 3), st.integers(0, 4))


@st.composite
def pair_frontiers(draw: st.DrawFn) -> list[Antichain]:
    """Frontiers stepping one iteration at a time (outer coordinates never decreasing), then
    joined with random antichains, then empty."""
    outers = sorted(draw(st.lists(st.integers(0, 2), max_size=5)))
    out = [Antichain([Product(x, y + 1)]) for y, x in enumerate(outers)]
    for elems in draw(st.lists(st.lists(TIMES, min_size=1, max_size=2), max_size=3)):
        step = Antichain(elems)
        joined = frontier_join(out[-1], step) if out else step
        if not out or joined != out[-1]:
            out.append(joined)
    out.append(Antichain())
    return out


def _run(
    name: str, updates: list[Any], frontiers: list[Antichain], modes: list[str], **how: Any
) -> tuple[list[Any], Any, R.ReduceOperator]:
    with kernel_mode():
        return drive_counting(name, updates, frontiers, operator=switching(modes), **how)


def _auto_and_never(
    name: str, updates: list[Any], frontiers: list[Antichain], watch: Callable[[Any], Any]
) -> tuple[dict[str, list[Any]], dict[str, Counter[Any]]]:
    """Drive ``name`` under the kernels' modes ``auto`` and ``never``: per mode, what
    ``watch(operator)`` said after each activation, and the consolidated output."""
    seen: dict[str, list[Any]] = {}
    outputs: dict[str, Counter[Any]] = {}

    class Watched(R.ReduceOperator):
        def schedule(self, ctx: Any) -> None:
            super().schedule(ctx)
            seen[mode].append(watch(self))

    for mode in ("auto", "never"):
        seen[mode] = []
        with kernel_mode(mode):
            sent, _, _ = drive_counting(name, updates, frontiers, operator=Watched)
        outputs[mode] = consolidated(sent)
    return seen, outputs


@pytest.mark.parametrize("keys", sorted(KEYS))
@pytest.mark.parametrize("name", sorted(BY_COUNT))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_row_kernel_matches_the_general_search_and_the_oracle(
    name: str, keys: str, data: st.DataObject
) -> None:
    """The kernel alone, and the kernel and the per-key paths taking turns over one state,
    send exactly what the general search with dict accumulations sends, which is the
    oracle's answer, and leave nothing pending."""
    updates = data.draw(
        st.lists(
            st.tuples(st.tuples(KEYS[keys], st.just(())), TIMES, st.integers(-2, 3).filter(bool)),
            max_size=30,
        ),
        label="updates",
    )
    frontiers = data.draw(pair_frontiers(), label="frontiers")
    modes = data.draw(st.lists(st.sampled_from(["always", "never"]), min_size=1, max_size=4))
    how = {
        "lag": data.draw(st.lists(st.booleans(), min_size=1, max_size=3), label="lag"),
        "early": data.draw(st.integers(0, 2), label="early"),
    }
    # Compacting the columns after every activation, or as they would be.
    compact = data.draw(st.sampled_from([0, pair_counts.COMPACT_MIN]), label="compact above")
    kept, pair_counts.COMPACT_MIN = pair_counts.COMPACT_MIN, compact
    try:
        sent, ctx, op = _run(name, updates, frontiers, modes, **how)
    finally:
        pair_counts.COMPACT_MIN = kept
    assert ctx.held == {} and op.pending == {} and op.pairs is None
    reference, _, _ = drive_counting(name, updates, frontiers, counting=False, path=GENERAL, **how)
    assert consolidated(sent) == consolidated(reference)
    assert_matches_oracle(sent, {"xs": updates}, by_self_query(BY_COUNT[name][3]))


def _rows(n: int, rounds: int) -> list[Any]:
    """Updates of ``n`` int keys at every round, inserted at iteration 0, some retracted at
    iteration 1 of the next round (a static run's shape: every round known at once)."""
    out = []
    for x in range(rounds):
        for k in range(n):
            out.append(((k * 7 % n, ()), Product(x, k % 3), 1))
            if k % 4 == 0:
                out.append(((k, ()), Product(x + 1, 1), -1))
    return out


@pytest.mark.parametrize("name", sorted(BY_COUNT))
def test_rows_take_the_kernel_and_give_up_when_the_frontier_leaves_them(name: str) -> None:
    """Frontiers stepping by iteration move the histories into columns (the first activation
    large enough, under ``auto``); a frontier that passes parts of two rows moves them back.
    The output is the per-key path's throughout."""
    updates = _rows(400, 5)
    frontiers = [Antichain([Product(0, 1)]), Antichain([Product(2, 2), Product(4, 1)]), Antichain()]
    seen, outputs = _auto_and_never(name, updates, frontiers, lambda op: op.pairs is not None)
    assert seen["auto"] == [True, False, False]
    assert not any(seen["never"])
    assert outputs["auto"] == outputs["never"]


@pytest.mark.parametrize("name", sorted(BY_COUNT))
def test_a_row_passed_in_part_waits_for_the_rest(name: str) -> None:
    """A frontier that passes part of one row (the other workers' share of it still on its
    way) keeps the columns: the passed messages wait, and the whole row is corrected in
    columns once the frontier passes it. The output is the per-key path's."""
    # Rows 1 and 2 of five rounds: inserted at row 1, a third retracted at row 2.
    updates = [
        ((k * 7 % 300, ()), Product(x, y), 1 if y == 1 else -1)
        for y in (1, 2)
        for x in range(5)
        for k in range(300)
        if y == 1 or k % 3 == 0
    ]
    frontiers = [
        Antichain([Product(0, 2)]),
        Antichain([Product(0, 3), Product(3, 2)]),
        Antichain([Product(0, 3)]),
        Antichain(),
    ]
    seen, outputs = _auto_and_never(
        name, updates, frontiers, lambda op: (op.pairs is not None, len(op.waiting))
    )
    # Columns throughout; at the second frontier row 2's three passed rounds wait.
    assert seen["auto"] == [(True, 0), (True, 3), (True, 0), (False, 0)]
    assert outputs["auto"] == outputs["never"]


@pytest.mark.parametrize(
    ("keys", "pairs"),
    [([1, -(2**63)], False), ([(1, -1), (-(2**31), 2**31 - 1)], True)],
)
def test_key_codes_round_trip(keys: list[Any], pairs: bool) -> None:
    """Ints and pairs of 32-bit ints come back from their codes as they were."""
    made = key_codes(keys)
    assert made is not None and made[1] is pairs
    assert decode_keys(made[0], pairs) == keys


@pytest.mark.parametrize(
    "keys", [[2**63], [(2**31, 0)], [(0, -(2**31) - 1)], [(1, 2, 3)], ["a"], [True], [(1, 2), 3]]
)
def test_keys_that_are_not_int_data_are_refused(keys: list[Any]) -> None:
    """Keys beyond 64 bits, pairs beyond 32, other tuples, other types: no codes."""
    assert key_codes(keys) is None


def test_histories_move_into_columns_and_back_whole() -> None:
    """Taking per-key histories into columns and putting them back keeps every update; keys
    of another kind than asked for are refused and the histories left as they were."""
    inputs, outputs = KeyedHistory(domain=PAIR, unit=True), KeyedHistory(domain=PAIR, unit=True)
    for k, t, d in [((1, 2), Product(0, 1), 1), ((1, 2), Product(3, 0), -2), ((0, 5), (2, 2), 1)]:
        inputs.append(k, (), Product(*t), d)
    outputs.append((1, 2), (), Product(0, 1), 1)
    before = (dict(inputs.rows), dict(outputs.rows))
    assert PairCounts.take(inputs, outputs, False) is None
    assert (inputs.rows, outputs.rows) == before
    state = PairCounts.take(inputs, outputs, True)
    assert state is not None and state.high == 2
    assert inputs.rows == {} == outputs.rows and inputs.size == 0
    state.into(inputs, outputs)
    assert (inputs.rows, outputs.rows) == before


class _Reach(df.Pipeline):
    """Nodes reachable from the roots, a ``distinct`` in a loop (pairs of ints as keys)."""

    def build(self, roots: df.Collection, edges: df.Collection) -> df.Collection:
        def step(reached: df.Collection) -> df.Collection:
            hops = reached.map(lambda rn: (rn[1], rn[0])).join(edges)
            return hops.map(lambda kv: (kv[1][0], kv[1][1])).concat(reached).distinct()

        return roots.map(lambda r: (r, r)).iterate(step)


def _reached(roots: set[int], edges: Counter[Any]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for r in roots:
        seen, todo = {r}, [r]
        while todo:
            a = todo.pop()
            for (u, v), n in edges.items():
                if n > 0 and u == a and v not in seen:
                    seen.add(v)
                    todo.append(v)
        out.update((r, n) for n in seen)
    return out


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mode", ["always", "never", "auto"])
@settings(max_examples=15, deadline=None)
@given(
    edges=st.lists(
        st.tuples(st.tuples(st.integers(0, 7), st.integers(0, 7)), st.integers(0, 12)),
        max_size=40,
    )
)
def test_reachability_of_many_rounds_at_once_matches_the_oracle(
    mode: str, edges: list[Any], workers: int
) -> None:
    """Edges added at random rounds and removed a few rounds later, every round known at
    once: the loop's ``distinct`` matches the oracle at every round."""
    ups = []
    for i, (e, t) in enumerate(edges):
        ups.append((e, t, 1))
        if i % 3 == 0:
            ups.append((e, t + 1 + i % 4, -1))
    roots = [(0, 0, 1), (3, 2, 1)]
    with kernel_mode(mode):
        out = df.run(_Reach(), workers=workers, roots=roots, edges=ups)

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return _reached({r for r, n in c["roots"].items() if n > 0}, c["edges"])

    assert_matches_oracle(out, {"roots": roots, "edges": ups}, query)


def test_decoded_pair_keys_are_plain_int_tuples() -> None:
    """Keys coming back from codes are tuples of Python ints (hashing equal to the input's)."""
    codes, _ = key_codes([(-5, 7)]) or (np.zeros(0), True)
    (key,) = decode_keys(codes, True)
    assert key == (-5, 7) and type(key[0]) is int and hash(key) == hash((-5, 7))


@settings(max_examples=100, deadline=None)
@given(
    updates=st.lists(
        st.tuples(st.integers(0, 3), TIMES, st.integers(-2, 2).filter(bool)), max_size=20
    ),
    frontier=st.lists(TIMES, min_size=1, max_size=3),
)
def test_compacted_columns_are_the_consolidated_advanced_updates(
    updates: list[Any], frontier: list[Any]
) -> None:
    """Compaction advances every time with ``advance_by`` to the frontier and sums equal
    ``(key, time)`` updates, dropping zeros."""
    elements = Antichain(frontier).elements
    expected: Counter[Any] = Counter()
    for k, t, d in updates:
        expected[(k, advance_by(t, elements))] += d
    inputs = KeyedHistory(domain=PAIR, unit=True)
    for k, t, d in updates:
        inputs.append(k, (), t, d)
    state = PairCounts.take(inputs, KeyedHistory(domain=PAIR, unit=True), False)
    assert state is not None
    state.kept = 0  # (as if the last compaction had left nothing)
    kept, pair_counts.COMPACT_MIN = pair_counts.COMPACT_MIN, 0
    try:
        state.tidy(elements)
    finally:
        pair_counts.COMPACT_MIN = kept
    state.into(inputs, KeyedHistory(domain=PAIR, unit=True))
    inputs.check()  # (no zero diff)
    got = Counter({(k, t): d for k, rows in inputs.rows.items() for _, t, d in rows})
    assert got == Counter({kt: d for kt, d in expected.items() if d})
    assert len(got) == inputs.size


class _Memory:
    """One operator's checkpoint on one worker, in memory (as its sink, then its source)."""

    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    def history(self, name: str, rows: Any = None, *_: Any, **_options: Any) -> Any:
        if rows is None:
            return self.saved.get(name)
        self.saved[name] = {k: list(v) for k, v in rows.items()}
        return None

    def rows(self, name: str, rows: Any = None, key: str | None = None) -> Any:
        if rows is None:
            return self.saved.get(name)
        self.saved[name] = rows
        return None

    def value(self, name: str, value: Any = None) -> Any:
        if value is None:
            return self.saved.get(name)
        self.saved[name] = value
        return None


@pytest.mark.parametrize("name", sorted(BY_COUNT))
@settings(max_examples=30, deadline=None)
@given(
    updates=st.lists(
        st.tuples(st.integers(0, 6), TIMES, st.integers(-2, 3).filter(bool)), max_size=40
    ),
    cut=st.integers(1, 3),
)
def test_a_checkpoint_taken_with_the_histories_in_columns_resumes_exactly(
    name: str, updates: list[Any], cut: int
) -> None:
    """Saved while its histories are in columns, an operator resumes into one that finishes
    with the output of a run never interrupted and never in columns."""
    logic, by_count, positive_only, f = BY_COUNT[name]
    # Each iteration's updates come as one batch before the frontier passes it, as in a loop.
    batches = {
        y: RawBatch([k for k, _, _ in row], None, [t for _, t, _ in row], [d for _, _, d in row])
        for y in range(5)
        if (row := [u for u in updates if u[1][1] == y])
    }
    rows = [Antichain([Product(0, y)]) for y in range(1, 6)]

    def operator() -> R.ReduceOperator:
        return R.ReduceOperator(
            "reduce(test)",
            Spine(Antichain([Product(0, 0)])),
            None,
            logic,
            positive_only=positive_only,
            key_only=True,
            by_count=by_count,
        )

    outputs = []
    with kernel_mode():
        for mode in ("never", "always"):
            kernels.set_mode(mode)
            op, ctx = operator(), FakeContext(Product(0, 0))

            def feed(y: int, ctx: FakeContext) -> None:
                if y in batches:
                    ctx.mailbox.append((Product(0, y), batches[y]))
                    ctx.rights.append(Product(0, y))

            for y, frontier in enumerate(rows[:cut]):
                feed(y, ctx)
                ctx.run(op, frontier)
            early = any(y < cut for y in batches)
            assert (op.pairs is not None) == (mode == "always" and early)
            memory = _Memory()
            op.save(memory)  # type: ignore[arg-type]
            resumed, again = operator(), FakeContext(Product(0, 0))
            resumed.load(memory)  # type: ignore[arg-type]
            at = rows[cut - 1].elements[0]
            again._frontier = rows[cut - 1]
            again.rights.append(at)
            resumed.initialize(again, [again.capability(at)])  # type: ignore[arg-type]
            again.rights.clear()
            for y, frontier in enumerate([*rows[cut:], Antichain()], start=cut):
                feed(y, again)
                again.run(resumed, frontier)
            assert again.held == {}
            outputs.append(consolidated(ctx.sent + again.sent))
    assert outputs[0] == outputs[1]
    sent = [(d, t, r) for (d, t), r in outputs[1].items()]
    assert_matches_oracle(sent, {"xs": [((k, ()), t, d) for k, t, d in updates]}, by_self_query(f))
