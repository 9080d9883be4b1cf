"""The counted-frontier rule: a frontier kept by :func:`update_counted`, whether its counts are
few (exposure found by a scan) or many (found from the sorted positive times), is always the
set of minimal positive-count times, and both ways report the same moves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from deltaflow.framework.lattice import Product
from deltaflow.framework.progress.coords import (
    Counts,
    check_counted,
    coords_le,
    coords_reader,
    update_counted,
    update_total,
)
from deltaflow.framework.time_domain import domain_for_depth


def _minimal(counts: dict[Any, int]) -> set[Any]:
    positive = [t for t, c in counts.items() if c > 0]
    return {t for t in positive if not any(u != t and coords_le(u, t) for u in positive)}


def _changes(dims: int) -> Any:
    coords = st.tuples(*[st.integers(0, 6)] * dims)
    return st.lists(st.tuples(coords, st.sampled_from([1, 1, 2, -1, -1, -2])), max_size=120)


@settings(max_examples=300, deadline=None)
@given(dims=st.integers(1, 3), data=st.data())
def test_sorted_and_scanned_exposure_agree_with_the_minimal_times(dims: int, data: Any) -> None:
    changes = data.draw(_changes(dims))
    scanned, sorted_ = Counts(), Counts()
    sorted_.sorted_positive()  # kept sorted from the start, whatever its size
    f_scan: list[Any] = []
    f_sort: list[Any] = []
    for t, d in changes:
        moved_scan = update_counted(scanned, f_scan, t, d)
        moved_sort = update_counted(sorted_, f_sort, t, d)
        assert sorted(moved_scan or []) == sorted(moved_sort or [])
        assert set(f_scan) == set(f_sort) == _minimal(scanned)
        check_counted(scanned, f_scan, "scanned")
        check_counted(sorted_, f_sort, "sorted")
    assert dict(scanned) == dict(sorted_)


def test_counts_switch_to_sorted_past_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many times at one location: the sorted positive times appear on the first exposure
    after the counts grew past the threshold, and stay right as times come and go."""
    monkeypatch.setattr(Counts, "SORTED_AT", 4)
    counts, frontier = Counts(), []
    for outer in range(10):
        update_counted(counts, frontier, (outer, 0), 1)
    assert counts.positive is None and frontier == [(0, 0)]
    for outer in range(10):
        moved = update_counted(counts, frontier, (outer, 0), -1)
        assert counts.positive is not None
        want = [((outer, 0), -1)] + ([((outer + 1, 0), 1)] if outer < 9 else [])
        assert moved == want
        check_counted(counts, frontier, "drain")
    assert not counts and not frontier and not counts.positive


@settings(max_examples=300, deadline=None)
@given(changes=_changes(1), sorted_from_start=st.booleans())
def test_the_total_orders_rule_agrees_with_the_general_one(
    changes: list[Any], sorted_from_start: bool
) -> None:
    """update_total (a location of ints) moves its frontier exactly as update_counted does,
    whether its positive times are scanned or kept sorted."""
    general, total = Counts(), Counts()
    if sorted_from_start:
        total.sorted_positive()
    f_general: list[Any] = []
    f_total: list[Any] = []
    for t, d in changes:
        want = update_counted(general, f_general, t, d)
        got = update_total(total, f_total, t, d)
        assert got == want, (t, d)
        assert f_total == f_general
        check_counted(total, f_total, "total")
    assert dict(total) == dict(general)


def test_readers_take_only_their_domains_times() -> None:
    """A location's reader takes the times of its domain and names the location otherwise;
    Products are remembered under their coordinates."""
    memo: dict[Any, Any] = {}
    read = [coords_reader(domain_for_depth(d), memo, f"'op{d}' input 0") for d in range(4)]
    assert read[0](5) == (5,)
    assert read[1](Product(5, 2)) == (5, 2) and memo[(5, 2)] == Product(5, 2)
    deep = Product(Product(Product(1, 2), 3), 4)
    assert read[3](deep) == (1, 2, 3, 4) and memo[(1, 2, 3, 4)] is deep
    for d, bad in [
        (0, Product(5, 2)),
        (0, True),
        (1, 5),
        (1, Product(Product(1, 2), 3)),
        (1, Product(1, True)),
        (2, Product(1, 2)),
        (3, Product(Product(1, 2), 3)),
    ]:
        with pytest.raises(ValueError, match=f"progress times at 'op{d}' input 0 must be"):
            read[d](bad)
    anything = coords_reader(None, memo, "nowhere")
    assert anything(7) == (7,) and anything(deep) == (1, 2, 3, 4)
