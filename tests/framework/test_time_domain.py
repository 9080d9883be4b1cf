"""The time domains agree with the generic lattice on their own times, for every operation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from tests.strategies import SHAPES, time_lists, times_of

from deltaflow.framework import kernels, lattice, tuning
from deltaflow.framework.lattice import Product, depth
from deltaflow.framework.time_domain import (
    GeneralDomain,
    IntDomain,
    PairDomain,
    TimeDomain,
    domain_for_depth,
    domain_of,
)

DEPTH = {"int": 0, "product": 1, "nested": 2}


@st.composite
def shaped(draw: st.DrawFn) -> tuple[TimeDomain, str]:
    shape = draw(st.sampled_from(SHAPES))
    return domain_for_depth(DEPTH[shape]), shape


@given(st.data())
def test_lattice_operations_agree_with_the_generic_lattice(data: st.DataObject) -> None:
    domain, shape = data.draw(shaped())
    a = data.draw(times_of(shape))
    b = data.draw(times_of(shape))
    assert domain.less_equal(a, b) == lattice.less_equal(a, b)
    assert domain.join(a, b) == lattice.join(a, b)
    assert domain.meet(a, b) == lattice.meet(a, b)
    assert type(domain.join(a, b)) is type(a)
    assert type(domain.meet(a, b)) is type(a)


@given(st.data())
def test_advancing_agrees_with_advance_by(data: st.DataObject) -> None:
    domain, shape = data.draw(shaped())
    frontier = data.draw(time_lists(shape, max_size=4))
    times = data.draw(time_lists(shape, max_size=6))
    advance = domain.advancer(frontier)
    for t in times:
        assert advance(t) == lattice.advance_by(t, frontier)
        assert domain.advance_by(t, frontier) == lattice.advance_by(t, frontier)


@given(st.data())
def test_closures_and_chains_agree_with_the_generic_lattice(data: st.DataObject) -> None:
    domain, shape = data.draw(shaped())
    times = data.draw(time_lists(shape, max_size=10))
    assert domain.join_closure(times) == lattice.join_closure(times)
    assert domain.chain_decomposition(times) == lattice.chain_decomposition(times)


@given(st.data())
def test_columns_round_trip(data: st.DataObject) -> None:
    domain, shape = data.draw(shaped())
    times = data.draw(time_lists(shape, max_size=10))
    cols = domain.to_columns(times)
    if domain.columns is None:
        assert cols is None
        with pytest.raises(TypeError, match="not stored as columns"):
            domain.from_columns(np.zeros(0, dtype=np.int64))
        return
    assert cols is not None
    assert cols.dtype == np.int64
    assert cols.shape == ((len(times),) if domain.columns == 1 else (len(times), 2))
    back = domain.from_columns(cols)
    assert back == times
    assert all(type(x) is type(t) for x, t in zip(back, times))


def test_a_coordinate_beyond_int64_stays_an_object() -> None:
    assert IntDomain().to_columns([1 << 70]) is None
    assert PairDomain().to_columns([Product(0, 1 << 70)]) is None


#: A coordinate that is not a Python int within 64 bits: the codec must refuse it.
ODD = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.integers(min_value=1 << 63),
    st.integers(max_value=-(1 << 63) - 1),
    st.sampled_from([np.float64(2.0), "3", None]),
)
COORD = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
#: Sizes on both sides of the pair codec's switch from numpy.asarray to struct.pack.
SIZES = st.sampled_from([1, 2, tuning.PAIR_PACK_MIN - 1, tuning.PAIR_PACK_MIN, 100])


@given(st.data())
def test_the_codec_reads_ints_exactly_and_refuses_anything_else(data: st.DataObject) -> None:
    """Ints within 64 bits go into columns value for value, at any size (each pair path);
    one float, bool, string or too large an int anywhere and the times stay objects (None),
    never a truncated column."""
    n = data.draw(SIZES)
    ints = data.draw(st.lists(COORD, min_size=2 * n, max_size=2 * n))
    pairs = [Product(a, b) for a, b in zip(ints[::2], ints[1::2])]
    for own in (False, True):
        got = IntDomain().to_columns(ints[:n], own=own)
        assert got is not None and got.tolist() == ints[:n]
        got = PairDomain().to_columns(pairs, own=own)
        assert got is not None and got.tolist() == [list(p) for p in pairs]
    odd = data.draw(ODD)
    at = data.draw(st.integers(0, 2 * n - 1))
    ints[at] = odd
    bad = [Product(a, b) for a, b in zip(ints[::2], ints[1::2])]
    assert IntDomain().to_columns(ints) is None
    assert PairDomain().to_columns(bad) is None
    # A state's own times are not checked for their class again: only a bool (admitted by
    # no input) reads as its int there; anything else is still refused.
    if odd.__class__ is not bool:
        assert IntDomain().to_columns(ints, own=True) is None
        assert PairDomain().to_columns(bad, own=True) is None


@given(st.lists(st.one_of(COORD, st.integers(min_value=1 << 63)), max_size=40))
def test_both_int_conversions_agree(ints: list[int]) -> None:
    """The codec's two conversions (``numpy.asarray`` below ``PAIR_PACK_MIN`` pair times,
    ``struct.pack`` from it and for a state's own times) give the same column, or both
    refuse an int beyond 64 bits."""
    from deltaflow.framework.time_domain import _int_column, _packed

    a, b = _int_column(ints), _packed(ints)
    assert (a is None) == (b is None) == any(i >= 1 << 63 for i in ints)
    if a is not None and b is not None:
        assert a.dtype == b.dtype == np.int64
        assert a.tolist() == b.tolist() == ints


@pytest.mark.parametrize("d", range(4))
def test_the_domain_of_a_depth_has_that_depth_least_time(d: int) -> None:
    domain = domain_for_depth(d)
    assert depth(domain.least) == d
    assert lattice.minimum_like(domain.least) == domain.least
    assert domain_of(domain.least) is domain
    assert domain.total == (d == 0)
    assert (domain.columns is not None) == (d < 2) == domain.kernels


def test_odd_shapes_are_general() -> None:
    a, b = Product(1, Product(2, 3)), Product(2, Product(1, 4))
    odd = domain_of(a)
    assert isinstance(odd, GeneralDomain)
    assert not odd.kernels
    assert odd.to_columns([a, b]) is None
    assert odd.join(a, b) == Product(2, Product(2, 4))
    assert odd.count_kernel_min is None and odd.join_kernel_min is None
    assert not odd.count_kernel(10**9) and not odd.join_kernel(10**9)


def test_scopes_and_traces_carry_their_domain() -> None:
    from deltaflow.framework.antichain import Antichain
    from deltaflow.framework.trace.spine import Spine
    from deltaflow.operators.scope import Scope

    top = Scope()
    loop = Scope(top, "loop")
    nested = Scope(loop, "inner")
    assert [s.domain for s in (top, loop, nested)] == [domain_for_depth(d) for d in range(3)]
    for d in range(3):
        domain = domain_for_depth(d)
        assert Spine(Antichain([domain.least])).domain is domain
        assert Spine(Antichain([domain.least]), domain=domain).domain is domain
    assert Spine(Antichain()).domain.total


@given(st.data())
def test_advancing_columns_agrees_with_advance_by(data: st.DataObject) -> None:
    """The vectorised advancer (a join's runs compacted in columns) gives, time by time,
    the generic lattice's ``advance_by``; a domain without columns has none."""
    domain, shape = data.draw(shaped())
    frontier = data.draw(time_lists(shape, max_size=4))
    times = data.draw(time_lists(shape, max_size=8))
    cols = domain.to_columns(times)
    if cols is None:
        assert domain.columns is None
        assert not frontier or domain.advance_columns(np.zeros(0, dtype=np.int64), frontier) is None
        return
    advanced = domain.advance_columns(cols, frontier)
    assert advanced is not None
    assert domain.from_columns(advanced) == [lattice.advance_by(t, frontier) for t in times]


@pytest.mark.parametrize("mode", kernels.MODES)
@pytest.mark.parametrize("d", range(3))
def test_the_domain_chooses_its_kernels_under_the_mode(d: int, mode: str) -> None:
    """Each kernel's threshold is the domain's; ``always`` and ``never`` force either path
    where the domain has kernels, and a domain without any never takes one."""
    domain = domain_for_depth(d)
    previous = kernels.set_mode(mode)
    try:
        for choose, least in (
            (domain.count_kernel, domain.count_kernel_min),
            (domain.join_kernel, domain.join_kernel_min),
        ):
            assert (least is None) == (not domain.kernels)
            for size in (0, 1, 255, 256, 1023, 1024, 10**6):
                want = least is not None and mode != "never" and (mode == "always" or size >= least)
                assert choose(size) == want, (choose, size)
    finally:
        kernels.set_mode(previous)
    assert (domain_for_depth(0).count_kernel_min, domain_for_depth(1).count_kernel_min) == (
        tuning.KERNEL_MIN,
        tuning.PAIR_KERNEL_MIN,
    )
    assert domain_for_depth(1).join_kernel_min == tuning.JOIN_KERNEL_MIN


@given(st.data())
def test_a_batch_made_with_its_domain_has_the_default_since(data: st.DataObject) -> None:
    """An operator that knows its times' domain gives a new batch's ``since`` from it
    (``least_since``, no time looked at): the same frontier the description finds from its
    lower frontier's times, empty lower frontiers (a closed input) included."""
    from deltaflow.framework.antichain import Antichain
    from deltaflow.framework.trace.description import Description, least_since

    domain, shape = data.draw(shaped())
    lower = Antichain(data.draw(time_lists(shape, max_size=3)))
    found = Description(lower, Antichain()).since
    assert least_since(lower, domain) == found
    assert Description(lower, Antichain(), least_since(lower, domain)) == Description(
        lower, Antichain()
    )
    odd = Antichain([Product(1, Product(2, 3))])
    assert least_since(odd, domain_of(odd.elements[0])) == Description(odd, Antichain()).since
