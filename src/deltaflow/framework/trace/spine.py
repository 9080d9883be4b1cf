"""The spine: a log-structured trace of batches, merged geometrically and compacted as it goes.

A :class:`Spine` stores a collection's whole history as a chain of immutable batches whose
descriptions tile the timeline from ``lower`` to ``upper``. Appending is cheap (a new batch goes
at the end); reading a key costs a binary search per batch; so the spine keeps the number of
batches logarithmic by merging them, and merging is where times are compacted and cancelled
updates disappear.

Design
------
Batches live in *levels*. A batch at level ``i`` counts as ``2**i`` updates whatever its real
size (compaction may have shrunk it), so that the bookkeeping does not depend on how much the data
cancels. A level is vacant, holds one batch, or holds two batches being merged by a resumable
:class:`~.merger.Merger`. Older data sits at higher levels.

* A new batch of ``n`` updates is introduced at level ``ceil(log2(n))``. First every in-progress
  merge gets ``FUEL_PER_UPDATE * effort * 2**level`` units of fuel (one unit merges one update);
  a merge that completes moves its result one level up, where it may start the next merge.
  Then every level below the target is merged, right away, into one batch placed at the target
  ("roll up"), so the new batch lands on a level holding at most one batch; if that level holds
  one, their merge starts.
* An empty batch (how an operator advances the trace's upper when no update arrived) is merged
  into the newest batch at once when that changes none of its times: the newest batch's
  columns under the merged description. Otherwise it is introduced like any batch.
* When the largest batch turns out small (its updates cancelled), it is moved down towards the
  level its real size deserves, so that the number of levels follows the live data, not the
  history.
* :meth:`Spine.exert` spends idle time: it fuels merges in progress, or, when there are none but
  several batches, promotes the smallest batch a level so that batches keep meeting and
  compacting even when no input arrives.

Invariant (why merges finish in time): a merge at level ``k`` has at most ``2**(k+1)`` updates
of work. Another batch can only reach level ``k`` once at least ``2**(k-1)`` further updates have
been inserted below it (a merge starts only when the levels below hold at most half of what it
takes to fill level ``k``), and each inserted update brings ``FUEL_PER_UPDATE = 8`` units to every
merge: at least ``2**(k+2)`` units, twice what is needed. So a merge at level ``k`` completes
before ``2**(k-2)`` more updates arrive, and insertions never wait for a large merge. If the
invariant were ever broken, the spine completes the merge at once (correct, only slower).

Reading
-------
:meth:`Spine.lookup` reads one key from every batch and consolidates; operators that read many
keys per round (reductions) use :meth:`Spine.lookup_many`, which encodes the keys once and asks
each batch for all of them at once (one vectorised search per large encoded batch; one dict
probe per key for a small one, or per stored key when the batch holds far fewer keys than are
asked; see :meth:`Batch.lookup_many`). The answers are combined with dict set operations, so
only keys found in several batches cost a Python-level consolidation.

Compaction and readers
----------------------
Readers (:class:`TraceReader`, from :meth:`Spine.reader`) each hold two frontiers:

* *logical compaction*: "I only need correct accumulations at times beyond this frontier". The
  spine keeps every reader's frontier; its logical compaction frontier is the meet of all holds
  (the minimal held elements), computed when the spine next needs it after a hold or its upper
  changed (a reader alone is its own meet), so readers may advance often at O(1) cost to the
  spine. When a merge *starts* it takes
  ``since = join(batch1.since, batch2.since, logical compaction)`` and advances every time to it
  (the result's ``description.since``). With no reader at all (or only readers holding the empty
  frontier) nobody can read, and merges compact to the spine's ``upper`` (joined with the last
  frontier used, so the frontier never moves back).
* *physical compaction*: "I may need to read the batches separately up to this frontier". A
  batch takes part in merges only once its ``upper`` is ``<=`` the meet of physical holds. By
  default readers hold no physical frontier; one that needs to slice by batch sets it.

Frontiers only advance: moving one backwards is a ``ValueError``, and a new reader starts at the
spine's current frontier. A dropped reader releases its holds.

Footgun: a reader that never advances its logical frontier keeps the full history alive (the
trace then grows with every update); advance it as soon as older times are no longer needed.

    >>> from deltaflow.framework.antichain import Antichain
    >>> spine = Spine(Antichain([0]))
    >>> reader = spine.reader()
    >>> for t in range(1, 5):
    ...     d = Description(Antichain([t - 1]), Antichain([t]))
    ...     spine.insert(Batch.from_updates([("k", (), t - 1, 1)], d))
    >>> spine.lookup("k")
    [((), 0, 1), ((), 1, 1), ((), 2, 1), ((), 3, 1)]
    >>> reader.set_logical_compaction(Antichain([4]))
    >>> while spine.exert(1000):
    ...     pass
    >>> spine.lookup("k"), spine.statistics().batches
    ([((), 4, 4)], 1)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, final

import attrs

from .. import tuning
from ..antichain import Antichain, frontier_join
from ..lattice import Time
from ..time_domain import TimeDomain, domain_for_depth, domain_of
from .batch import Batch
from .columns import consolidate_rows
from .cursor import Cursor
from .description import Description
from .holds import Holds
from .merger import Merger, unchanged_by
from .probes import Probes

__all__ = ["Spine", "TraceReader", "TraceStatistics"]


def _level(n: int) -> int:
    """The level a batch of ``n`` updates is introduced at: ``ceil(log2(n))``."""
    return (n - 1).bit_length() if n > 1 else 0


@attrs.frozen
class TraceStatistics:
    """A snapshot of a trace's size.

    Attributes:
        batches: batches held (including the inputs of merges in progress and pending batches).
        updates: updates in those batches.
        nbytes: estimated bytes held by them and by the partial outputs of merges.
        merges_in_progress: merges started and not yet complete.
    """

    batches: int
    updates: int
    nbytes: int
    merges_in_progress: int


@attrs.define(eq=False, repr=False)
class _Single:
    batch: Batch


@attrs.define(eq=False, repr=False)
class _Merging:
    old: Batch
    new: Batch
    merger: Merger


_Layer = _Single | _Merging | None


def _as_frontier(frontier: Antichain | Any) -> Antichain:
    return frontier if isinstance(frontier, Antichain) else Antichain(frontier)


@final
@attrs.define(eq=False, repr=False)
class TraceReader:
    """A reader's hold on a :class:`Spine`'s compaction (create with :meth:`Spine.reader`).

    >>> from deltaflow.framework.antichain import Antichain
    >>> spine = Spine(Antichain([0]))
    >>> r = spine.reader()
    >>> r.set_logical_compaction(Antichain([3]))
    >>> spine.logical_compaction
    Antichain([3])
    >>> r.set_logical_compaction(Antichain([1]))
    Traceback (most recent call last):
    ...
    ValueError: cannot move logical compaction backwards from Antichain([3]) to Antichain([1])
    """

    _spine: Spine
    _logical: Antichain
    _token: int  # this reader's key in the spine's registry of holds
    _physical: Antichain | None = None
    _dropped: bool = False

    @property
    def logical_compaction(self) -> Antichain:
        """This reader's logical compaction frontier."""
        return self._logical

    @property
    def physical_compaction(self) -> Antichain | None:
        """This reader's physical compaction frontier, or None when it holds none."""
        return self._physical

    @property
    def dropped(self) -> bool:
        """True once :meth:`drop` was called."""
        return self._dropped

    def _live(self) -> Spine:
        if self._dropped:
            msg = "this trace reader was dropped; create a new one with spine.reader()"
            raise ValueError(msg)
        return self._spine

    def set_logical_compaction(self, frontier: Antichain | Any) -> None:
        """Declare that accumulations are only needed at times beyond ``frontier``.

        Raises:
            ValueError: if ``frontier`` is not beyond the current one, or the reader was dropped.

        Runtime complexity: O(size of both frontiers) comparisons; the spine recomputes its
        compaction frontier when it next needs it.
        """
        spine = self._live()
        new = _as_frontier(frontier)
        old = self._logical
        if new is old:
            return
        if not old.dominates(new):
            msg = f"cannot move logical compaction backwards from {old!r} to {new!r}"
            raise ValueError(msg)
        spine._logical_holds.hold(self._token, new)
        self._logical = new

    def set_physical_compaction(self, frontier: Antichain | Any) -> None:
        """Declare that batches are only needed separately up to ``frontier``.

        The first call starts a hold; it must be at or beyond the spine's current physical
        compaction frontier (earlier batches may already be merged). Later calls may only
        advance it; the empty frontier releases it in effect.

        Raises:
            ValueError: if ``frontier`` would move backwards, or the reader was dropped.
        """
        spine = self._live()
        new = _as_frontier(frontier)
        old = self._physical
        if old is None:
            current = spine.physical_compaction
            if not current.dominates(new):
                msg = (
                    f"cannot hold physical compaction at {new!r}: the trace has already "
                    f"merged batches up to {current!r}; hold at or beyond it"
                )
                raise ValueError(msg)
            spine._physical_readers += 1
        elif new is old:
            return
        elif not old.dominates(new):
            msg = f"cannot move physical compaction backwards from {old!r} to {new!r}"
            raise ValueError(msg)
        spine._physical_holds.hold(self._token, new)
        self._physical = new
        spine._consider_merges()

    def drop(self) -> None:
        """Release this reader's holds; the reader is unusable afterwards (idempotent)."""
        if self._dropped:
            return
        spine = self._spine
        spine._logical_holds.release(self._token)
        spine._logical_readers -= 1
        if self._physical is not None:
            spine._physical_holds.release(self._token)
            spine._physical_readers -= 1
        self._dropped = True
        spine._consider_merges()

    def __repr__(self) -> str:
        state = "dropped" if self._dropped else f"logical={self._logical!r}"
        return f"TraceReader({state}, physical={self._physical!r})"


@attrs.define(eq=False, repr=False, init=False)
class Spine:
    """A log-structured, compacting trace of batches (see the module docstring).

    Args:
        lower: the frontier the trace starts at (the first batch's ``lower``).
        effort: multiplier on the fuel each insertion gives to merges (at least 1).
        domain: the shape of the trace's times, chosen by its scope (by default, that of
            ``lower``'s times).

    >>> from deltaflow.framework.antichain import Antichain
    >>> spine = Spine(Antichain([0]))
    >>> d = Description(Antichain([0]), Antichain([1]))
    >>> spine.insert(Batch.from_updates([(1, 2, 0, 1)], d))
    >>> spine.upper, spine.lookup(1)
    (Antichain([1]), [(2, 0, 1)])
    """

    #: Fuel each inserted update gives to every merge in progress (see the invariant above).
    FUEL_PER_UPDATE: ClassVar[int] = tuning.SPINE_FUEL_PER_UPDATE
    #: Default effort multiplier.
    DEFAULT_EFFORT: ClassVar[int] = 1
    #: The merger class (a subclass may tune its step sizes).
    MERGER: ClassVar[type[Merger]] = Merger

    _lower: Antichain
    _upper: Antichain
    _effort: int
    _layers: list[_Layer]
    _pending: list[Batch]
    # Each live reader's frontiers, by reader token (their meet is the frontier).
    _logical_holds: Holds
    _physical_holds: Holds
    _logical_readers: int
    _physical_readers: int
    _next_token: int
    _forced_merges: int
    #: The shape of the trace's times (its scope's, or that of ``lower``).
    domain: TimeDomain

    def __init__(
        self, lower: Antichain, effort: int = DEFAULT_EFFORT, domain: TimeDomain | None = None
    ) -> None:
        if domain is None:
            # (An empty lower admits no time: any domain reads its nothing.)
            domain = domain_of(lower.elements[0]) if lower.elements else domain_for_depth(0)
        self.domain = domain
        self._lower = lower
        self._upper = lower
        self._effort = max(1, int(effort))
        self._layers = []
        self._pending = []
        self._logical_holds = Holds(lower)
        self._physical_holds = Holds(lower)
        self._logical_readers = 0
        self._physical_readers = 0
        self._next_token = 0
        self._forced_merges = 0

    # ------------------------------------------------------------------ frontiers

    @property
    def lower(self) -> Antichain:
        """The frontier the trace starts at."""
        return self._lower

    @property
    def upper(self) -> Antichain:
        """The frontier up to which batches have been inserted."""
        return self._upper

    @property
    def logical_compaction(self) -> Antichain:
        """The meet of all readers' logical frontiers (``upper`` when there are none).

        Accumulations read from the trace are correct at every time beyond it.

        Runtime complexity: O(1) while no hold and the upper are unchanged; otherwise O(h * m)
        comparisons for h held elements of which m are minimal.
        """
        return self._logical_holds.frontier(self._upper)

    @property
    def physical_compaction(self) -> Antichain:
        """The meet of all physical holds (``upper`` when no reader holds one).

        Runtime complexity: as :attr:`logical_compaction`.
        """
        return self._physical_holds.frontier(self._upper)

    def reader(self) -> TraceReader:
        """A new reader holding logical compaction at the current frontier.

        >>> from deltaflow.framework.antichain import Antichain
        >>> Spine(Antichain([0])).reader().logical_compaction
        Antichain([0])
        """
        frontier = self.logical_compaction
        token = self._next_token
        self._next_token = token + 1
        self._logical_holds.hold(token, frontier)
        self._logical_readers += 1
        return TraceReader(self, frontier, token)

    # ------------------------------------------------------------------ writing

    def insert(self, batch: Batch) -> None:
        """Append ``batch``; its ``lower`` must be the trace's ``upper``.

        Gives fuel to merges in progress in proportion to the batch's size, so insertion costs
        amortised O(log n) work per update and never waits for a large merge.

        Raises:
            ValueError: if the batch does not start at ``upper``, its ``upper`` is not beyond its
                ``lower``, or its ``since`` is ahead of the trace's logical compaction.
        """
        desc = batch.description
        lower, upper = desc.lower, desc.upper
        if lower is not self._upper and lower != self._upper:
            msg = (
                f"batch lower {desc.lower!r} does not match the trace's upper {self._upper!r}; "
                "insert batches in order, each starting where the previous one ended"
            )
            raise ValueError(msg)
        if not lower.dominates(upper):
            msg = f"batch upper {upper!r} is not beyond its lower {lower!r}"
            raise ValueError(msg)
        logical = self.logical_compaction
        if desc.since is not logical and not desc.since.dominates(logical):
            msg = (
                f"batch since {desc.since!r} is ahead of the trace's logical compaction "
                f"{logical!r}; fresh batches should not set since"
            )
            raise ValueError(msg)
        if lower is upper or lower == upper:
            if len(batch):
                msg = f"a batch with lower == upper ({lower!r}) cannot hold updates"
                raise ValueError(msg)
            return
        self._upper = upper
        self._logical_holds.forget()
        self._physical_holds.forget()
        self._pending.append(batch)
        self._consider_merges()

    @property
    def has_readers(self) -> bool:
        """True while some reader holds a logical or physical compaction frontier.

        >>> from deltaflow.framework.antichain import Antichain
        >>> spine = Spine(Antichain([0]))
        >>> spine.has_readers, spine.reader().dropped, spine.has_readers
        (False, False, True)
        """
        return bool(self._logical_readers or self._physical_readers)

    @property
    def merging(self) -> bool:
        """True while a merge is in progress (it still needs fuel to complete)."""
        return any(layer.__class__ is _Merging for layer in self._layers)

    def exert(self, fuel: int) -> bool:
        """Spend up to ``fuel`` units of idle-time work on merging.

        Fuels merges in progress; with none, promotes the smallest batch one level so batches
        keep meeting (and compacting) when no input arrives.

        Returns:
            Whether more merge work remains (merges in progress or more than one batch).

        Runtime complexity: O(fuel log fuel) per merge in progress, or one promotion.
        """
        self._tidy()
        layers = self._layers
        if any(layer.__class__ is _Merging for layer in layers):
            self._apply_fuel(fuel)
        else:
            occupied = [i for i, layer in enumerate(layers) if layer is not None]
            if len(occupied) > 1:
                self._introduce(None, occupied[0])
        return self._has_work()

    # ------------------------------------------------------------------ reading

    def batches(self) -> list[Batch]:
        """The current batches, oldest first (inputs of in-progress merges included).

        Runtime complexity: O(number of levels + pending batches).
        """
        out: list[Batch] = []
        for layer in reversed(self._layers):
            if layer is None:
                continue
            if layer.__class__ is _Single:
                out.append(layer.batch)
            else:
                out.append(layer.old)  # type: ignore[union-attr]
                out.append(layer.new)  # type: ignore[union-attr]
        out.extend(self._pending)
        return out

    def lookup(self, key: Any) -> list[tuple[Any, Time, int]]:
        """The consolidated ``(val, time, diff)`` updates of ``key`` across all batches.

        Runtime complexity: O(b log n + k) for b batches and k updates of the key.
        """
        found = [rows for rows in (b.lookup(key) for b in self.batches()) if rows]
        if not found:
            return []
        if len(found) == 1:
            return found[0]
        return consolidate_rows(found)

    def lookup_many(
        self, keys: Iterable[Any], *, sort: bool = True
    ) -> dict[Any, list[tuple[Any, Time, int]]]:
        """``lookup`` of many keys at once: ``{key: rows}`` for the keys that have updates.

        Each key's rows are exactly ``self.lookup(key)``: consolidated across batches and
        sorted by ``(val, time)``; with ``sort=False`` the same rows in an unspecified order
        (saves sorting the keys found in several batches). Keys whose updates are absent or
        cancel out are left out. The keys are checked and encoded once, and each encoded batch
        answers all of them with one vectorised search (see :meth:`Batch.lookup_many`), so
        reading many keys costs a few numpy calls per batch plus Python work per row found,
        instead of two binary searches per batch per key.

        Runtime complexity: O(k + b * k log n) for b batches and k keys (the searches in numpy
        for encoded batches), plus O(r) for the r rows found (O(r log r) when sorting keys
        found in several batches).

        >>> from deltaflow.framework.antichain import Antichain
        >>> spine = Spine(Antichain([0]))
        >>> spine.insert(Batch.from_updates([(1, 5, 0, 1), (2, 6, 0, 1)],
        ...                                 Description(Antichain([0]), Antichain([1]))))
        >>> spine.insert(Batch.from_updates([(2, 6, 1, -1)],
        ...                                 Description(Antichain([1]), Antichain([2]))))
        >>> spine.lookup_many([1, 2, 3])
        {1: [(5, 0, 1)], 2: [(6, 0, 1), (6, 1, -1)]}
        """
        probes = Probes(keys)
        # ``out`` holds each key's rows from the first batch that has any; ``more`` the row
        # lists of keys found in several batches, consolidated at the end.
        out: dict[Any, list[tuple[Any, Time, int]]] = {}
        more: dict[Any, list[list[tuple[Any, Time, int]]]] = {}
        for batch in self.batches():
            if not len(batch):
                continue
            got = batch.lookup_many(probes)  # a fresh dict of fresh lists: ours to keep
            if not got:
                continue
            if not out:
                out = got
                continue
            for key in out.keys() & got.keys():
                rows = got.pop(key)
                lists = more.get(key)
                if lists is None:
                    more[key] = [out[key], rows]
                else:
                    lists.append(rows)
            out.update(got)
        for key, lists in more.items():
            rows = consolidate_rows(lists, sort)
            if rows:
                out[key] = rows
            else:
                del out[key]
        return out

    def cursor(self) -> Cursor:
        """A cursor over the merged view of all current batches.

        Runtime complexity: O(b) to create, for b batches.
        """
        return Cursor(self.batches())

    def statistics(self) -> TraceStatistics:
        """Sizes for introspection (see :class:`TraceStatistics`).

        Runtime complexity: O(b) for b batches (O(b * sample) for list-backed batches).

        >>> from deltaflow.framework.antichain import Antichain
        >>> Spine(Antichain([0])).statistics()
        TraceStatistics(batches=0, updates=0, nbytes=0, merges_in_progress=0)
        """
        batches = self.batches()
        merges = [layer for layer in self._layers if layer.__class__ is _Merging]
        nbytes = sum(b.nbytes for b in batches)
        nbytes += sum(m.merger.nbytes for m in merges)
        return TraceStatistics(
            batches=len(batches),
            updates=sum(len(b) for b in batches),
            nbytes=nbytes,
            merges_in_progress=len(merges),
        )

    # ------------------------------------------------------------------ maintenance

    def _consider_merges(self) -> None:
        """Introduce pending batches whose ``upper`` the physical frontier has passed."""
        pending = self._pending
        if not pending:
            return
        physical = self.physical_compaction
        ready = 0
        while ready < len(pending) and pending[ready].description.upper.dominates(physical):
            ready += 1
        if ready:
            batches = pending[:ready]
            del pending[:ready]
            for b in batches:
                self._introduce(b, _level(len(b)))

    def _introduce(self, batch: Batch | None, level: int) -> None:
        """Fuel merges, clear the levels below ``level`` and put ``batch`` at ``level``.

        ``batch=None`` stands for ``2**level`` virtual updates: it carries fuel and promotes
        whatever sits at ``level``.
        """
        self._apply_fuel((self.FUEL_PER_UPDATE * self._effort) << level)
        if batch is None or len(batch) or not self._absorb(batch):
            self._roll_up(level)
            self._insert_at(batch, level)
        self._tidy()

    def _absorb(self, empty: Batch) -> bool:
        """Merge ``empty`` (no updates) into the newest batch at once when that changes none
        of its times: the newest batch's updates under the merged description, sharing its
        columns (how a trace's upper advances without a merge). When compaction would change
        times, or the newest batch is being merged, nothing happens.

        Returns:
            Whether ``empty`` was absorbed.
        """
        layers = self._layers
        for i, layer in enumerate(layers):
            if layer is None:
                continue
            if layer.__class__ is not _Single:
                return False
            old = layer.batch
            since = self._since_for(old, empty)
            if not unchanged_by(old, since, self.domain):
                return False
            desc = Description(old.description.lower, empty.description.upper, since)
            layers[i] = _Single(old.redescribed(desc))
            return True
        return False

    def _since_for(self, old: Batch, new: Batch) -> Antichain:
        since = frontier_join(old.description.since, new.description.since)
        return frontier_join(since, self.logical_compaction)

    def _begin_merge(self, old: Batch, new: Batch) -> _Merging:
        return _Merging(old, new, self.MERGER(old, new, self._since_for(old, new), self.domain))

    def _merge_now(self, old: Batch, new: Batch) -> Batch:
        return self.MERGER(old, new, self._since_for(old, new), self.domain).finish()

    def _apply_fuel(self, fuel: int) -> None:
        layers = self._layers
        i = 0
        while i < len(layers):
            layer = layers[i]
            if layer.__class__ is _Merging:
                merger = layer.merger
                merger.work(fuel)
                if merger.complete:
                    layers[i] = None
                    self._insert_at(merger.finish(), i + 1)
            i += 1

    def _insert_at(self, batch: Batch | None, i: int) -> None:
        layers = self._layers
        while len(layers) <= i:
            layers.append(None)
        layer = layers[i]
        if batch is None:
            # Virtual updates: whatever holds this level counts as merged and moves up.
            if layer is None:
                return
            layers[i] = None
            if layer.__class__ is _Single:
                self._insert_at(layer.batch, i + 1)
            else:
                self._insert_at(layer.merger.finish(), i + 1)  # type: ignore[union-attr]
            return
        if layer is None:
            layers[i] = _Single(batch)
        elif layer.__class__ is _Single:
            layers[i] = self._begin_merge(layer.batch, batch)
        else:
            # The fuel invariant makes this unreachable; stay correct if it is ever broken.
            self._forced_merges += 1
            layers[i] = None
            self._insert_at(layer.merger.finish(), i + 1)  # type: ignore[union-attr]
            layers[i] = _Single(batch)

    def _roll_up(self, level: int) -> None:
        """Merge every batch below ``level`` into one placed at ``level`` (which is cleared)."""
        layers = self._layers
        while len(layers) <= level:
            layers.append(None)
        merged: Batch | None = None
        for j in range(level):
            layer = layers[j]
            if layer is None:
                continue
            layers[j] = None
            if layer.__class__ is _Single:
                b = layer.batch
            else:
                b = layer.merger.finish()  # type: ignore[union-attr]
            merged = b if merged is None else self._merge_now(b, merged)
        if merged is None:
            return
        layer = layers[level]
        if layer is None:
            layers[level] = _Single(merged)
        elif layer.__class__ is _Single:
            layers[level] = None
            self._insert_at(self._merge_now(layer.batch, merged), level + 1)
        else:
            self._forced_merges += 1
            layers[level] = None
            self._insert_at(layer.merger.finish(), level + 1)  # type: ignore[union-attr]
            layers[level] = _Single(merged)

    def _tidy(self) -> None:
        """Move a largest batch that has shrunk down towards the level its size deserves."""
        layers = self._layers
        while layers and layers[-1] is None:
            layers.pop()
        while len(layers) >= 2:
            top = len(layers) - 1
            layer = layers[top]
            if layer.__class__ is not _Single:
                return
            if _level(len(layer.batch)) >= top:
                return
            below = layers[top - 1]
            if below is None:
                del layers[top - 1]
                continue
            if below.__class__ is _Single:
                # Starting a merge at level k is safe while the levels below hold at most
                # 2**(k-1) updates (see the invariant in the module docstring).
                k = top - 1
                smaller = 0
                for j in range(k):
                    lj = layers[j]
                    if lj is not None:
                        smaller += (1 if lj.__class__ is _Single else 2) << j
                if smaller <= (1 << k) >> 1:
                    del layers[k]
                    self._insert_at(below.batch, k)
            return

    def _has_work(self) -> bool:
        occupied = 0
        for layer in self._layers:
            if layer is None:
                continue
            if layer.__class__ is _Merging:
                return True
            occupied += 1
        return occupied > 1

    # ------------------------------------------------------------------ invariants

    def _check(self) -> None:
        """Assert the spine's invariants (chained batches, compaction, holds, layers)."""
        expect = self._lower
        logical = self.logical_compaction
        for b in self.batches():
            desc = b.description
            assert desc.lower == expect, (desc.lower, expect)
            expect = desc.upper
            assert desc.since.dominates(logical), (desc.since, logical)
            b._check()
        assert expect == self._upper, (expect, self._upper)
        for layer in self._layers:
            if layer.__class__ is _Merging:
                merger = layer.merger
                assert merger.inputs == (layer.old, layer.new)
                assert merger.description == Description(
                    layer.old.description.lower,
                    layer.new.description.upper,
                    merger.description.since,
                )
        if self._pending:
            physical = self.physical_compaction
            assert not self._pending[0].description.upper.dominates(physical)
        assert self._logical_readers >= 0 and self._physical_readers >= 0
        assert self._logical_readers == len(self._logical_holds.of)
        assert self._physical_readers == len(self._physical_holds.of)
        for holds in (self._logical_holds, self._physical_holds):
            elems = [e for f in holds.of.values() for e in f.elements]
            if holds.cache is not None and elems:
                assert holds.cache == Antichain(elems), (holds.cache, holds.of)

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"Spine(lower={self._lower!r}, upper={self._upper!r}, batches={s.batches}, "
            f"updates={s.updates}, merges_in_progress={s.merges_in_progress})"
        )
