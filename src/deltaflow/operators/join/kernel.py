"""The join of a batch with the other side's updates over int columns, with numpy.

A join pairs every update ``(k, a, t1, r1)`` of an arriving batch with every update
``(k, b, t2, r2)`` of the other side, making ``(logic(k, a, b), join(t1, t2), r1 * r2)``
(:mod:`.operator`). When the keys are ints or pairs of ints (packed into one int64 code) and
the times ints or ``Product`` of two ints, the pairs are found for a whole batch at once:
the other side's keys sorted (:class:`SortedRuns`), ``np.searchsorted`` gives each arriving
key's run of matches, and ``np.repeat`` spells the pairs out; the times join as a vectorised
maximum and the diffs multiply as arrays. Only ``logic`` runs per pair (it is the user's
Python), mapped over the gathered columns, and the output is summed per time and datum by C
loops (``Counter``) when every diff of a time is the same, as in a load.

Whether a batch takes this path is chosen once per batch (:func:`columns_of`, by the one
reader of int columns, :mod:`deltaflow.framework.trace.ints`: its key, time and diff columns
convert to int arrays or it keeps the row path), never per update.

    >>> from deltaflow.operators.arrange import RawBatch
    >>> from deltaflow.framework.time_domain import INT
    >>> arriving = columns_of(RawBatch([1, 2, 2], ["a", "b", "c"], [5, 5, 6], [1, 1, -1]), INT)
    >>> other = SortedRuns(domain=INT)
    >>> other.add(RawBatch([2, 3], ["x", "y"], [7, 0], [2, 1]))
    >>> runs = other.runs()
    >>> pairs, end = pair_up(arriving, runs, 0, budget=100)
    >>> end, list(joined(pairs, arriving, runs, lambda k, a, b: (k, a, b), True, False))
    (3, [(7, [(2, 'b', 'x'), (2, 'c', 'x')], [2, -2])])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ...framework import tuning
from ...framework.lattice import Product
from ...framework.trace.batch import Batch
from ...framework.trace.codec import as_int64
from ...framework.trace.columns import sort_consolidate_int
from ...framework.trace.ints import Columns, gather, read_columns, unpack_pairs
from ...framework.tuning import (
    PAIRS_PER_ROW,
    RUNS_FEW_KEYS as _FEW_KEYS,
)
from .lookup import RunView, codes_of, lookup_run, values_of

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.time_domain import TimeDomain
    from ..arrange import RawBatch

__all__ = [
    "PAIRS_PER_ROW", "Columns", "SortedRuns", "columns_of", "count_pairs",
    "joined", "pair_up",
]  # fmt: skip

_DIFF_BOUND = 1 << 31
"""Diffs of at most this size multiply in int64 without overflow (checked per batch)."""


def columns_of(batch: Batch | RawBatch, domain: TimeDomain) -> Columns | None:
    """The batch as :class:`~deltaflow.framework.trace.ints.Columns` when its keys are ints
    or pairs of ints, its times in ``domain``'s columns (the join's scope's: ints or
    ``Product`` of two ints) and its diffs small (their products fit in 64 bits); None
    otherwise (it keeps the row path).

    >>> from deltaflow.operators.arrange import RawBatch
    >>> from deltaflow.framework.time_domain import INT
    >>> columns_of(RawBatch(["a"], None, [0], [1]), INT) is None
    True
    """
    if not domain.columns:
        return None
    cols = read_columns(batch, domain=domain)
    if cols is None or int(np.abs(cols.diffs).max()) >= _DIFF_BOUND:
        return None
    return cols


def _concat(parts: list[Any]) -> Any:
    if parts[0] is None:
        return None  # (all are: :func:`_merge` checks)
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    out: list[Any] = []
    for p in parts:
        out.extend(p.tolist() if isinstance(p, np.ndarray) else p)
    return out


def _merge(parts: list[Columns]) -> Columns | None:
    """Several runs as one, sorted by key (stably: within a key, in the order given)."""
    if len({p.times.ndim for p in parts}) != 1:
        return None
    vals = [p.vals for p in parts]
    if len({v is None for v in vals}) != 1:
        return None
    objs = [p.objs for p in parts]
    if len({o is None for o in objs}) != 1:
        return None  # int keys and pair keys never meet
    whole = Columns(
        np.concatenate([p.keys for p in parts]),
        _concat(vals),
        np.concatenate([p.times for p in parts]),
        np.concatenate([p.diffs for p in parts]),
        _concat(objs),
    )
    order = np.argsort(whole.keys, kind="stable")
    return whole.take(order)


@attrs.define(slots=True, eq=False)
class SortedRuns:
    """The updates a join keeps of one side, as key-sorted column runs: beside its
    :class:`~.history.KeyedHistory` of them, or (``alone``) instead of it.

    Batches are noted as they are stored (:meth:`add`) and turned into columns when a reader
    first needs them (:meth:`runs`): a run per read, merged with the previous one once it is
    at least half as long (so each update is re-sorted O(log n) times).

    Beside a history, the runs hold the same updates while :attr:`size` equals its size; the
    history only shrinks otherwise (compaction), and a batch without int columns cannot join
    the runs: then the runs are given up (:meth:`drop`) and that side's partners keep the row
    path. Batches waiting to be read are bounded (:attr:`MAX_PENDING`): a side fed many
    small batches never reads through the kernel and gives up rather than hold them.

    ``alone``, the runs are the side's only copy: a row-path reader looks keys up in them
    (:meth:`lookup_many`), they are compacted by :meth:`tidy`, and whatever they cannot hold
    or do (a batch without int columns, values that are not ints to compact) leaves them
    ``valid`` no more, everything still held, for the owner to build its history from
    (:meth:`updates`) and go on with that. Small batches (:attr:`MAX_RECENT` updates
    together) wait indexed by key in a dict, where a look-up finds them without converting
    them, so that a side read key by key costs per look-up a binary search per run (their
    number grows as the log of the side) and nothing that grows with the side; larger ones
    are converted at the next read, and batches waiting beyond :attr:`MAX_PENDING` are
    converted at once.

    The kernel reads the runs as they are: unlike the row path it does not compact a key's
    long list as it meets it (beside a history, the history's full passes still compact, and
    the runs are then given up).

    :attr:`touched` counts the updates converted, merged, compacted or listed whole
    (:meth:`updates`) so far: the work that grows with the side, which a reader looking up a
    few keys must not cause (look-ups count only the updates they find).

    >>> from deltaflow.operators.arrange import RawBatch
    >>> from deltaflow.framework.time_domain import INT
    >>> side = SortedRuns(alone=True, domain=INT)
    >>> side.add(RawBatch([4, 2, 4], [1, 2, 1], [0, 1, 2], [1, 1, -1]))
    >>> side.lookup_many([4, 3])
    {4: [(1, 0, 1), (1, 2, -1)]}
    >>> side.tidy((5,), force=True), side.size, sorted(side.updates())
    (True, 1, [(2, 2, 5, 1)])
    """

    #: Batches noted but not yet read beyond which the runs are given up (``alone``:
    #: converted, unless they wait indexed by key: see :attr:`MAX_RECENT`).
    MAX_PENDING = tuning.RUNS_MAX_PENDING
    #: Updates of batches waiting (``alone``) that are held indexed by key for look-ups
    #: rather than converted at the next read: a conversion and its merges cost numpy's
    #: fixed cost per call, which single-update rounds would pay at every read. (No more
    #: than :attr:`COMPACT_ABOVE` or than the runs hold: what waits is not compacted.)
    MAX_RECENT = tuning.RUNS_MAX_RECENT
    #: Updates held beyond which :meth:`tidy` checks that the runs can be compacted (then
    #: twice as many): a side that cannot, small, keeps its columns.
    COMPACT_ABOVE = tuning.RUNS_COMPACT_ABOVE

    #: The runs are the side's only copy (no history beside them).
    alone: bool = False
    #: The time domain of the join's scope: its columns hold the runs' times, its vectorised
    #: advancer compacts them.
    domain: TimeDomain = attrs.field(kw_only=True)
    _pending: list[Batch | RawBatch] = attrs.field(factory=list, init=False)
    #: Columns already read of batches waiting (by ``id``: the kernel's, for a batch it has
    #: just joined), so that storing that batch does not read it again.
    _known: dict[int, Columns] = attrs.field(factory=dict, init=False)
    _runs: list[Columns] = attrs.field(factory=list, init=False)
    #: The updates noted (beside a history: its size, while the runs hold the same updates).
    size: int = attrs.field(default=0, init=False)
    valid: bool = attrs.field(default=True, init=False)
    #: Updates converted, merged, compacted or listed whole so far (see the class).
    touched: int = attrs.field(default=0, init=False)
    #: ``alone``: of :attr:`touched`, the updates converted and merged when batches that
    #: waited by key were converted (see :attr:`MAX_RECENT`): what small batches cost to hold
    #: as columns, which a history would have taken a dict step each for.
    churn: int = attrs.field(default=0, init=False)
    #: ``alone``: the updates of the batches waiting, by key as ``(val, time, diff)``, while
    #: they are few enough (:attr:`MAX_RECENT`); None when they are to be converted first.
    _recent: dict[Any, list[tuple[Any, Any, int]]] | None = attrs.field(init=False)
    _pending_size: int = attrs.field(default=0, init=False)
    #: Per run, its columns as memoryviews (built at the first look-up of few keys after
    #: the runs changed): read an element at a time without numpy's cost per call.
    _views: list[RunView] | None = attrs.field(default=None, init=False)
    #: ``alone``: the frontier of the last :meth:`tidy`, to which merges compact.
    _frontier: tuple[Time, ...] = attrs.field(default=(), init=False)
    #: Updates held beyond which :meth:`tidy` checks that the runs can be compacted.
    limit: int = attrs.field(init=False)

    @limit.default
    def _first_limit(self) -> int:
        return self.COMPACT_ABOVE

    @_recent.default
    def _first_recent(self) -> dict[Any, list[tuple[Any, Any, int]]] | None:
        return {} if self.alone else None

    def add(
        self,
        batch: Batch | RawBatch,
        cols: Columns | None = None,
        grouped: list[tuple[Any, list[tuple[Any, Time, int]]]] | None = None,
    ) -> None:
        """Note a batch that has entered the side (``cols``: its columns, if already
        read; ``grouped``: its updates by key as ``iter_keys`` gives them, in lists nobody
        else holds, if a reader grouped them already: they wait by key as they are)."""
        if not self.valid:
            return
        recent = self._recent
        if len(self._pending) >= self.MAX_PENDING and recent is None:
            if not self.alone:
                self.drop()
                return
            self.runs()
            recent = self._recent
        n = len(batch)
        self._pending.append(batch)
        if cols is not None:
            self._known[id(batch)] = cols
        self.size += n
        self._pending_size += n
        # A large batch the kernel has read (a side stored in bulk, often never read again,
        # as a static run's last batches) waits for a reader; any other batch after it
        # ends the wait (rounds have come: converted now, not by them).
        bulk = cols is not None and n > self.MAX_RECENT
        if recent is None:
            if self.alone and not bulk:
                self.runs()
            return
        if self._pending_size > min(
            self.MAX_RECENT, max(self.COMPACT_ABOVE, self.size - self._pending_size)
        ):
            # Converted now, in the activation that brought them (a load, say), rather than
            # by the next reader (a single-update round); sooner for a side whose runs hold
            # few updates, as what waits is not compacted.
            self._recent = None
            if not bulk:
                touched = self.touched
                self.runs()
                if n <= self.MAX_RECENT:  # (a batch that would have waited too, not a load)
                    self.churn += self.touched - touched
            return
        get = recent.get
        if grouped:
            for key, rows in grouped:
                have = get(key)
                if have is None:
                    recent[key] = rows
                else:
                    have.extend(rows)
            return
        for key, val, time, diff in batch.updates():
            waiting = get(key)
            if waiting is None:
                recent[key] = [(val, time, diff)]
            else:
                waiting.append((val, time, diff))

    def beside_history(self) -> None:
        """From now on the runs are noted beside a history (no longer ``alone``)."""
        self.alone = False
        self._recent = None
        if not self.valid:
            self.drop()

    def drop(self) -> None:
        """Give the runs up (the history holds what they cannot)."""
        self.valid = False
        self._pending = []
        self._known = {}
        self._pending_size = 0
        self._recent = None
        self._runs = []
        self._views = None

    def usable(self, history_size: int) -> bool:
        """Whether the runs hold what a history of ``history_size`` updates holds."""
        if self.valid and self.size != history_size:
            self.drop()
        return self.valid

    def _fail(self) -> list[Columns]:
        if self.alone:
            self.valid = False  # (what is held stays, for :meth:`updates`)
        else:
            self.drop()
        return []

    def runs(self) -> list[Columns]:
        """The runs, every noted batch in them (an empty list if given up, or ``alone`` if
        a batch cannot be held as columns: then :attr:`valid` is False)."""
        if not self.valid:
            return []
        if self._pending:
            parts = []
            self.touched += self._pending_size
            known = self._known
            for batch in _grouped(self._pending, known):
                cols = known.get(id(batch)) if known else None
                if cols is None:
                    cols = columns_of(batch, self.domain)
                if cols is None:
                    return self._fail()
                if self.alone and isinstance(cols.vals, list):
                    # Held for good: int values as an array (8 bytes each, no objects), which
                    # :meth:`tidy` can also consolidate.
                    vals = as_int64(cols.vals)
                    if vals is not None:
                        cols.vals = vals
                parts.append(cols)
            run = _merge(parts) if len(parts) > 1 or not _sorted(parts[0]) else parts[0]
            runs = self._runs
            if run is None or (runs and _kind(run) != _kind(runs[0])):
                return self._fail()  # (int keys and pair keys, say: codes must never meet)
            self._pending = []
            self._known = {}
            self._pending_size = 0
            self._recent = {} if self.alone else None
            self._views = None
            if self.alone and self._frontier:
                compacted = _compact([run], self._frontier, self.domain)
                if compacted is not None:
                    self.size -= len(run) - len(compacted)
                    run = compacted
            if not len(run):
                return runs
            runs.append(run)
            while len(runs) > 1 and 2 * len(runs[-1]) >= len(runs[-2]):
                last = runs.pop()
                merged = self._merged(runs.pop(), last)
                if len(merged):
                    runs.append(merged)
        return self._runs

    def _merged(self, first: Columns, last: Columns) -> Columns:
        """Two runs as one; ``alone``, compacted to the frontier of the last :meth:`tidy`
        (where they can be): a spine's merges, so that each update is compacted as often as
        it is merged, O(log n) times, and never the whole side at once."""
        self.touched += len(first) + len(last)
        if self.alone and self._frontier:
            compacted = _compact([first, last], self._frontier, self.domain)
            if compacted is not None:
                self.size -= len(first) + len(last) - len(compacted)
                return compacted
        merged = _merge([first, last])
        assert merged is not None  # (runs of one kind always merge)
        return merged

    def updates(self) -> Iterator[tuple[Any, Any, Time, int]]:
        """Every update held, as ``(key, val, time, diff)`` Python values (the runs', then
        those of the batches not yet converted)."""
        self.touched += self.size
        from_columns = self.domain.from_columns
        for run in self._runs:
            everything = np.arange(len(run))
            yield from zip(
                run.key_objects(everything),
                values_of(run.vals, len(run)),
                from_columns(run.times),
                run.diffs.tolist(),
            )
        for batch in self._pending:
            yield from batch.updates()

    def readable_by(self, keys: list[Any]) -> bool:
        """Whether :meth:`lookup_many` can find ``keys`` (the runs hold every noted batch
        not waiting indexed by key, and the keys are of their kind: ints, or pairs of ints
        that pack)."""
        if self._pending and self._recent is None:
            self.runs()
        if not self.valid:
            return False
        runs = self._runs
        return not runs or codes_of(keys, runs[0]) is not None

    def find(self, keys: list[Any]) -> dict[Any, list[tuple[Any, Time, int]]] | None:
        """:meth:`lookup_many`'s answer, or None when the runs cannot give it
        (:meth:`readable_by` is False): a reader asks once and learns both.

        Runtime complexity: O(k log n) for k keys over runs of n updates (O(log n) runs, a
        binary search in each), plus the updates found; nothing proportional to n.
        """
        if self._pending and self._recent is None:
            self.runs()
        if not self.valid:
            return None
        found: dict[Any, list[tuple[Any, Time, int]]] = {}
        runs = self._runs
        if runs:
            codes = codes_of(keys, runs[0])
            if codes is None:
                return None
            if len(keys) <= _FEW_KEYS:
                views = self._views
                if views is None:
                    views = self._views = [RunView.of(run) for run in runs]
                for view in views:
                    view.lookup(keys, codes, found)
            else:
                array = np.array(codes, dtype=np.int64)
                for run in runs:
                    lookup_run(run, keys, array, found)
        recent = self._recent
        if recent:
            get = recent.get
            for key in keys:
                rows = get(key)
                if rows is None:
                    continue
                have = found.get(key)
                if have is None:
                    found[key] = rows.copy()
                else:
                    have.extend(rows)
        return found

    def lookup_many(self, keys: list[Any]) -> dict[Any, list[tuple[Any, Time, int]]]:
        """The ``(val, time, diff)`` updates held of each of ``keys`` (distinct, of the
        runs' kind: :meth:`readable_by`); keys without any are absent (see :meth:`find`)."""
        if not keys:
            return {}
        found = self.find(keys)
        assert found is not None, "keys of another kind (see readable_by)"
        return found

    def tidy(self, frontier: tuple[Time, ...], *, force: bool = False) -> bool:
        """Note ``frontier`` (``alone``): the runs are compacted to it as they merge (every
        time advanced by it, ``advance_by`` as a vectorised join and meet; equal ``(key, val,
        time)`` summed, zeros dropped), all of them at once with ``force``. False when they
        cannot be (checked once they hold more than :attr:`limit` updates, and with
        ``force``): a batch not held as columns, values that are not ints, a time that is
        not of the runs' kind.

        Runtime complexity: O(number of runs) without ``force``; the merges' compaction costs
        a constant factor on the merges, O(log n) amortised per update.
        """
        if not frontier:
            self._pending = []
            self._known = {}
            self._pending_size = 0
            self._recent = {} if self.alone else None
            self._runs = []
            self._views = None
            self.size = 0
            self.limit = self.COMPACT_ABOVE
            return self.valid
        self._frontier = frontier
        if self.size <= self.limit and not force:
            return self.valid
        domain = self.domain
        if not force:
            if not self.valid or not all(_compactable(run, frontier, domain) for run in self._runs):
                return False
            self.limit = self.COMPACT_ABOVE + 2 * self.size
            return True
        runs = self.runs()
        if not runs:
            return self.valid
        if not all(_compactable(run, frontier, domain) for run in runs):
            return False
        compacted = _compact(runs, frontier, domain)
        if compacted is None:  # (times too far apart to sort as one column: left as they are)
            return True
        self.touched += self.size
        self._views = None
        self._runs = [compacted] if len(compacted) else []
        self.size = len(compacted)
        self.limit = self.COMPACT_ABOVE + 2 * self.size
        return True


def _compactable(run: Columns, frontier: tuple[Time, ...], domain: TimeDomain) -> bool:
    """Whether ``run`` can be compacted to ``frontier`` (int values or none, times in the
    domain's columns, and so the frontier's)."""
    vals = run.vals
    if vals is not None and not isinstance(vals, np.ndarray):
        return False
    return run.times.ndim == domain.columns and domain.to_columns(frontier) is not None


def _compact(runs: list[Columns], frontier: tuple[Time, ...], domain: TimeDomain) -> Columns | None:
    """``runs`` as one run compacted to ``frontier`` (key-sorted), or None if they cannot
    be (see :func:`_compactable`; or times too far apart to sort as one column)."""
    if not all(_compactable(run, frontier, domain) for run in runs):
        return None
    times = np.concatenate([run.times for run in runs])
    advanced = domain.advance_columns(times, frontier)
    assert advanced is not None  # (checked by _compactable)
    packed = _pack_times(advanced)
    if packed is None:
        return None
    flat, unpack = packed
    vals = [run.vals for run in runs]
    keys, vals_, flat, diffs = sort_consolidate_int(
        np.concatenate([run.keys for run in runs]),
        None if vals[0] is None else np.concatenate(vals),
        flat,
        np.concatenate([run.diffs for run in runs]),
        0,
    )
    objs = None if runs[0].objs is None else unpack_pairs(keys)
    return Columns(keys, vals_, unpack(flat), diffs, objs)


def _grouped(
    batches: list[Batch | RawBatch], known: dict[int, Columns] | None = None
) -> list[Batch | RawBatch]:
    """``batches`` with each stretch of forwarded ones (lists, with values or all ``()``
    alike) made one: a conversion per stretch instead of one per small batch. Those whose
    columns are ``known`` (by ``id``) stay as they are."""
    out: list[Batch | RawBatch] = []
    owned = False  # whether the last of ``out`` is made here (its lists may grow)
    for batch in batches:
        last = out[-1] if out else None
        if (
            last is None
            or isinstance(batch, Batch)
            or isinstance(last, Batch)
            or (known and (id(batch) in known or id(last) in known))
            or (batch.vals is None) != (last.vals is None)
        ):
            out.append(batch)
            owned = False
            continue
        if not owned:
            vals = None if last.vals is None else list(last.vals)
            last = out[-1] = type(last)(list(last.keys), vals, list(last.times), list(last.diffs))
            owned = True
        last.keys += batch.keys
        if last.vals is not None:
            last.vals += batch.vals  # type: ignore[arg-type]  # (not None: as the last one's)
        last.times += batch.times
        last.diffs += batch.diffs
    return out


def _pack_times(times: Any) -> tuple[Any, Callable[[Any], Any]] | None:
    """Times as one int64 column in their lexicographic order, and the function that turns
    such a column back; None if ``(n, 2)`` times span more than 62 bits together."""
    if times.ndim == 1:
        return times, lambda flat: flat
    outer, inner = times[:, 0], times[:, 1]
    if not len(times):
        return outer.copy(), lambda flat: np.zeros((0, 2), dtype=np.int64)
    olow, ilow = int(outer.min()), int(inner.min())
    ibits = (int(inner.max()) - ilow).bit_length()
    if (int(outer.max()) - olow).bit_length() + ibits > 62:
        return None

    def unpack(flat: Any) -> Any:
        return np.stack(((flat >> ibits) + olow, (flat & ((1 << ibits) - 1)) + ilow), axis=1)

    return ((outer - olow) << ibits) | (inner - ilow), unpack


def _kind(cols: Columns) -> tuple[bool, int, bool]:
    """What runs must share to be read together: key kind, time shape, unit values."""
    return cols.objs is None, cols.times.ndim, cols.vals is None


def _sorted(cols: Columns) -> bool:
    keys = cols.keys
    return len(keys) < 2 or bool((keys[1:] >= keys[:-1]).all())


def count_pairs(cols: Columns, runs: list[Columns]) -> int:
    """How many pairs ``cols`` makes with ``runs``."""
    keys = cols.keys
    return sum(
        int((np.searchsorted(r.keys, keys, "right") - np.searchsorted(r.keys, keys)).sum())
        for r in runs
    )


def pair_up(
    cols: Columns, runs: list[Columns], start: int, budget: int
) -> tuple[list[tuple[Any, Any, int]], int]:
    """The pairs of ``cols``' rows from ``start`` on with ``runs``, as many rows as make at
    most ``budget`` pairs (one row at least): per run ``(rows, matches)`` index arrays, and
    the row after the last one taken (rows without matches count for nothing, but no more
    than ``budget`` rows are looked at)."""
    keys = cols.keys[start : start + max(budget, 1)]  # (no more rows than pairs wanted)
    found = []
    total: Any = None
    for run in runs:
        lo = np.searchsorted(run.keys, keys, "left")
        counts = np.searchsorted(run.keys, keys, "right") - lo
        found.append((lo, counts))
        total = counts if total is None else total + counts
    if total is None:
        return [], len(cols.keys)
    cum = np.cumsum(total)
    take = max(1, int(np.searchsorted(cum, budget, "right")))
    pairs = []
    for ri, (lo, counts) in enumerate(found):
        counts = counts[:take]
        n = int(counts.sum())
        if not n:
            continue
        rows = np.repeat(np.arange(start, start + take), counts)
        ends = np.cumsum(counts)
        matches = np.arange(n) + np.repeat(lo[:take] - ends + counts, counts)
        pairs.append((rows, matches, ri))
    return pairs, start + take


def joined(
    pairs: list[tuple[Any, Any, int]],
    cols: Columns,
    runs: list[Columns],
    logic: Callable[[Any, Any, Any], Any],
    single: bool,
    swap: bool,
) -> Iterator[tuple[Time, list[Any], list[int]]]:
    """The output of ``pairs`` (from :func:`pair_up`): per output time, in time order, its
    data and diffs, summed per datum (cancelled ones left out). ``swap``: ``cols`` is the
    second side (``logic(key, other's val, its val)``)."""
    if not pairs:
        return
    rows = np.concatenate([p[0] for p in pairs])
    parts = [(runs[ri], m) for _, m, ri in pairs]
    times = np.maximum(cols.times[rows], np.concatenate([r.times[m] for r, m in parts]))
    diffs = cols.diffs[rows] * np.concatenate([r.diffs[m] for r, m in parts])
    keys = cols.key_objects(rows)
    mine = values_of(gather(cols.vals, rows), len(keys))
    theirs: list[Any] = []
    for r, m in parts:
        theirs.extend(values_of(gather(r.vals, m), len(m)))
    out = list(map(logic, keys, theirs, mine) if swap else map(logic, keys, mine, theirs))
    if not single:
        groups = list(map(tuple, out))
        out = [d for g in groups for d in g]
        repeats = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        times = np.repeat(times, repeats, axis=0)
        diffs = np.repeat(diffs, repeats)
        if not out:
            return
    product = times.ndim == 2
    if bool((times == times[0]).all()):
        yield _time(times[0], product), *_summed(out, diffs)
        return
    if product:
        order = np.lexsort((times[:, 1], times[:, 0]))
    else:
        order = np.argsort(times, kind="stable")
    times = times[order]
    diffs = diffs[order]
    out = list(map(out.__getitem__, order.tolist()))
    change = times[1:] != times[:-1]
    if product:
        change = change.any(axis=1)
    cuts = [0, *(np.flatnonzero(change) + 1).tolist(), len(out)]
    for lo, hi in pairwise(cuts):
        data, ds = _summed(out[lo:hi], diffs[lo:hi])
        if data:
            yield _time(times[lo], product), data, ds


def _time(t: Any, product: bool) -> Any:
    if product:
        o, i = t.tolist()
        return Product(o, i)
    return int(t)


def _summed(data: list[Any], diffs: Any) -> tuple[list[Any], list[int]]:
    """``data`` with ``diffs`` summed per datum, zero sums left out."""
    first = int(diffs[0])
    if bool((diffs == first).all()):
        counts = Counter(data)
        if len(counts) == len(data):
            return data, diffs.tolist()
        return list(counts), [c * first for c in counts.values()]
    sums: dict[Any, int] = {}
    get = sums.get
    for d, r in zip(data, diffs.tolist()):
        sums[d] = get(d, 0) + r
    return [d for d, r in sums.items() if r], [r for r in sums.values() if r]
