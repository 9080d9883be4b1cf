"""Cursors: navigate the merged view of several batches as ``key -> val -> history``.

A trace is a list of batches, and a key's updates may be spread over several of them. A
:class:`Cursor` presents them as one sorted, consolidated collection: keys in order, for each
key its values in order, and for each ``(key, val)`` its *history*, the ``(time, diff)`` pairs
sorted by time, with equal times from different batches summed and zeros dropped. Keys or values
whose updates cancel entirely are skipped.

Each batch keeps its own position; the current key is the least key at any position, and the
cursor gathers that key's updates from every batch when it arrives at it (so values and histories
of the current key are served from memory). Moves are forward only: :meth:`Cursor.seek_key` to a
key before the current one does not move back (use :meth:`Cursor.rewind_keys`).

Times are reported as stored: batches compacted to different ``since`` frontiers may report the
same update at different (equivalent) times. Accumulations at times beyond every batch's
``since`` are exact.

    >>> from deltaflow.framework.antichain import Antichain
    >>> from deltaflow.framework.trace import Batch, Description
    >>> d1 = Description(Antichain([0]), Antichain([1]))
    >>> d2 = Description(Antichain([1]), Antichain([2]))
    >>> b1 = Batch.from_updates([(1, "a", 0, 1), (2, "b", 0, 1)], d1)
    >>> b2 = Batch.from_updates([(2, "b", 1, -1), (2, "c", 1, 1)], d2)
    >>> c = Cursor([b1, b2])
    >>> c.seek_key(2)
    >>> c.key(), c.vals()
    (2, [('b', [(0, 1), (1, -1)]), ('c', [(1, 1)])])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..lattice import Time
from .order import lt, sort_values

if TYPE_CHECKING:
    from .batch import Batch

__all__ = ["Cursor"]

_MISSING: Any = object()


class Cursor:
    """A forward cursor over the merged, consolidated view of ``batches``.

    Args:
        batches: the batches to view together (any order; empty ones are ignored).

    Runtime complexity: moving to a key is O(b log n) for b batches of n updates, plus the size
    of that key's updates.

    >>> from deltaflow.framework.antichain import Antichain
    >>> from deltaflow.framework.trace import Batch, Description
    >>> d = Description(Antichain([0]), Antichain([1]))
    >>> b = Batch.from_updates([(1, (), 0, 1), (3, (), 0, 2)], d)
    >>> c = Cursor([b])
    >>> keys = []
    >>> while c.key_valid:
    ...     keys.append((c.key(), c.history()))
    ...     c.step_key()
    >>> keys
    [(1, [(0, 1)]), (3, [(0, 2)])]
    """

    __slots__ = ("_batches", "_ends", "_entries", "_key", "_key_valid", "_members", "_pos", "_vi")

    def __init__(self, batches: Iterable[Batch]) -> None:
        self._batches: list[Batch] = [b for b in batches if len(b)]
        self._pos: list[int] = [0] * len(self._batches)
        self._ends: list[int] = [0] * len(self._batches)
        self._members: list[int] = []
        self._key: Any = None
        self._key_valid = False
        self._entries: list[tuple[Any, list[tuple[Time, int]]]] = []
        self._vi = 0
        self._settle()

    # ------------------------------------------------------------------ keys

    @property
    def key_valid(self) -> bool:
        """True while the cursor is at a key (False once past the last one)."""
        return self._key_valid

    def key(self) -> Any:
        """The current key.

        Raises:
            ValueError: if the cursor is past the last key.
        """
        if not self._key_valid:
            msg = "cursor is past the last key; check key_valid before calling key()"
            raise ValueError(msg)
        return self._key

    def step_key(self) -> None:
        """Move to the next key (no-op past the end).

        Runtime complexity: O(b log n) plus the next key's updates.
        """
        if not self._key_valid:
            return
        pos, ends = self._pos, self._ends
        for i in self._members:
            pos[i] = ends[i]
        self._settle()

    def seek_key(self, key: Any) -> None:
        """Move forward to the first key that does not sort before ``key``.

        Runtime complexity: O(b log n) plus that key's updates.
        """
        pos = self._pos
        for i, b in enumerate(self._batches):
            pos[i] = b.seek(key, pos[i])
        self._settle()

    def rewind_keys(self) -> None:
        """Move back to the first key."""
        self._pos = [0] * len(self._batches)
        self._settle()

    # ------------------------------------------------------------------ values

    @property
    def val_valid(self) -> bool:
        """True while the cursor is at a value of the current key."""
        return self._vi < len(self._entries)

    def val(self) -> Any:
        """The current value of the current key.

        Raises:
            ValueError: if there is no current value.
        """
        if self._vi >= len(self._entries):
            msg = "cursor has no current value; check val_valid before calling val()"
            raise ValueError(msg)
        return self._entries[self._vi][0]

    def step_val(self) -> None:
        """Move to the next value of the current key."""
        if self._vi < len(self._entries):
            self._vi += 1

    def seek_val(self, val: Any) -> None:
        """Move forward to the first value of the current key not sorting before ``val``."""
        entries = self._entries
        vi = self._vi
        while vi < len(entries) and lt(entries[vi][0], val):
            vi += 1
        self._vi = vi

    def rewind_vals(self) -> None:
        """Move back to the first value of the current key."""
        self._vi = 0

    def history(self) -> list[tuple[Time, int]]:
        """The ``(time, diff)`` history of the current ``(key, val)``, sorted by time.

        Raises:
            ValueError: if there is no current value.
        """
        if self._vi >= len(self._entries):
            msg = "cursor has no current value; check val_valid before calling history()"
            raise ValueError(msg)
        return list(self._entries[self._vi][1])

    def vals(self) -> list[tuple[Any, list[tuple[Time, int]]]]:
        """Every ``(val, history)`` of the current key (empty past the last key)."""
        return [(v, list(h)) for v, h in self._entries]

    # ------------------------------------------------------------------ internals

    def _settle(self) -> None:
        """Find the least key at or after the positions whose updates do not all cancel."""
        batches, pos, ends = self._batches, self._pos, self._ends
        while True:
            best: Any = _MISSING
            members: list[int] = []
            for i, b in enumerate(batches):
                p = pos[i]
                if p >= len(b):
                    continue
                k = b.key_at(p)
                if best is _MISSING or lt(k, best):
                    best = k
                    members = [i]
                elif not lt(best, k):
                    members.append(i)
            if best is _MISSING:
                self._key_valid = False
                self._key = None
                self._members = []
                self._entries = []
                self._vi = 0
                return
            for i in members:
                ends[i] = batches[i].after(best, pos[i])
            entries = self._gather(members)
            if entries:
                self._key = best
                self._key_valid = True
                self._members = members
                self._entries = entries
                self._vi = 0
                return
            for i in members:
                pos[i] = ends[i]

    def _gather(self, members: list[int]) -> list[tuple[Any, list[tuple[Time, int]]]]:
        batches, pos, ends = self._batches, self._pos, self._ends
        if len(members) == 1:
            i = members[0]
            entries: list[tuple[Any, list[tuple[Time, int]]]] = []
            last: Any = _MISSING
            hist: list[tuple[Time, int]] = []
            for v, t, d in batches[i].rows(pos[i], ends[i]):
                if last is not _MISSING and v == last:
                    hist.append((t, d))
                else:
                    hist = [(t, d)]
                    entries.append((v, hist))
                    last = v
            return entries
        acc: dict[Any, dict[Time, int]] = {}
        for i in members:
            for v, t, d in batches[i].rows(pos[i], ends[i]):
                h = acc.get(v)
                if h is None:
                    acc[v] = {t: d}
                else:
                    h[t] = h.get(t, 0) + d
        vals = [v for v, h in acc.items() if any(h.values())]
        sort_values(vals)
        out = []
        for v in vals:
            hist = sorted((t, d) for t, d in acc[v].items() if d)
            out.append((v, hist))
        return out
