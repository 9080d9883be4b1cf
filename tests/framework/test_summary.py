"""Tests for deltaflow.framework.summary: path summaries in the flat loop encoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from deltaflow.framework.lattice import Product, Time, depth, less_equal
from deltaflow.framework.summary import PathSummary
from deltaflow.framework.time_domain import domain_for_depth, domain_of

# -- strategies ---------------------------------------------------------------------------------


def times_of_depth(d: int, max_value: int = 4) -> st.SearchStrategy[Time]:
    """Times with exactly ``d`` Product levels, small coordinates."""
    coord = st.integers(min_value=0, max_value=max_value)
    strategy: st.SearchStrategy[Any] = coord
    for _ in range(d):
        strategy = st.builds(Product, strategy, coord)
    return strategy


def summaries(max_pop: int = 2, max_push: int = 2) -> st.SearchStrategy[PathSummary]:
    """Arbitrary canonical summaries with small fields."""
    small = st.integers(min_value=0, max_value=3)
    return st.builds(
        PathSummary,
        pop=st.integers(min_value=0, max_value=max_pop),
        add=small,
        push=st.lists(small, max_size=max_push).map(tuple),
    )


def naive_apply(summary: PathSummary, time: Time) -> Time:
    """The summary's definition, on a coordinate list (outermost first)."""
    coords = []
    while isinstance(time, Product):
        coords.append(time.inner)
        time = time.outer
    coords.append(time)
    coords.reverse()
    assert len(coords) > summary.pop
    coords = coords[: len(coords) - summary.pop]
    coords[-1] += summary.add
    coords.extend(summary.push)
    out: Time = coords[0]
    for c in coords[1:]:
        out = Product(out, c)
    return out


# -- named constructors and results_in ----------------------------------------------------------


def test_named_constructors_act_as_documented() -> None:
    """identity, enter, leave and feedback map times as the flat encoding says."""
    t = Product(Product(3, 1), 7)
    assert PathSummary.identity().results_in(t) == t
    assert PathSummary.enter().results_in(4) == Product(4, 0)
    assert PathSummary.enter().results_in(t) == Product(t, 0)
    assert PathSummary.leave().results_in(t) == Product(3, 1)
    assert PathSummary.feedback().results_in(t) == Product(Product(3, 1), 8)
    assert PathSummary.feedback(3).results_in(5) == 8
    assert PathSummary.identity().is_identity
    assert not PathSummary.enter().is_identity


def test_depth_change() -> None:
    """depth_change is len(push) - pop and matches the depth of results."""
    assert PathSummary.enter().depth_change == 1
    assert PathSummary.leave().depth_change == -1
    assert PathSummary.feedback().depth_change == 0
    assert PathSummary(pop=2, push=(0,)).depth_change == -1


@given(st.data(), summaries())
def test_results_in_matches_definition(data: st.DataObject, s: PathSummary) -> None:
    """results_in agrees with the coordinate-list definition and changes depth by depth_change."""
    t = data.draw(times_of_depth(data.draw(st.integers(min_value=s.pop, max_value=s.pop + 2))))
    out = s.results_in(t)
    assert out == naive_apply(s, t)
    assert depth(out) == depth(t) + s.depth_change


def test_results_in_rejects_shallow_times() -> None:
    """A summary that pops more levels than the time has raises a ValueError naming both."""
    with pytest.raises(ValueError, match="depth 0"):
        PathSummary.leave().results_in(3)
    with pytest.raises(ValueError, match="drops 2"):
        PathSummary(pop=2).results_in(Product(1, 2))


def identical(a: Time, b: Time) -> bool:
    """Equal, and of the same classes all the way down (a Product is not a plain tuple)."""
    if a.__class__ is not b.__class__:
        return False
    if isinstance(a, Product):
        return identical(a.outer, b.outer) and identical(a.inner, b.inner)  # type: ignore[union-attr]
    return bool(a == b)


@settings(max_examples=300)
@given(st.data(), st.integers(min_value=0, max_value=3), summaries(max_pop=3, max_push=3))
def test_results_in_for_a_domain_is_results_in(
    data: st.DataObject, levels: int, s: PathSummary
) -> None:
    """The function made once for a domain's times (ints, pairs, three loops deep) maps each
    of them as results_in does, for every summary shape that applies to them."""
    domain = domain_for_depth(levels)
    if s.pop > levels:
        with pytest.raises(ValueError, match=f"drops {s.pop}"):
            s.results_in_for(domain)
        return
    apply = s.results_in_for(domain)
    for t in data.draw(st.lists(times_of_depth(levels, max_value=9), min_size=1, max_size=4)):
        assert identical(apply(t), s.results_in(t)), (s, t)


@pytest.mark.parametrize(
    "summary",
    [
        PathSummary.identity(),
        PathSummary.enter(),
        PathSummary.leave(),
        PathSummary.feedback(2),
        PathSummary(pop=1, add=1, push=(0, 3)),
    ],
)
def test_results_in_for_an_odd_domain_is_results_in(summary: PathSummary) -> None:
    """Times of no scope's shape (an inner coordinate that is a Product) keep the generic
    results_in, with its errors."""
    odd = Product(Product(1, 2), Product(3, 4))
    apply = summary.results_in_for(domain_of(odd))
    try:
        expected = summary.results_in(odd)
    except TypeError:  # an addition to a Product coordinate
        with pytest.raises(TypeError):
            apply(odd)
    else:
        assert identical(apply(odd), expected)


def test_invalid_fields_rejected() -> None:
    """Negative fields, non-int pushes and non-positive feedback steps are ValueErrors."""
    with pytest.raises(ValueError, match="pop"):
        PathSummary(pop=-1)
    with pytest.raises(ValueError, match="add"):
        PathSummary(add=-2)
    with pytest.raises(ValueError, match="push"):
        PathSummary(push=(0, -1))
    with pytest.raises(ValueError, match="push"):
        PathSummary(push=[0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        PathSummary.feedback(0)


# -- composition --------------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.data(), summaries(), summaries())
def test_followed_by_agrees_with_sequential_application(
    data: st.DataObject, a: PathSummary, b: PathSummary
) -> None:
    """a.followed_by(b).results_in(t) == b.results_in(a.results_in(t)) when both are defined."""
    composed = a.followed_by(b)
    # Deep enough for a, and for b after a.
    need = max(a.pop, b.pop - a.depth_change)
    t = data.draw(times_of_depth(data.draw(st.integers(min_value=need, max_value=need + 2))))
    assert composed.results_in(t) == b.results_in(a.results_in(t))
    assert composed.depth_change == a.depth_change + b.depth_change


@given(summaries(), summaries(), summaries())
def test_followed_by_is_associative(a: PathSummary, b: PathSummary, c: PathSummary) -> None:
    """Composition is associative on canonical forms (the form is unique)."""
    assert a.followed_by(b).followed_by(c) == a.followed_by(b.followed_by(c))


@given(summaries())
def test_identity_is_neutral(s: PathSummary) -> None:
    """Composing with the identity on either side changes nothing."""
    ident = PathSummary.identity()
    assert ident.followed_by(s) == s
    assert s.followed_by(ident) == s


def test_loop_compositions() -> None:
    """Typical loop paths compose to the expected canonical summaries."""
    enter, leave, fb = PathSummary.enter(), PathSummary.leave(), PathSummary.feedback()
    assert enter.followed_by(leave) == PathSummary.identity()
    assert leave.followed_by(enter) == PathSummary(pop=1, push=(0,))
    # Around a nested loop's outer feedback: (t, i, j) -> (t, i + 1, 0).
    outer_cycle = leave.followed_by(fb).followed_by(enter)
    assert outer_cycle == PathSummary(pop=1, add=1, push=(0,))
    assert outer_cycle.results_in(Product(Product(2, 3), 9)) == Product(Product(2, 4), 0)
    assert enter.followed_by(fb).followed_by(fb) == PathSummary(push=(2,))


# -- orders -------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.data(), summaries(), summaries())
def test_less_equal_is_sound(data: st.DataObject, a: PathSummary, b: PathSummary) -> None:
    """If a.less_equal(b) then a.results_in(t) <= b.results_in(t) in the partial order."""
    if not a.less_equal(b):
        # Make comparable pairs common: derive b from a by raising coordinates.
        bump = data.draw(st.integers(min_value=0, max_value=2))
        b = PathSummary(a.pop, a.add + bump, tuple(p + bump for p in a.push))
    assert a.less_equal(b)
    t = data.draw(times_of_depth(data.draw(st.integers(min_value=a.pop, max_value=a.pop + 2))))
    assert less_equal(a.results_in(t), b.results_in(t))


@given(summaries(), summaries(), summaries())
def test_less_equal_is_a_partial_order(a: PathSummary, b: PathSummary, c: PathSummary) -> None:
    """less_equal is reflexive, antisymmetric and transitive."""
    assert a.less_equal(a)
    if a.less_equal(b) and b.less_equal(a):
        assert a == b
    if a.less_equal(b) and b.less_equal(c):
        assert a.less_equal(c)


@given(summaries(), summaries())
def test_total_order_extends_less_equal(a: PathSummary, b: PathSummary) -> None:
    """The dunder order is total and a linear extension of less_equal."""
    assert (a <= b) or (b <= a)
    assert (a < b) == (b > a)
    assert (a <= b) == (b >= a)
    if a.less_equal(b):
        assert a <= b
    if a.less_equal(b) and a != b:
        assert a < b


def test_less_equal_examples() -> None:
    """Same shape and coordinate-wise <= is required; a different shape is incomparable."""
    fb = PathSummary.feedback
    assert PathSummary.identity().less_equal(fb(1))
    assert fb(1).less_equal(fb(2))
    assert not fb(2).less_equal(fb(1))
    assert PathSummary(push=(0,)).less_equal(PathSummary(add=1, push=(1,)))
    assert not PathSummary(push=(2,)).less_equal(PathSummary(add=1, push=(1,)))
    assert not PathSummary(pop=1, push=(0,)).less_equal(PathSummary.identity())
    assert sorted([fb(2), PathSummary.enter(), fb(1)]) == [fb(1), fb(2), PathSummary.enter()]


def test_str_is_readable() -> None:
    """str() describes the effect in words."""
    assert str(PathSummary.identity()) == "identity"
    assert str(PathSummary(pop=1, add=1, push=(0,))) == "leave, then +1, then enter at [0]"
