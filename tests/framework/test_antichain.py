"""Antichain, ChangeBatch and MutableAntichain against naive models."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from tests.strategies import antichains, shapes, time_lists, time_lists_any_shape, times_of

from deltaflow.framework.antichain import Antichain, ChangeBatch, MutableAntichain
from deltaflow.framework.lattice import Product, Time, less_equal, less_than
from deltaflow.framework.time_domain import domain_of


def minimal(times: list[Time]) -> set[Time]:
    """The minimal elements of ``times``, by brute force."""
    return {t for t in times if not any(less_than(u, t) for u in times)}


# --- Antichain ----------------------------------------------------------------------------


@given(time_lists_any_shape(max_size=10))
def test_antichain_keeps_exactly_the_minimal_times(times: list[Time]) -> None:
    """An Antichain holds the minimal input times, once each, mutually incomparable, sorted."""
    a = Antichain(times)
    a._check()
    elements = list(a.elements)
    assert set(elements) == minimal(times)
    assert len(elements) == len(set(elements))
    assert elements == sorted(elements)
    for x, y in itertools.combinations(elements, 2):
        assert not less_equal(x, y)
        assert not less_equal(y, x)
    assert len(a) == len(elements)
    assert bool(a) == bool(times) == (not a.is_empty())
    assert list(a) == elements


@given(shapes().flatmap(lambda s: st.tuples(time_lists(s), time_lists(s), times_of(s))))
def test_antichain_queries_match_brute_force(case: tuple[list[Time], list[Time], Time]) -> None:
    """less_equal, less_than and dominates agree with scanning the raw input times."""
    times, others, t = case
    domain = domain_of(t)
    for a, b in [
        (Antichain(times), Antichain(others)),
        # The order given by the maker (its domain) instead of found from the elements.
        (Antichain(times, domain), Antichain.from_sorted(Antichain(others).elements, domain)),
    ]:
        assert a.less_equal(t) == any(less_equal(x, t) for x in times)
        assert a.less_than(t) == any(less_than(x, t) for x in times)
        assert a.dominates(b) == all(any(less_equal(x, y) for x in times) for y in others)


@given(shapes().flatmap(lambda s: st.tuples(time_lists(s), st.randoms())))
def test_antichain_equality_ignores_order_and_redundancy(case: tuple[list[Time], Any]) -> None:
    """Antichains built from permutations of the same times (plus dominated extras) are equal."""
    times, rnd = case
    shuffled = list(times)
    rnd.shuffle(shuffled)
    a, b = Antichain(times), Antichain(shuffled + shuffled)
    assert a == b
    assert hash(a) == hash(b)
    if times:
        assert Antichain.from_elem(times[0]) == Antichain([times[0]])


@given(antichains("product"))
def test_antichain_strategy_gives_antichains(a: Antichain) -> None:
    """Rebuilding an antichain from its own elements changes nothing."""
    assert Antichain(a.elements) == a
    assert Antichain(a.elements).elements == a.elements


@given(time_lists_any_shape(max_size=10))
def test_from_sorted_equals_the_checked_constructor(times: list[Time]) -> None:
    """Given a frontier's own elements, from_sorted builds the same antichain, unchecked."""
    a = Antichain(times)
    b = Antichain.from_sorted(a.elements)
    b._check()
    assert b == a
    assert b.elements == a.elements
    assert hash(b) == hash(a)


# --- ChangeBatch --------------------------------------------------------------------------

batch_ops = st.lists(
    st.one_of(
        st.tuples(st.just("update"), st.integers(0, 5), st.integers(-3, 3)),
        st.tuples(st.just("read"), st.sampled_from(["iter", "len", "is_empty", "compact"])),
        st.tuples(st.just("drain")),
    ),
    max_size=120,
)


@settings(max_examples=150)
@given(batch_ops)
def test_change_batch_matches_counter(ops: list[tuple[Any, ...]]) -> None:
    """Every read of a ChangeBatch equals a Counter of the same updates without zeros."""
    batch: ChangeBatch[int] = ChangeBatch()
    model: Counter[int] = Counter()
    for op in ops:
        if op[0] == "update":
            batch.update(op[1], op[2])
            model[op[1]] += op[2]
        elif op[0] == "drain":
            drained = batch.drain()
            assert sorted(drained) == sorted((k, v) for k, v in model.items() if v)
            model.clear()
            assert batch.is_empty()
        else:
            expected = sorted((k, v) for k, v in model.items() if v)
            kind = op[1]
            if kind == "iter":
                assert sorted(batch) == expected
            elif kind == "len":
                assert len(batch) == len(expected)
            elif kind == "is_empty":
                assert batch.is_empty() == (not expected)
            else:
                batch.compact()
                assert sorted(batch._updates) == expected
        batch._check()


def test_change_batch_extend_and_repr() -> None:
    """extend adds every pair; repr shows the consolidated changes."""
    batch: ChangeBatch[str] = ChangeBatch()
    batch.extend([("a", 1), ("b", 2), ("a", -1), ("c", 0)])
    assert list(batch) == [("b", 2)]
    assert repr(batch) == "ChangeBatch([('b', 2)])"


# --- MutableAntichain state machine ---------------------------------------------------------


class MutableAntichainMachine(RuleBasedStateMachine):
    """Drive a MutableAntichain with random count changes and compare with a Counter model.

    The model's frontier is the set of minimal times with a positive count. Every batch of
    changes must move the real frontier from the model's old frontier to its new one, and the
    returned frontier changes, applied to the old frontier, must give the new one.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ma = MutableAntichain()
        self.model: Counter[Time] = Counter()
        self.shape = "product"

    @initialize(shape=shapes())
    def choose_shape(self, shape: str) -> None:
        self.shape = shape

    def model_frontier(self) -> set[Time]:
        return minimal([t for t, c in self.model.items() if c > 0])

    def apply(self, changes: list[tuple[Time, int]]) -> None:
        old = set(self.ma.elements)
        assert old == self.model_frontier()
        for t, d in changes:
            self.model[t] += d
        moves = self.ma.update_iter(changes)
        new = self.model_frontier()
        assert set(self.ma.elements) == new
        # The changes are consolidated: each time at most once, with +1 or -1.
        assert len({t for t, _ in moves}) == len(moves)
        assert all(d in (1, -1) for _, d in moves)
        assert {t for t, d in moves if d == -1} == old - new
        assert {t for t, d in moves if d == 1} == new - old

    @rule(data=st.data())
    def increments(self, data: st.DataObject) -> None:
        times = data.draw(time_lists(self.shape, max_size=4))
        self.apply([(t, 1) for t in times])

    @rule(data=st.data())
    def mixed_batch(self, data: st.DataObject) -> None:
        changes = data.draw(
            st.lists(st.tuples(times_of(self.shape), st.integers(-2, 2)), max_size=6)
        )
        self.apply(changes)

    @precondition(lambda self: any(c > 0 for c in self.model.values()))
    @rule(data=st.data())
    def retire_frontier_element(self, data: st.DataObject) -> None:
        """Remove one frontier element's whole count, maybe adding a later time first."""
        t = data.draw(st.sampled_from(sorted(self.ma.elements)))
        later = data.draw(times_of(self.shape))
        changes = [(t, -self.model[t])]
        if data.draw(st.booleans()):
            changes.insert(0, (later, 1))
        self.apply(changes)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def cancel_existing(self, data: st.DataObject) -> None:
        """Drive an existing time's count negative, then back (transient negative counts)."""
        t = data.draw(st.sampled_from(sorted(self.model)))
        c = self.model[t]
        self.apply([(t, -c - 1)])
        self.apply([(t, c + 1)])

    @invariant()
    def queries_match_model(self) -> None:
        self.ma._check()
        frontier = self.model_frontier()
        assert set(self.ma.frontier()) == frontier
        assert self.ma.is_empty() == (not frontier)
        for t in list(self.model)[:6]:
            assert self.ma.count_for(t) == self.model[t]
            assert self.ma.less_equal(t) == any(less_equal(f, t) for f in frontier)
            assert self.ma.less_than(t) == any(less_than(f, t) for f in frontier)


MutableAntichainMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestMutableAntichain = MutableAntichainMachine.TestCase


def test_mutable_antichain_transient_negative_count() -> None:
    """A consumed-before-produced message never holds the frontier back."""
    m = MutableAntichain()
    assert m.update_iter([(Product(0, 1), 1)]) == [(Product(0, 1), 1)]
    assert m.update_iter([(Product(0, 0), -1)]) == []
    assert m.count_for(Product(0, 0)) == -1
    assert m.update_iter([(Product(0, 0), 1)]) == []
    assert m.count_for(Product(0, 0)) == 0
    assert m.update_iter([(Product(0, 0), 1)]) == [(Product(0, 0), 1), (Product(0, 1), -1)]
    m._check()


@pytest.mark.parametrize(
    ("changes", "frontier"),
    [
        (
            [(Product(1, 0), 1), (Product(0, 1), 1), (Product(1, 1), 1)],
            {Product(1, 0), Product(0, 1)},
        ),
        ([(3, 2), (3, -2), (4, 1)], {4}),
        ([], set()),
    ],
)
def test_mutable_antichain_examples(changes: list[tuple[Time, int]], frontier: set[Time]) -> None:
    """Hand-checked frontiers after one batch."""
    m = MutableAntichain()
    moves = m.update_iter(changes)
    assert set(m.frontier()) == frontier
    assert {t for t, d in moves if d == 1} == frontier
    m._check()


def test_mutable_antichain_frontier_is_cached_until_it_moves() -> None:
    """frontier() gives the same Antichain while the frontier stands, a fresh one after."""
    m = MutableAntichain()
    m.update_iter([(Product(1, 0), 1), (Product(0, 2), 1)])
    first = m.frontier()
    assert m.frontier() is first
    assert m.update_iter([(Product(1, 1), 1), (Product(1, 0), 1)]) == []
    assert m.frontier() is first
    assert m.update_iter([(Product(1, 0), -2)]) == [(Product(1, 0), -1), (Product(1, 1), 1)]
    second = m.frontier()
    assert second is not first
    assert second == Antichain([Product(0, 2), Product(1, 1)])
    assert first == Antichain([Product(1, 0), Product(0, 2)])
    m._check()


@pytest.mark.parametrize(
    ("times", "elements"),
    [
        ([5, 3, 3, 9], (3,)),
        ([Product(2, 0), Product(0, 2), Product(1, 1), Product(2, 2)], None),
        ([Product(Product(1, 2), 0), Product(Product(1, 1), 3)], None),
    ],
)
def test_antichain_construction_examples(times: list[Time], elements: Any) -> None:
    """Ints keep the least; product times keep every minimal one, sorted."""
    a = Antichain(times)
    expected = tuple(sorted(minimal(times))) if elements is None else elements
    assert a.elements == expected
    assert Antichain(reversed(times)) == a
    a._check()
