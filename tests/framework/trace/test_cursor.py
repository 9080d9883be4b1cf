"""Cursors over several batches against a naive merged, consolidated view."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.trace import Batch, Cursor, Description
from deltaflow.framework.trace.order import ukey


def desc(lo: int, hi: int) -> Description:
    return Description(Antichain([lo]), Antichain([hi]))


def naive_view(batches: list[list[tuple[Any, Any, int, int]]]) -> list[tuple[Any, list[Any]]]:
    """key -> [(val, [(time, diff)])], consolidated across batches, empty entries dropped."""
    acc: dict[Any, dict[Any, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for rows in batches:
        for k, v, t, d in rows:
            h = acc[k][v]
            h[t] = h.get(t, 0) + d
    out = []
    for k in sorted(acc, key=ukey):
        vals = []
        for v in sorted(acc[k], key=ukey):
            hist = sorted((t, d) for t, d in acc[k][v].items() if d)
            if hist:
                vals.append((v, hist))
        if vals:
            out.append((k, vals))
    return out


def walk(c: Cursor) -> list[tuple[Any, list[Any]]]:
    out = []
    while c.key_valid:
        vals = []
        while c.val_valid:
            vals.append((c.val(), c.history()))
            c.step_val()
        out.append((c.key(), vals))
        c.step_key()
    return out


keys = st.one_of(st.integers(0, 6), st.sampled_from(["a", "b", (1, 2)]))
rows = st.lists(
    st.tuples(
        keys, st.one_of(st.integers(0, 2), st.just("v")), st.integers(0, 2), st.integers(-1, 2)
    ),
    max_size=25,
)
int_rows = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 2), st.integers(-1, 2)),
    max_size=25,
)
batch_lists = st.lists(st.one_of(rows, int_rows), max_size=5)


def build(raw: list[list[tuple[Any, Any, int, int]]]) -> tuple[list[Batch], list[list[Any]]]:
    batches, shifted = [], []
    for i, rs in enumerate(raw):
        moved = [(k, v, 3 * i + t, d) for k, v, t, d in rs]
        batches.append(Batch.from_updates(moved, desc(3 * i, 3 * i + 3)))
        shifted.append(moved)
    return batches, shifted


@settings(max_examples=80, deadline=None)
@given(batch_lists)
def test_cursor_walk_matches_naive_view(raw: list[list[tuple[Any, Any, int, int]]]) -> None:
    """Walking keys, vals and histories gives the consolidated merge of all batches."""
    batches, shifted = build(raw)
    assert walk(Cursor(batches)) == naive_view(shifted)


def test_updates_cancelling_across_batches_are_skipped() -> None:
    """A key whose updates cancel across batches at equal times does not appear."""
    b1 = Batch.from_updates([(1, "x", 0, 1), (2, "y", 0, 1)], desc(0, 1))
    b2 = Batch.from_updates([(1, "x", 0, -1), (3, "z", 1, 1)], desc(1, 2))
    assert walk(Cursor([b1, b2])) == [(2, [("y", [(0, 1)])]), (3, [("z", [(1, 1)])])]


@settings(max_examples=80, deadline=None)
@given(batch_lists, st.lists(keys, max_size=4))
def test_seek_key_lands_on_first_key_not_before_target(
    raw: list[list[tuple[Any, Any, int, int]]], targets: list[Any]
) -> None:
    """seek_key moves forward to the first key >= target in the universal order."""
    batches, shifted = build(raw)
    view = naive_view(shifted)
    c = Cursor(batches)
    position = 0
    for target in sorted(targets, key=ukey):
        c.seek_key(target)
        while position < len(view) and ukey(view[position][0]) < ukey(target):
            position += 1
        if position < len(view):
            assert c.key_valid and c.key() == view[position][0]
            assert c.vals() == view[position][1]
        else:
            assert not c.key_valid
    c.rewind_keys()
    assert walk(c) == view


def test_seek_backwards_does_not_move() -> None:
    """Seeking to an earlier key leaves the cursor where it is (moves are forward only)."""
    b = Batch.from_updates([(k, 0, 0, 1) for k in (1, 4, 9)], desc(0, 1))
    c = Cursor([b])
    c.seek_key(5)
    assert c.key() == 9
    c.seek_key(2)
    assert c.key() == 9


def test_val_navigation() -> None:
    """seek_val, step_val and rewind_vals move among the current key's values."""
    b1 = Batch.from_updates([(1, v, 0, 1) for v in ("a", "c", "e")], desc(0, 1))
    b2 = Batch.from_updates([(1, "b", 1, 2), (1, "c", 1, 1)], desc(1, 2))
    c = Cursor([b1, b2])
    c.seek_val("bb")
    assert c.val() == "c" and c.history() == [(0, 1), (1, 1)]
    c.step_val()
    assert c.val() == "e"
    c.step_val()
    assert not c.val_valid
    with pytest.raises(ValueError, match="val_valid"):
        c.val()
    with pytest.raises(ValueError, match="val_valid"):
        c.history()
    c.rewind_vals()
    assert c.val() == "a"


def test_exhausted_cursor() -> None:
    """Past the last key, key() raises and stepping is a no-op; no batches means no keys."""
    c = Cursor([])
    assert not c.key_valid and not c.val_valid and c.vals() == []
    with pytest.raises(ValueError, match="key_valid"):
        c.key()
    c.step_key()
    assert not c.key_valid
