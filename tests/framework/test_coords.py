"""The counted-frontier rule: a frontier kept by :func:`update_counted`, whether its counts are
few (exposure found by a scan) or many (found from the sorted positive times), is always the
set of minimal positive-count times, and both ways report the same moves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from deltaflow.framework.progress.coords import (
    Counts,
    check_counted,
    coords_le,
    update_counted,
)


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
