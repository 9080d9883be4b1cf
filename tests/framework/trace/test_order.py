"""The universal order of keys and values (``framework/trace/order.py``).

Batches sort with the natural ``<`` when it does not raise and fall back to ``ukey``; merges
and searches mix batches sorted either way, so the two must agree wherever both answer.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, strategies as st

from deltaflow.framework.hashing import stable_hash
from deltaflow.framework.lattice import Product
from deltaflow.framework.trace.order import lt, sort_values, ukey

leaves = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "b", b"x", None, 1.5]),
    st.builds(Product, st.integers(0, 2), st.integers(0, 2)),
)
values = st.recursive(
    leaves, lambda inner: st.tuples(inner) | st.tuples(inner, inner), max_leaves=5
)


@given(st.lists(values, max_size=10))
def test_natural_order_agrees_with_ukey(xs: list[Any]) -> None:
    """Wherever ``<`` answers it agrees with ``ukey``; ``lt`` is ``ukey``'s order."""
    for a in xs:
        for b in xs:
            try:
                natural = a < b
            except TypeError:
                natural = None
            by_key = ukey(a) < ukey(b)
            if natural is not None:
                assert natural == by_key, (a, b)
            assert lt(a, b) == by_key


@given(st.lists(values, max_size=10, unique_by=ukey))
def test_sort_values_is_the_universal_order(xs: list[Any]) -> None:
    got = list(xs)
    sort_values(got)
    assert got == sorted(xs, key=ukey)


def test_a_product_orders_and_equals_as_its_pair() -> None:
    """A product is a pair: it sorts among tuples by its coordinates and equals its tuple."""
    mixed = [(0, 1), Product(0, 0), (0, 0, 0), Product(0, 2)]
    assert (
        sorted(mixed)
        == sorted(mixed, key=ukey)
        == [Product(0, 0), (0, 0, 0), (0, 1), Product(0, 2)]
    )
    assert Product(1, 2) == (1, 2) and ukey(Product(1, 2)) == ukey((1, 2))
    assert stable_hash(Product(1, 2)) == stable_hash((1, 2))  # equal data, one owner
