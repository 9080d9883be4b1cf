"""Per-key update histories kept in memory by the operators that read them one key at a time.

A reduction reads, for each key it corrects, the key's whole input and output history; a join
reads, for each key of an arriving batch, the other side's updates of that key. In Python a dict
lookup is the cheapest way to do that, far cheaper than a search per trace batch, so an operator
that is the only reader of an arrangement keeps what it has received in a :class:`KeyedHistory`
and the arrangement keeps no trace (see :mod:`.arrange`).

Compaction follows the traces' rule (:mod:`deltaflow.framework.trace.merger`): advancing a time
to a frontier ``F`` with ``advance_by`` keeps every accumulation at times beyond ``F``, so once
only such times will be read, equal ``(val, advanced time)`` updates can be summed and zeros
dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from ...framework import tuning
from ...framework.durable.tables import append_rows
from ...framework.tuning import COMPACT_WRITTEN
from ..durable import Appended

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.time_domain import TimeDomain
    from ..durable import StateSink, StateSource

__all__ = ["COMPACT_WRITTEN", "AdvanceTo", "KeyedHistory"]


class AdvanceTo:
    """``advance_by`` to one frontier for the compactions of one round: the advancer of the
    owner's time domain (:meth:`TimeDomain.advancer`, written for the scope's shape of
    times), built when a compaction first asks for it (a round that compacts nothing builds
    none), and its results so far per time (``memo``).

    >>> from deltaflow.framework.time_domain import INT
    >>> a = AdvanceTo((3,), INT)
    >>> a.function()(1), a.memo
    (3, {})
    """

    __slots__ = ("_function", "domain", "frontier", "memo")

    def __init__(self, frontier: tuple[Time, ...], domain: TimeDomain) -> None:
        self.frontier = frontier
        self.domain = domain
        self.memo: dict[Time, Time] = {}
        self._function: Callable[[Time], Time] | None = None

    def function(self) -> Callable[[Time], Time]:
        """The advancer (built on the first call)."""
        function = self._function
        if function is None:
            function = self._function = self.domain.advancer(self.frontier)
        return function


def _may_cancel(rows: list[tuple[Any, Time, int]]) -> bool:
    """Whether compacting ``rows`` can free anything: only updates of one value can meet.

    A list whose values are all different keeps its length whatever its times become, so
    compacting it would cost a pass and free nothing (a key's edges, say).
    """
    n = len(rows)
    if n < 2:
        return False
    if rows[0][0] == rows[-1][0]:  # the usual answer for a reduction by self (every val ())
        return True
    return n > 2 and len({v for v, _, _ in rows}) < n


class KeyedHistory:
    """``{key: [(val, time, diff), ...]}`` kept in memory, compacted lazily.

    A reduction reads its own input and output histories one key at a time, a join the other
    side's updates of a key; here that is a dict lookup, where a trace costs a search per
    batch. A key's list only grows between compactions, and only lists holding some value
    twice are compacted (no other can shrink). :meth:`compacted` compacts a list longer than
    :data:`COMPACT_WRITTEN` as its reader meets it (to a frontier every time still to be read
    is beyond, so no accumulation that will be read changes; a list of distinct values, which
    cannot shrink, or one whose last compaction freed nothing, is looked at again once it has
    grown by that much), and :meth:`tidy`
    compacts all of them when the total has doubled since the last full pass, so the history
    of keys that are never touched again is bounded too, at amortised constant cost per
    update (the next full pass waits for the total to grow by a factor of twice the
    frontier's width, since advancing each time costs a join per frontier element). A full
    pass goes a slice of keys per call (:attr:`TIDY_SLICE` updates, or twice what was added
    since the previous call), each compacted to the frontier of that call. A history whose
    values are all ``()`` (``unit=True``: a counting reduction's input and output) sums per
    time alone. ``domain``: the owning operator's scope's time domain, whose advancer
    compacts the times.

    >>> from deltaflow.framework.time_domain import INT
    >>> h = KeyedHistory(domain=INT)
    >>> h.append("k", "v", 1, 1); h.append("k", "v", 2, -1)
    >>> h.tidy((3,), force=True); h.rows, h.size
    ({}, 0)
    """

    #: Compact all of the history once it holds more than this many updates (and twice as
    #: many as after the last such compaction).
    COMPACT_ALL_WRITTEN: ClassVar[int] = tuning.COMPACT_ALL_WRITTEN
    #: Updates a full compaction pass goes through per :meth:`tidy` call at least (more
    #: when the history grew faster than that since the previous call): a pass is spread
    #: over activations instead of stalling one round for all of the history.
    TIDY_SLICE: ClassVar[int] = tuning.TIDY_SLICE

    __slots__ = (
        "_kept", "_retry", "_seen", "_sweep", "compact_above", "domain", "limit", "log", "rows",
        "size", "unit",
    )  # fmt: skip

    def __init__(
        self, compact_above: int | None = None, *, domain: TimeDomain, unit: bool = False
    ) -> None:
        self.domain = domain
        self.rows: dict[Any, list[tuple[Any, Time, int]]] = {}
        self.size = 0
        self.limit = self.COMPACT_ALL_WRITTEN
        # How long a key's list may get before :meth:`compacted` compacts it (None: the default,
        # COMPACT_WRITTEN, read when called so that it can be changed).
        self.compact_above = compact_above
        # Every value is ``()`` (the arrangement of a reduction by self, and its output):
        # compaction then sums per time alone.
        self.unit = unit
        # The keys a full pass under way has still to go through (None: no pass under way),
        # how many updates the keys it went through kept, and the size at the end of the
        # previous ``tidy`` call.
        self._sweep: list[Any] | None = None
        self._kept = 0
        self._seen = 0
        # Keys whose list a read found holding distinct values only (no compaction can
        # shrink it until it grows), with the length it must reach before a read looks again.
        self._retry: dict[Any, int] = {}
        #: The rows appended since a checkpoint last took the history (see :mod:`.durable`;
        #: compaction changes no accumulation that can still be read, so it is not logged).
        self.log = Appended()

    @property
    def sweeping(self) -> bool:
        """Whether a full compaction pass is under way (:meth:`tidy` has keys left)."""
        return self._sweep is not None

    def long(self) -> int:
        """How long a key's list may get before :meth:`compacted` compacts it."""
        return COMPACT_WRITTEN if self.compact_above is None else self.compact_above

    def append(self, key: Any, val: Any, time: Time, diff: int) -> None:
        """Add one update of ``key``."""
        row = (val, time, diff)
        rows = self.rows.get(key)
        if rows is None:
            self.rows[key] = [row]
        else:
            rows.append(row)
        self.size += 1
        log = self.log
        if log.keys is not None:
            log.add(key, row)
            log.bound(self.size)

    def extend_at(self, time: Time, rows: list[tuple[Any, Any, int]]) -> None:
        """Add ``(key, val, diff)`` updates, all at ``time`` (a reduction's corrections).

        >>> from deltaflow.framework.time_domain import INT
        >>> h = KeyedHistory(domain=INT)
        >>> h.extend_at(3, [("k", "v", 1), ("l", "w", -1)])
        >>> h.rows, h.size
        ({'k': [('v', 3, 1)], 'l': [('w', 3, -1)]}, 2)
        """
        if self.log.keys is not None:
            self._extend_logged([r[0] for r in rows], [(val, time, diff) for _, val, diff in rows])
            return
        rows_of = self.rows
        for key, val, diff in rows:
            have = rows_of.get(key)
            if have is None:
                rows_of[key] = [(val, time, diff)]
            else:
                have.append((val, time, diff))
        self.size += len(rows)

    def extend(self, updates: Iterable[tuple[Any, Any, Time, int]], batch: Any = None) -> None:
        """Add ``(key, val, time, diff)`` updates (``batch``: the batch they are, all of its
        updates in order, logged as itself)."""
        if batch is None and self.log.keys is not None:
            self._extend_logged(*_keys_and_rows(updates))
            return
        rows_of = self.rows
        n = 0
        for key, val, time, diff in updates:
            rows = rows_of.get(key)
            if rows is None:
                rows_of[key] = [(val, time, diff)]
            else:
                rows.append((val, time, diff))
            n += 1
        self._added(n, batch)

    def extend_grouped(
        self,
        groups: list[tuple[Any, list[tuple[Any, Time, int]]]],
        *,
        owned: bool = False,
        batch: Any = None,
    ) -> None:
        """Add updates already grouped by distinct keys, ``(key, [(val, time, diff), ...])``
        (a batch's ``iter_keys``, which a join has read anyway): a step per key instead of a
        tuple per update. A key new here gets a copy of its list, or, with ``owned`` (nobody
        else holds the lists), the list itself. ``batch``: the batch the groups are, all of
        its updates (logged as itself).

        >>> from deltaflow.framework.time_domain import INT
        >>> h = KeyedHistory(domain=INT)
        >>> h.extend_grouped([("k", [("v", 1, 1)]), ("l", [("w", 2, -1)])], owned=True)
        >>> h.extend_grouped([("k", [("u", 3, 1)])])
        >>> h.rows, h.size
        ({'k': [('v', 1, 1), ('u', 3, 1)], 'l': [('w', 2, -1)]}, 3)
        """
        rows_of = self.rows
        log = self.log
        logged = log.keys
        if logged is not None:
            if batch is not None:
                log.add_batch(batch)
            else:
                logged_rows = log.rows
                for key, rows in groups:
                    logged += [key] * len(rows)
                    logged_rows += rows
        if owned and not rows_of:
            rows_of.update(groups)
            self.size += sum(len(rows) for _, rows in groups)
            log.bound(self.size)
            return
        n = 0
        for key, rows in groups:
            n += len(rows)
            have = rows_of.get(key)
            if have is not None:
                have.extend(rows)
            elif owned:
                rows_of[key] = rows
            else:
                rows_of[key] = rows.copy()
        self.size += n
        log.bound(self.size)

    def extend_noting_times(
        self,
        updates: Iterable[tuple[Any, Any, Time, int]],
        times_of: dict[Any, list[Time]],
        batch: Any = None,
    ) -> None:
        """:meth:`extend`, also appending each update's time to ``times_of[key]`` (in the
        same pass: a reduction notes the new times of each key as it stores them).

        >>> from deltaflow.framework.time_domain import INT
        >>> h, times = KeyedHistory(domain=INT), {}
        >>> h.extend_noting_times([("k", "v", 1, 1), ("k", "w", 2, 1)], times)
        >>> h.rows, times, h.size
        ({'k': [('v', 1, 1), ('w', 2, 1)]}, {'k': [1, 2]}, 2)
        """
        if batch is None and self.log.keys is not None:
            keys, logged = _keys_and_rows(updates)
            self._extend_logged(keys, logged)
            for key, (_, time, _) in zip(keys, logged):
                times = times_of.get(key)
                if times is None:
                    times_of[key] = [time]
                else:
                    times.append(time)
            return
        rows_of = self.rows
        n = 0
        for key, val, time, diff in updates:
            rows = rows_of.get(key)
            if rows is None:
                rows_of[key] = [(val, time, diff)]
            else:
                rows.append((val, time, diff))
            times = times_of.get(key)
            if times is None:
                times_of[key] = [time]
            else:
                times.append(time)
            n += 1
        self._added(n, batch)

    def _added(self, n: int, batch: Any) -> None:
        """``n`` updates were added, the whole of ``batch`` (``None``: not logged)."""
        self.size += n
        log = self.log
        if log.keys is not None:
            log.add_batch(batch)
            log.bound(self.size)

    def _extend_logged(self, keys: list[Any], rows: list[tuple[Any, Time, int]]) -> None:
        """Add ``rows[i]`` to ``keys[i]``'s list, each also noted in the log (the same row
        objects: the log holds no copy), while a checkpoint logs the updates one by one."""
        append_rows(self.rows, keys, rows)
        log = self.log
        assert log.keys is not None
        log.keys += keys
        log.rows += rows
        self.size += len(keys)
        log.bound(self.size)

    def compacted(
        self, key: Any, rows: list[tuple[Any, Time, int]], advance: AdvanceTo
    ) -> list[tuple[Any, Time, int]]:
        """``key``'s ``rows`` (a list longer than :meth:`long`, just looked up by the caller),
        compacted with ``advance`` if they may cancel (one ``advance`` serves many calls).

        >>> from deltaflow.framework.time_domain import INT
        >>> h = KeyedHistory(1, domain=INT)
        >>> h.append("k", "v", 1, 1); h.append("k", "v", 2, -1)
        >>> h.compacted("k", h.rows["k"], AdvanceTo((3,), INT)), h.size
        ([], 0)
        """
        n = len(rows)
        retry = self._retry
        if retry and n < retry.get(key, 0):
            return rows
        if not _may_cancel(rows):
            retry[key] = n + self.long()
            return rows
        if retry:
            retry.pop(key, None)
        if self._compact(key, rows, advance) == n:
            # Nothing met: in a loop, a key's updates at distinct rounds stay apart whatever
            # the outer frontier, so try again only once the list has grown.
            retry[key] = n + self.long()
            return rows
        return self.rows.get(key, [])

    def tidy(self, frontier: tuple[Time, ...], *, force: bool = False) -> None:
        """Go on with a full compaction pass to ``frontier``: started once the total passed
        the limit, a slice of keys per call (all of them at once with ``force``).

        With an empty frontier nothing can be evaluated any more and everything is dropped.

        Runtime complexity: O(1) when no pass is under way; else O(s) for the slice's s
        updates (at least :attr:`TIDY_SLICE`, at least twice the growth since the last
        call), plus O(k) for the k keys when a pass starts.
        """
        if not frontier:
            if self.rows:
                self.rows.clear()
                self._retry.clear()
                self.size = self._seen = 0
                self._sweep = None
                self.limit = self.COMPACT_ALL_WRITTEN
                self.log.forget()  # (the rows logged are gone too: taken whole, it is empty)
            return
        sweep = self._sweep
        if sweep is None:
            if not force and self.size <= self.limit:
                self._seen = self.size
                return
            sweep = self._sweep = list(self.rows)
            self._kept = 0
        budget = 1 << 62 if force else max(self.TIDY_SLICE, 2 * (self.size - self._seen))
        advance = AdvanceTo(frontier, self.domain)
        rows_of = self.rows
        while sweep and budget > 0:
            key = sweep.pop()
            rows = rows_of.get(key)
            if rows is not None:
                n = len(rows)
                budget -= n
                if _may_cancel(rows):
                    n = self._compact(key, rows, advance)
                self._kept += n
        if not sweep:
            self._sweep = None
            # The next pass waits for the history to double what this pass left (what came
            # in while it went on is not counted). Advancing a time costs a join per frontier
            # element: with many rounds in flight (a wide frontier) wait proportionally
            # longer, keeping the cost per update constant.
            self.limit = self.COMPACT_ALL_WRITTEN + 2 * self._kept * len(frontier)
        self._seen = self.size

    def _compact(
        self,
        key: Any,
        rows: list[tuple[Any, Time, int]],
        advance: AdvanceTo,
    ) -> int:
        """Advance a key's rows with ``advance`` (``advance_by`` to the frontier) and
        consolidate them; returns how many updates the key keeps.

        A history of unit values (``unit``) sums per time alone, without a ``(val, time)``
        pair per row.
        """
        merged: list[tuple[Any, Time, int]]
        advanced = advance.memo
        advance_time = advance.function()
        if self.unit:
            per_time: dict[Time, int] = {}
            get_time = per_time.get
            for _, t, d in rows:
                a = advanced.get(t)
                if a is None:
                    a = advanced[t] = advance_time(t)
                per_time[a] = get_time(a, 0) + d
            if len(per_time) == len(rows):
                return len(rows)  # nothing met (no diff is zero): the list stays as it is
            merged = [((), t, d) for t, d in per_time.items() if d]
        else:
            acc: dict[tuple[Any, Time], int] = {}
            get = acc.get
            for v, t, d in rows:
                a = advanced.get(t)
                if a is None:
                    a = advanced[t] = advance_time(t)
                vt = (v, a)
                acc[vt] = get(vt, 0) + d
            if len(acc) == len(rows):
                return len(rows)
            merged = [(v, t, d) for (v, t), d in acc.items() if d]
        self.size += len(merged) - len(rows)
        if merged:
            self.rows[key] = merged
        else:
            del self.rows[key]
            self._retry.pop(key, None)
        return len(merged)

    #: The columns of a key's rows in a checkpoint.
    COLUMNS: ClassVar[tuple[str, str, str]] = ("val", "time", "diff")

    def save(self, sink: StateSink, name: str) -> None:
        """Hand the history to a checkpoint as the history ``name`` (the rows appended since
        the previous checkpoint, when they are logged; see :mod:`.durable`)."""
        sink.history(name, self.rows, self.COLUMNS, self.log.take(), self.size, domain=self.domain)

    def load(self, source: StateSource, name: str) -> None:
        """Take this worker's share of the history ``name`` back from a checkpoint, and log
        what is appended from now on (the next checkpoint may write only that)."""
        rows = source.history(name)
        if rows is None:
            return
        self.log.take()  # appends from here on make the next checkpoint
        if not rows:
            return
        self.rows = rows
        self.size = sum(map(len, rows.values()))
        self._seen = self.size

    def check(self) -> None:
        """Assert the invariants (no empty list, no zero diff, the size is the total)."""
        for rows in self.rows.values():
            assert rows and all(d for _, _, d in rows)
        assert self.size == sum(map(len, self.rows.values()))


def _keys_and_rows(
    updates: Iterable[tuple[Any, Any, Time, int]],
) -> tuple[list[Any], list[tuple[Any, Time, int]]]:
    """``(key, val, time, diff)`` updates as a column of keys and one of ``(val, time,
    diff)`` rows."""
    listed = updates if isinstance(updates, list) else list(updates)
    return [u[0] for u in listed], [u[1:] for u in listed]
