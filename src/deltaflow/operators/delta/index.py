"""Indexes: the one arrangement of a collection that delta queries read, shared by all of them.

A delta query keeps no intermediate collection: each of its rules looks the other inputs up as
of a time. What it looks up is an :class:`IndexStore` per worker: the collection's updates by
key (:class:`KeyRows`), each key's in three columns sorted by time (the total order of times)
and grouped by value beside. One store answers the three questions a prefix extender asks
(see :mod:`.lookup`): how many updates a key has as of a time (a bisection, so the count costs
``O(log n)`` however skewed the key), which values it has then (the columns up to that point:
``propose``) and whether it has a given value (one dict lookup more: ``validate``). So an
input read by one key costs one arrangement whatever uses it: three uses of ``edges`` read
two ways are two arrangements.

The :class:`IndexOperator` inserts each update as it drains it, before its input frontier has
passed its time. Readers never see too much: every lookup names the time it is made as of and
skips later updates; and they never see too little, because a reader waits until the index's
output frontier, which cannot pass a time while an update at it is still in the index's
mailbox, has passed the times it asks about.

Counts are of updates, not of distinct values, so they may overstate what a key offers (a
value inserted and retracted counts twice until compaction sums it away); they only decide
who proposes: proposals and validations read the values themselves and are exact.

History is compacted (:meth:`IndexStore.compact`, with int times): its readers say how far
back they may still look, and updates before that are summed at the time just before it.

    >>> store = IndexStore()
    >>> store.insert([("a", 1), ("a", 2)], [3, 4], [1, 1], lambda d: (d[0], d[1]))
    >>> store.count("a", 3, strict=False), store.count("a", 3, strict=True)
    (1, 0)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

from ...framework import tuning
from ..base import Interest, Operator
from ..durable import Changes

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ..base import OperatorContext
    from ..durable import StateSink, StateSource

__all__ = [
    "History",
    "IndexOperator",
    "IndexRegistry",
    "IndexStore",
    "KeyRows",
    "Reader",
    "Split",
    "updates_of",
]

Split = Callable[[Any], tuple[Hashable, Any]]
"""How an index splits a datum into ``(key, val)``."""

History: TypeAlias = "tuple[Time, int] | list[tuple[Time, int]]"
"""One value's updates under one key: its ``(time, diff)`` pair while it has one (the usual
case), a list of them once it has several. A tuple of atoms leaves the garbage collector's
tracking, so an index of sets adds no container per update for every full collection to
walk. :func:`updates_of` reads either as a list."""


def updates_of(hist: History) -> Sequence[tuple[Time, int]]:
    """``hist``'s ``(time, diff)`` pairs.

    >>> updates_of((3, 1)), updates_of([(3, 1), (4, -1)])
    (((3, 1),), [(3, 1), (4, -1)])
    """
    return (hist,) if hist.__class__ is tuple else hist  # type: ignore[return-value]


class KeyRows:
    """One key's updates: ``times``, ``vals`` and ``diffs`` in parallel, sorted by time (the
    total order), and ``by_val`` mapping each value to its :data:`History`.

    ``plain``: every diff is 1 and no value repeats (a set that only grew), so the values up
    to a time are the proposals themselves, with nothing to sum.

        >>> rows = KeyRows()
        >>> rows.add("x", 1, 1); rows.add("x", 2, -1); rows.add("y", 2, 1)
        >>> rows.by_val
        {'x': [(1, 1), (2, -1)], 'y': (2, 1)}
    """

    __slots__ = ("by_val", "diffs", "plain", "times", "vals")

    def __init__(self) -> None:
        self.times: list[Time] = []
        self.vals: list[Any] = []
        self.diffs: list[int] = []
        self.by_val: dict[Any, History] = {}
        self.plain = True

    def add(self, val: Any, t: Time, r: int) -> None:
        """Add one update, keeping the columns sorted by time (appended when in order)."""
        times = self.times
        if not times or not t < times[-1]:
            times.append(t)
            self.vals.append(val)
            self.diffs.append(r)
        else:
            i = bisect_right(times, t)
            times.insert(i, t)
            self.vals.insert(i, val)
            self.diffs.insert(i, r)
        by_val = self.by_val
        hist = by_val.get(val)
        if hist is None:
            by_val[val] = (t, r)
            if r != 1:
                self.plain = False
        else:
            if isinstance(hist, list):
                hist.append((t, r))
            else:
                by_val[val] = [hist, (t, r)]
            self.plain = False

    def advance(self, floor: int) -> int:
        """Move the updates at int times up to ``floor`` to ``floor``, summing each value's
        there and dropping zeros (no lookup as of a later time can tell the difference);
        returns how many updates that removed (none from a plain row: nothing cancels)."""
        if self.plain:
            return 0
        times = self.times
        i = bisect_right(times, floor)
        if i < 2 and not (i == 1 and self.diffs[0] == 0):
            return 0
        sums: dict[Any, int] = {}
        for v, d in zip(self.vals[:i], self.diffs[:i]):
            sums[v] = sums.get(v, 0) + d
        kept = [(v, d) for v, d in sums.items() if d]
        if len(kept) == i:
            return 0
        self.times = [*[floor] * len(kept), *times[i:]]
        self.vals = [v for v, _ in kept] + self.vals[i:]
        self.diffs = [d for _, d in kept] + self.diffs[i:]
        hists: dict[Any, list[tuple[Time, int]]] = {}
        for v, t, d in zip(self.vals, self.times, self.diffs):
            hists.setdefault(v, []).append((t, d))
        by_val: dict[Any, History] = {
            v: hist[0] if len(hist) == 1 else hist for v, hist in hists.items()
        }
        self.by_val = by_val
        self.plain = len(hists) == len(self.vals) and all(d == 1 for d in self.diffs)
        return i - len(kept)

    def upto(self, time: Time, strict: bool) -> int:
        """How many updates are at times before ``time`` (``strict``) or not after it."""
        times = self.times
        last = times[-1]
        if last < time or (not strict and last == time):
            return len(times)
        return bisect_left(times, time) if strict else bisect_right(times, time)


class Reader(Protocol):
    """An operator reading an :class:`IndexStore`."""

    def lowest(self) -> object:
        """The least time it may still look up as of: ``None`` if it never will again, any
        other object than a time if it cannot tell yet."""


class IndexStore:
    """One worker's part of an index: :class:`KeyRows` by key (see the module docstring)."""

    #: Compact once the store holds more updates than this, and then whenever it has doubled.
    COMPACT_ABOVE: ClassVar[int] = tuning.DELTA_COMPACT_ABOVE

    __slots__ = ("changes", "keys", "limit", "readers", "size")

    def __init__(self) -> None:
        self.keys: dict[Any, KeyRows] = {}
        self.size = 0
        #: The keys given updates since a checkpoint last took the store (compaction moves
        #: no update a lookup can still tell apart, so it is not a change).
        self.changes = Changes()
        #: The operators reading this store (each says how far back it may still look).
        self.readers: list[Reader] = []
        #: Compact once the store holds more updates than this (see :meth:`compact`).
        self.limit = self.COMPACT_ABOVE

    def insert(self, data: list[Any], times: list[Time], diffs: list[int], split: Split) -> None:
        """Add updates ``(data[i], times[i], diffs[i])``, each split into ``(key, val)``."""
        keys = self.keys
        changed = self.changes.keys
        for d, t, r in zip(data, times, diffs):
            key, val = split(d)
            rows = keys.get(key)
            if rows is None:
                rows = keys[key] = KeyRows()
            rows.add(val, t, r)
            if changed is not None:
                changed.add(key)
        self.size += len(data)

    def compact(self) -> None:
        """Sum away the history no reader can tell apart any more: with int times, every
        update before the least time any reader may still look up as of moves to the time
        just before it. Done when the store has doubled since the last time (amortised
        constant cost per update); product times are left as they are."""
        said = [reader.lowest() for reader in self.readers]
        holds = [h for h in said if isinstance(h, int)]
        if not said or len(holds) + said.count(None) < len(said):
            self.limit = max(
                self.COMPACT_ABOVE, 2 * self.size
            )  # a reader cannot tell yet, or times are products
            return
        floor = min(holds) - 1 if holds else None
        if floor is None:  # no lookups any more
            self.keys.clear()
            self.size = 0
        else:
            keys = self.keys
            for key in list(keys):
                rows = keys[key]
                self.size -= rows.advance(floor)
                if not rows.times:
                    del keys[key]
        self.limit = max(self.COMPACT_ABOVE, 2 * self.size)

    def count(self, key: Any, time: Time, strict: bool) -> int:
        """How many updates ``key`` has at times before ``time`` (``strict``) or not after it,
        in the total order of times.

        Runtime complexity: O(1) when all of them are, else O(log n).
        """
        rows = self.keys.get(key)
        return 0 if rows is None else rows.upto(time, strict)


def _rows(rows: KeyRows) -> list[tuple[Any, Time, int]]:
    return list(zip(rows.vals, rows.times, rows.diffs))


class IndexRegistry:
    """The stores of one index, one per worker, for the operators that read it.

    Operators are created in node order on every worker, so the index operator registers its
    store before any reader's factory asks for it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.stores: dict[int, IndexStore] = {}
        #: The index node's output (readers connect to it to follow its frontier).
        self.output: Any = None

    def store(self, worker: int) -> IndexStore:
        """The store on ``worker`` (made by the index operator's factory)."""
        return self.stores[worker]


class IndexOperator(Operator):
    """Insert every update it drains into its worker's :class:`IndexStore`; send nothing.

    Its output port carries no data: readers connect to it only to follow its frontier, which
    passes a time once every update at that time is in the store.
    """

    interest = Interest.NEVER
    reads_frontiers = False

    def __init__(self, name: str, store: IndexStore, split: Split) -> None:
        self.name = name
        self.store = store
        self.split = split

    def save(self, sink: StateSink) -> None:
        """Hand the store to a checkpoint (the keys given updates since the previous one)."""
        store = self.store
        sink.index("index", store.keys, ("val", "time", "diff"), store.changes.take(), rows=_rows)

    def load(self, source: StateSource) -> None:
        """Take this worker's share of a checkpoint's index back."""
        groups = source.index("index")
        if groups is None:
            return
        store = self.store
        store.changes.keys = set()
        keys = store.keys
        for key, rows in groups.items():
            kr = keys[key] = KeyRows()
            for val, t, r in rows:
                kr.add(val, t, r)
        store.size = len(groups)
        store.limit = max(store.COMPACT_ABOVE, 2 * store.size)

    def schedule(self, ctx: OperatorContext) -> None:
        """Insert what arrived."""
        store = self.store
        split = self.split
        for time, batch in ctx.messages(0):
            store.insert(batch.data, [time] * len(batch), batch.diffs, split)
        if store.size > store.limit:
            store.compact()
