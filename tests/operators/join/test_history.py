"""KeyedHistory compaction against brute force: every accumulation beyond the frontier stays.

Compaction advances each update's time to the frontier and sums equal ``(val, time)`` pairs
(or equal times alone, for a history of unit values). Whatever it does, the accumulation of
every key at every time beyond the frontier must be what the raw updates give there.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st
from tests.strategies import SHAPES, antichains, data_values, time_lists, update_lists

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, join
from deltaflow.framework.time_domain import INT, PAIR, domain_of
from deltaflow.operators.join import history as history_module
from deltaflow.operators.join.history import AdvanceTo, KeyedHistory
from deltaflow.testing import accumulate

KEYS = st.sampled_from(["k", "l"])


def _beyond(frontier: Antichain, probes: list[Time]) -> list[Time]:
    """Probe times joined with every frontier element, so that all are beyond it."""
    out = []
    for p in probes:
        for f in frontier.elements:
            out.append(join(p, f))
    return out


@st.composite
def _case(draw: st.DrawFn, unit: bool) -> tuple[list[Any], Antichain, list[Time]]:
    shape = draw(st.sampled_from(SHAPES))
    vals = st.just(()) if unit else data_values()
    updates = draw(update_lists(shape, data=st.tuples(KEYS, vals), max_size=24))
    frontier = draw(antichains(shape, max_size=3).filter(bool))
    probes = draw(time_lists(shape, min_size=1, max_size=6))
    return updates, frontier, _beyond(frontier, probes)


def _check(updates: list[Any], frontier: Antichain, probes: list[Time], unit: bool) -> None:
    # The domain of the scope the times are of (each shape's advancer compacts them).
    history = KeyedHistory(unit=unit, domain=domain_of(frontier.elements[0]))
    history.extend((k, v, t, d) for (k, v), t, d in updates)
    raw = {key: list(rows) for key, rows in history.rows.items()}
    history.tidy(frontier.elements, force=True)
    history.check()
    for key in raw:
        kept = history.rows.get(key, [])
        assert len(kept) <= len(raw[key])
        for at in probes:
            assert accumulate(kept, at) == accumulate(raw[key], at), (key, at)


@given(_case(unit=False))
def test_compaction_keeps_every_accumulation_beyond_the_frontier(
    case: tuple[list[Any], Antichain, list[Time]],
) -> None:
    _check(*case, unit=False)


@given(_case(unit=True))
def test_compaction_of_unit_values_keeps_every_accumulation_beyond_the_frontier(
    case: tuple[list[Any], Antichain, list[Time]],
) -> None:
    _check(*case, unit=True)


def test_compaction_of_unit_values_sums_per_time() -> None:
    """Updates of one key meeting at one advanced time become one row."""
    history = KeyedHistory(unit=True, domain=PAIR)
    for t, d in [(Product(0, 1), 1), (Product(1, 1), 1), (Product(1, 2), -1), (Product(2, 0), 1)]:
        history.append("k", (), t, d)
    history.tidy((Product(2, 0),), force=True)
    assert sorted(history.rows["k"]) == [
        ((), Product(2, 0), 1),
        ((), Product(2, 1), 2),
        ((), Product(2, 2), -1),
    ]
    assert history.size == 3


class _CountingHistory(KeyedHistory):
    """A history that counts the updates its compactions go through."""

    __slots__ = ("compacted_rows",)

    def __init__(self) -> None:
        super().__init__(domain=INT)
        self.compacted_rows = 0

    def _compact(self, key: Any, rows: Any, advance: Any) -> int:
        self.compacted_rows += len(rows)
        return super()._compact(key, rows, advance)


def test_a_full_pass_goes_a_slice_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys touched once (+1, then -1 a round later) and never again: full passes drop them,
    a slice of keys per call (so no call stalls for the whole history), the history stays
    bounded, and nothing that will still be read changes."""
    monkeypatch.setattr(history_module.KeyedHistory, "COMPACT_ALL_WRITTEN", 16)
    monkeypatch.setattr(history_module.KeyedHistory, "TIDY_SLICE", 6)
    history = _CountingHistory()
    sizes, per_call = [], []
    for t in range(300):
        history.append(f"k{t}", "v", t, 1)
        if t:
            history.append(f"k{t - 1}", "v", t, -1)
        before = history.compacted_rows
        history.tidy((t + 1,))
        per_call.append(history.compacted_rows - before)
        sizes.append(history.size)
        history.check()
        assert accumulate(history.rows.get(f"k{t}", []), t + 1) == {"v": 1}
    # Each call: at least the slice, at least twice the growth (2 a round), one list over.
    assert max(per_call) <= 6 + 2
    assert sum(1 for n in per_call if n) > 10  # passes spread over calls, again and again
    assert max(sizes) <= 16 + 6  # the limit, plus what comes in while a pass goes on


def test_a_list_of_distinct_values_is_looked_at_again_once_grown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key's long list whose values are all different cannot shrink until it grows, so reads
    do not go through it again (a pass each, for nothing) until it has grown by the read
    threshold; then it is compacted as usual."""
    looked: list[int] = []
    may_cancel = history_module._may_cancel

    def counting(rows: Any) -> bool:
        looked.append(len(rows))
        return may_cancel(rows)

    monkeypatch.setattr(history_module, "_may_cancel", counting)
    history = KeyedHistory(domain=INT)
    long = history.long()
    for t in range(long + 1):
        history.append("k", f"v{t}", t, 1)
    history.compacted("k", history.rows["k"], AdvanceTo((0,), INT))
    assert looked == [long + 1]
    history.append("k", "v0", long + 1, -1)  # it could shrink now, at a later frontier
    history.compacted("k", history.rows["k"], AdvanceTo((100,), INT))
    assert looked == [long + 1]  # not grown enough to look again
    for t in range(long + 2, 2 * long + 1):
        history.append("k", f"w{t}", t, 1)
    history.compacted("k", history.rows["k"], AdvanceTo((100,), INT))
    assert looked == [long + 1, 2 * long + 1]
    assert len(history.rows["k"]) == 2 * long - 1  # v0's +1 and -1 met at 100 and cancelled
    assert ("v0", 100, 1) not in history.rows["k"]
    history.check()


@given(
    batches=st.lists(
        update_lists("product", data=st.tuples(KEYS, data_values()), max_size=12),
        max_size=4,
    ),
    owned=st.booleans(),
)
def test_extend_grouped_matches_extend(batches: list[list[Any]], owned: bool) -> None:
    """Batches added grouped by key (as a join adds the batch it has read) leave the same
    lists, in the same order, as added update by update; unowned lists are not taken."""
    plain, grouped = KeyedHistory(domain=PAIR), KeyedHistory(domain=PAIR)
    given_lists = []
    for batch in batches:
        plain.extend((k, v, t, d) for (k, v), t, d in batch)
        groups: dict[Any, list[Any]] = {}
        for (k, v), t, d in batch:
            groups.setdefault(k, []).append((v, t, d))
        items = list(groups.items())
        given_lists.extend(rows for _, rows in items)
        grouped.extend_grouped(items, owned=owned)
    assert grouped.rows == plain.rows
    assert grouped.size == plain.size
    grouped.check()
    if not owned:
        kept = {id(rows) for rows in grouped.rows.values()}
        assert not kept & {id(rows) for rows in given_lists}


@given(
    batches=st.lists(
        st.tuples(
            st.sampled_from(["extend", "extend_at", "noting"]),
            update_lists("product", data=st.tuples(KEYS, data_values()), max_size=12),
        ),
        max_size=5,
    ),
    logged=st.booleans(),
)
def test_every_way_of_adding_keeps_and_logs_the_same(
    batches: list[tuple[str, list[Any]]], logged: bool
) -> None:
    """Updates added by ``extend``, ``extend_at`` (one time per call) or
    ``extend_noting_times``, whether a checkpoint logs them or not, leave the lists an
    update-by-update ``append`` leaves; the log holds each added row (the very object the
    list holds), in order; the times noted are those of each key's updates."""
    history, reference = KeyedHistory(domain=PAIR), KeyedHistory(domain=PAIR)
    if logged:
        assert history.log.take() is None  # the first take is whole; log from here on
    added: list[tuple[Any, Any, Time, int]] = []
    noted: dict[Any, list[Time]] = {}
    expected: dict[Any, list[Time]] = {}
    for how, batch in batches:
        updates = [(k, v, t, d) for (k, v), t, d in batch]
        if how == "extend_at":
            if not updates:
                continue
            time = updates[0][2]
            updates = [(k, v, time, d) for k, v, _, d in updates]
            history.extend_at(time, [(k, v, d) for k, v, _, d in updates])
        elif how == "noting":
            history.extend_noting_times(iter(updates), noted)
            for k, _, t, _ in updates:
                expected.setdefault(k, []).append(t)
        else:
            history.extend(iter(updates))
        for update in updates:
            reference.append(*update)
        added += updates
    assert history.rows == reference.rows
    assert history.size == reference.size == len(added)
    assert noted == expected
    held = {id(row) for rows in history.rows.values() for row in rows}
    logged_rows = list(history.log.rows)
    taken = history.log.take()
    if not logged:
        assert taken is None
        return
    assert taken is not None
    keys, vals, times, diffs = taken
    assert list(zip(keys, vals, times, diffs)) == added
    assert len(logged_rows) == len(added)
    assert all(id(row) in held for row in logged_rows)
