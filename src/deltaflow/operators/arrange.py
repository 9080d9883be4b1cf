"""Arrangements: a collection indexed by key, as a stream of batches and a shared trace.

``collection.arrange_by_key()`` (data ``(key, val)``) or ``arrange_by_self()`` (data is the
key, the value is ``()``) adds an :class:`ArrangeOperator`. Updates are exchanged so each key
lives on one worker. The operator buffers them until its input frontier passes their times,
then *seals* them into an immutable :class:`~deltaflow.framework.trace.batch.Batch` whose
description ``[lower, upper)`` continues the previous one, inserts the batch into its
:class:`~deltaflow.framework.trace.spine.Spine`, and sends the batch downstream.

An arrangement therefore has two faces (:class:`Arranged`): the stream of batches (what
changed, and when) and the trace (everything so far, compacted). Several operators share one
arrangement: each gets a reader of the trace on its worker and moves its reader's compaction
frontier forward as it goes, so history nobody can ask about any more is compacted away when
batches merge.

A spine that no operator reads (a reduction keeps its input in memory, and so does a join
that is an arrangement's only reader, see :mod:`.join.history`) is not kept, and then nothing is
sealed either. Its readers only ask for the updates and keep them in their own order, so what
arrives is forwarded at once, without capabilities: the messages of one activation, grouped
under their minimal times and consolidated, as a :class:`RawBatch` (keys and values split,
neither sorted nor encoded), or, beyond :data:`FORWARD_AS_BATCH` updates with int keys, as a
``Batch`` built by the vectorised sort. Whether anyone reads the spine is known at the first
activation, when every operator of the worker has been created.

Sealing with partially ordered times: the operator holds capabilities at the minimal times of
what it has buffered. Sealing at input frontier ``F``, it cuts one batch per held capability
``c_i`` (sorted), with ``upper = F`` joined with the later capabilities; so every batch is sent
at a time that is ``<=`` all of its updates, and the batches still tile the timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..framework import tuning
from ..framework.antichain import Antichain
from ..framework.durable.store import encode_frontier
from ..framework.durable.tables import Rows
from ..framework.lattice import less_equal
from ..framework.trace.batch import Batch
from ..framework.trace.description import Description, least_since
from ..framework.trace.ints import int_data
from ..framework.trace.spine import Spine
from ..framework.tuning import FORWARD_AS_BATCH
from .base import Interest, Operator, RunsBatch, UpdateBatch, is_pair, sum_diffs
from .durable import StateSink, StateSource, covering, restore_trace

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..framework.lattice import Time
    from .base import Capability, OperatorContext

__all__ = ["ArrangeOperator", "AsCollection", "RawBatch", "TraceRegistry"]


class TraceRegistry:
    """The spine of one arrangement on each worker, for the operators that read it.

    Operators are created in node order on every worker, so the arrange operator registers
    its spine before any reader's factory asks for it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.spines: dict[int, Spine] = {}
        #: How many operators of the dataflow read the trace (counted as it is built): an
        #: operator that is the only one may keep what it needs in memory instead.
        self.readers = 0

    def spine(self, worker: int) -> Spine:
        """The spine on ``worker``."""
        return self.spines[worker]


# The upper frontier of a forwarded batch: it is never part of a trace, so it bounds nothing.
_ALL = Antichain()


@attrs.define(slots=True)
class RawBatch:
    """The updates an arrangement that keeps no trace forwards from one activation.

    Its readers (a reduction, a join side kept in memory, ``as_collection``) only read its
    updates, so they are consolidated but neither sorted nor encoded. ``vals=None`` means
    every value is ``()``.

    >>> list(RawBatch(["a", "b", "a"], None, [3, 3, 4], [1, 1, -1]).iter_keys())
    [('a', [((), 3, 1), ((), 4, -1)]), ('b', [((), 3, 1)])]
    """

    keys: list[Any]
    vals: list[Any] | None
    times: list[Any]
    diffs: list[int]

    def __len__(self) -> int:
        return len(self.keys)

    def object_columns(self) -> tuple[list[Any], list[Any] | None, list[Any], list[int]]:
        """The columns (as :meth:`~deltaflow.framework.trace.batch.Batch.object_columns`)."""
        return self.keys, self.vals, self.times, self.diffs

    def updates(self) -> Iterator[tuple[Any, Any, Time, int]]:
        """Every ``(key, val, time, diff)``, in arrival order."""
        vals = repeat(()) if self.vals is None else self.vals
        return zip(self.keys, vals, self.times, self.diffs)

    def iter_keys(self) -> Iterator[tuple[Any, list[tuple[Any, Time, int]]]]:
        """Each distinct key with its ``(val, time, diff)`` updates, in first-seen order (in
        lists made anew by each call: the caller may keep them)."""
        groups: dict[Any, list[tuple[Any, Time, int]]] = {}
        vals = repeat(()) if self.vals is None else self.vals
        for key, val, t, diff in zip(self.keys, vals, self.times, self.diffs):
            rows = groups.get(key)
            if rows is None:
                groups[key] = [(val, t, diff)]
            else:
                rows.append((val, t, diff))
        return iter(groups.items())


class ArrangeOperator(Operator):
    """Buffer, seal, insert into the spine, and send batches (see the module docstring)."""

    interest = Interest.ALWAYS
    #: Merge work done per activation while the spine has merges in progress.
    IDLE_FUEL = tuning.ARRANGE_IDLE_FUEL

    def __init__(self, name: str, spine: Spine, by_self: bool) -> None:
        self.name = name
        self.spine = spine
        self.by_self = by_self
        self.pending: dict[Any, tuple[list[Any], list[int]]] = {}
        self.caps: list[Capability] = []
        #: The frontier sealed so far (the ``upper`` of the last batch).
        self.upper = spine.upper
        #: Whether the spine is kept: decided at the first activation, once every operator
        #: of the worker exists, by whether any of them holds a reader on it.
        self.keep: bool | None = None

    def _hold(self, ctx: OperatorContext, time: Time) -> None:
        caps = self.caps
        for cap in caps:
            if cap.time == time or less_equal(cap.time, time):
                return
        new = ctx.capability(time)
        keep = []
        for cap in caps:
            if less_equal(time, cap.time):
                cap.drop()
            else:
                keep.append(cap)
        keep.append(new)
        keep.sort(key=lambda c: c.time)
        self.caps = keep

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Keep capabilities for updates a restored state holds back (none on a fresh
        start)."""
        self.caps = covering(capabilities, self.pending)

    def save(self, sink: StateSink) -> None:
        """Hand the trace and the updates not sealed yet to a checkpoint (the trace's
        batches: those written by an earlier checkpoint are not written again)."""
        if not self.keep:
            return  # it forwards everything at once: nothing is held
        sink.batches("trace", self.spine.batches())
        sink.value("upper", encode_frontier(self.spine.upper))
        keys: list[Any] = []
        vals: list[Any] = []
        times: list[Any] = []
        diffs: list[int] = []
        for t, (data, ds) in self.pending.items():
            ks, vs = self._split(data)
            keys.extend(ks)
            vals.extend([()] * len(ks) if vs is None else vs)
            times.extend([t] * len(ks))
            diffs.extend(ds)
        sink.rows("pending", Rows({"key": keys, "val": vals, "time": times, "diff": diffs}), "key")

    def load(self, source: StateSource) -> None:
        """Take this worker's share of a checkpoint's trace and held-back updates."""
        restore_trace(self.spine, source.rows("trace"), source.value("upper"), unit=self.by_self)
        self.upper = self.spine.upper
        rows = source.rows("pending")
        if rows is None:
            return
        cols = rows.columns
        data = cols["key"] if self.by_self else list(zip(cols["key"], cols["val"]))
        for d, t, r in zip(data, cols["time"], cols["diff"]):
            slot = self.pending.get(t)
            if slot is None:
                self.pending[t] = ([d], [r])
            else:
                slot[0].append(d)
                slot[1].append(r)

    def schedule(self, ctx: OperatorContext) -> None:
        """Buffer new updates; seal what the frontier has passed."""
        spine = self.spine
        if self.keep is None:
            self.keep = spine.has_readers
            if not self.keep:
                ctx.set_interest(Interest.NEVER)
        if not self.keep:
            messages = ctx.messages(0)
            if messages:
                self._forward(ctx, messages)
            return
        pending = self.pending
        for time, batch in ctx.messages(0):
            slot = pending.get(time)
            if slot is None:
                pending[time] = (list(batch.data), list(batch.diffs))
                self._hold(ctx, time)
            else:
                slot[0].extend(batch.data)
                slot[1].extend(batch.diffs)
        frontier = ctx.frontier(0)
        if frontier != self.upper:
            self._seal(ctx, frontier)
        # Finish merges in progress a slice at a time between other actors' work. Promoting
        # idle batches (which re-merges them into larger levels) is only worth it once the
        # input has ended: while rounds keep coming, each promotion would cost a merge of the
        # whole trace per round.
        idle = frontier.is_empty() and len(spine.batches()) > 1
        if (spine.merging or idle) and spine.exert(self.IDLE_FUEL):
            ctx.activate()

    def _seal(self, ctx: OperatorContext, frontier: Antichain) -> None:
        spine = self.spine
        pending = self.pending
        caps = self.caps
        last = len(caps) - 1
        for i, cap in enumerate(caps):
            if i == last:
                upper = frontier
            else:
                upper = Antichain([*frontier, *(c.time for c in caps[i + 1 :])])
            ready = [t for t in pending if not upper.less_equal(t)]
            if not ready and upper == self.upper:
                continue
            since = least_since(self.upper, spine.domain)
            batch = self._build(ready, Description(self.upper, upper, since))
            spine.insert(batch)
            self.upper = upper
            if len(batch):
                ctx.send(0, cap.time, batch)
        if self.upper != frontier and self.upper.dominates(frontier):
            since = least_since(self.upper, spine.domain)
            spine.insert(Batch.empty(Description(self.upper, frontier, since)))
            self.upper = frontier
        # Re-derive capabilities for what is still buffered.
        new_caps = []
        for t in Antichain(pending) if pending else ():
            for cap in caps:
                if less_equal(cap.time, t):
                    new_caps.append(cap.delayed(t))
                    break
        for cap in caps:
            cap.drop()
        new_caps.sort(key=lambda c: c.time)
        self.caps = new_caps

    def _build(self, times: list[Any], description: Description) -> Batch:
        keys: list[Any] = []
        vals: list[Any] | None = None if self.by_self else []
        tcol: list[Any] = []
        diffs: list[int] = []
        pending = self.pending
        for t in times:
            data, ds = pending.pop(t)
            ks, vs = self._split(data)
            keys.extend(ks)
            if vs is not None:
                vals.extend(vs)  # type: ignore[union-attr]
            tcol.extend([t] * len(data))
            diffs.extend(ds)
        return Batch.from_columns(keys, vals, tcol, diffs, description)

    def _forward(self, ctx: OperatorContext, messages: list[tuple[Time, Any]]) -> None:
        """Send on what :meth:`forward` makes of the messages."""
        send = ctx.send
        for low, batch in self.forward(messages):
            send(0, low, batch)

    def forward(self, messages: list[tuple[Time, Any]]) -> list[tuple[Time, Any]]:
        """The messages' updates as an arrangement that keeps no trace forwards them.

        One batch per minimal message time, holding the messages at or beyond it,
        consolidated: a :class:`RawBatch`, or a ``Batch`` past :data:`FORWARD_AS_BATCH`
        updates with int keys. Updates that cancel leave nothing (no batch if all do). A
        message alone at its time that its sender consolidated (as a join does) is taken as
        it is.

        This is also the arrangement's whole job when it is an *inlet* of its one reader
        (:mod:`deltaflow.scheduler.local.plan`): the reader's actor calls it as it drains the port.

        >>> op = ArrangeOperator("arrange_by_self", Spine(Antichain([0])), by_self=True)
        >>> op.forward([(1, UpdateBatch(["a", "b"], [1, 1])), (2, UpdateBatch(["a"], [2]))])
        [(1, RawBatch(keys=['a', 'b', 'a'], vals=None, times=[1, 1, 2], diffs=[1, 1, 2]))]
        >>> op.forward([(3, UpdateBatch(["a", "b", "a", "b"], [1, 1, 1, -1]))])
        [(3, RawBatch(keys=['a'], vals=None, times=[3], diffs=[2]))]
        """
        if len(messages) == 1:
            t, batch = messages[0]
            if len(batch) <= FORWARD_AS_BATCH:
                if batch.__class__ is RunsBatch:
                    return self._forward_runs(batch)
                return self._forward_one(t, batch)
            groups = {t: messages}
        else:
            lows = Antichain(t for t, _ in messages).elements
            groups = {}
            for message in messages:
                t = message[0]
                for low in lows:
                    if low == t or less_equal(low, t):
                        break
                group = groups.get(low)
                if group is None:
                    groups[low] = [message]
                else:
                    group.append(message)
        out: list[tuple[Time, Any]] = []
        for low, group in groups.items():
            if sum(len(batch) for _, batch in group) > FORWARD_AS_BATCH and self._int_keys(group):
                out.append((low, self._as_batch(low, group)))
                continue
            if any(batch.__class__ is RunsBatch for _, batch in group):
                group = [m for t, b in group for m in _per_time(t, b)]
            # Per time, its one message, or the sums per datum of the several that meet there
            # (most groups hold one time). A lone message summed by its sender goes as it is.
            by_time: dict[Time, Any] = {}
            for t, batch in group:
                have = by_time.get(t)
                if have is None:
                    by_time[t] = batch
                    continue
                if have.__class__ is not dict:
                    have = by_time[t] = have.sum_into({})
                batch.sum_into(have)
            data: list[Any] = []
            times: list[Time] = []
            diffs: list[int] = []
            for t, entry in by_time.items():
                n = len(data)
                if entry.__class__ is dict:
                    sums = entry
                elif entry.consolidated:
                    data.extend(entry.data)
                    diffs.extend(entry.diffs)
                    times.extend(repeat(t, len(entry)))
                    continue
                else:
                    sums = entry.sum_into({})
                for d, r in sums.items():
                    if r:
                        data.append(d)
                        diffs.append(r)
                times.extend(repeat(t, len(data) - n))
            if data:
                keys, vals = self._split(data)
                out.append((low, RawBatch(keys, vals, times, diffs)))
        return out

    def _forward_one(self, t: Time, batch: Any) -> list[tuple[Time, Any]]:
        """:meth:`forward` of a single message (the usual case along a loop): its updates
        consolidated per datum (unless its sender did: ``UpdateBatch.consolidated``), all at
        its time."""
        data: list[Any] = batch.data
        diffs: list[int] = batch.diffs
        if len(data) > 1 and not batch.consolidated:
            sums = batch.sum_into({})
            if len(sums) < len(data) or not all(diffs):
                data = [d for d, r in sums.items() if r]
                diffs = [r for r in sums.values() if r]
        elif diffs and not diffs[0]:
            return []
        if not data:
            return []
        if data is batch.data:
            data, diffs = list(data), list(diffs)  # the message may have other readers
        keys, vals = self._split(data)
        return [(t, RawBatch(keys, vals, [t] * len(data), diffs))]

    def _forward_runs(self, runs: RunsBatch) -> list[tuple[Time, Any]]:
        """:meth:`forward` of a lone :class:`RunsBatch` message: its runs read in place, each
        time's updates summed per datum (none when the sender consolidated runs of distinct
        times), as one batch at their least time.

        >>> op = ArrangeOperator("arrange_by_self", Spine(Antichain([0])), by_self=True)
        >>> op._forward_runs(RunsBatch([2, 3, 2], [2, 1, 1], ["a", "b", "c", "a"], [1, 1, 1, -1]))
        [(2, RawBatch(keys=['b', 'c'], vals=None, times=[2, 3], diffs=[1, 1]))]
        """
        times = runs.times
        lows = Antichain(times).elements
        if len(lows) != 1:  # incomparable least times (or none): one batch each, as messages
            return self.forward(runs.per_time())
        data, diffs, lengths = runs.data, runs.diffs, runs.lengths
        if runs.consolidated and len(set(times)) == len(times):
            column = list(chain.from_iterable(map(repeat, times, lengths)))
            data, diffs = list(data), list(diffs)  # (the message may have other readers)
        else:
            by_time: dict[Time, dict[Any, int]] = {}
            lo = 0
            for t, n in zip(times, lengths):
                sums = by_time.get(t)
                if sums is None:
                    sums = by_time[t] = {}
                sum_diffs(data[lo : lo + n], diffs[lo : lo + n], sums)
                lo += n
            data, diffs, column = [], [], []
            for t, sums in by_time.items():
                n = len(data)
                for d, r in sums.items():
                    if r:
                        data.append(d)
                        diffs.append(r)
                column.extend(repeat(t, len(data) - n))
            if not data:
                return []
        keys, vals = self._split(data)
        return [(lows[0], RawBatch(keys, vals, column, diffs))]

    def _int_keys(self, messages: list[tuple[Time, Any]]) -> bool:
        """Whether the first datum's key is a plain int (then, likely, all of them are)."""
        first = next(batch.data[0] for _, batch in messages if len(batch))
        if not self.by_self:
            if first.__class__ is not tuple or len(first) != 2:
                return False
            first = first[0]
        return first.__class__ is int

    def _as_batch(self, low: Time, messages: list[tuple[Time, Any]]) -> Batch:
        """Many updates at or beyond ``low`` as one (vectorised) consolidated batch.

        Int data (keys, and values unless arranged by self) go into int64 columns straight
        from the messages' data, and int message times (read by the spine's domain's codec)
        into a column repeated per message, so that no Python list of keys, values or times
        is built on the way to the kernels that read the batch's columns
        (:mod:`deltaflow.framework.trace.ints`)."""
        data: list[Any] = []
        diffs: list[int] = []
        ts: list[Time] = []  # the times of the runs of data, and their lengths
        lengths: list[int] = []
        for t, batch in messages:
            data.extend(batch.data)
            diffs.extend(batch.diffs)
            if batch.__class__ is RunsBatch:
                ts.extend(batch.times)
                lengths.extend(batch.lengths)
            else:
                ts.append(t)
                lengths.append(len(batch))
        lower = Antichain([low])
        description = Description(lower, _ALL, least_since(lower, self.spine.domain))
        ints = int_data(data, self.by_self)
        times: Any
        domain = self.spine.domain
        stamps = domain.to_columns(ts) if ints is not None and domain.total else None
        if stamps is not None:
            times = np.repeat(stamps, lengths)
        else:
            times = []
            for t, n in zip(ts, lengths):
                times.extend(repeat(t, n))
        keys, vals = self._split(data) if ints is None else ints
        return Batch.from_columns(keys, vals, times, diffs, description)

    def _split(self, data: list[Any]) -> tuple[list[Any], list[Any] | None]:
        """Keys and values of a message's data (values ``None`` when arranged by self)."""
        if self.by_self:
            return data, None
        if not data:
            return [], []
        try:
            # Every datum a tuple of two, checked first: transposing alone would take a
            # two-character string for a pair and cut a triple to the shortest datum's length.
            pairs = set(map(len, data)) == _TWO and (
                (types := set(map(type, data))) == _TUPLE
                or all(issubclass(c, tuple) for c in types)
            )
        except TypeError:
            pairs = False
        if not pairs:
            bad = next(d for d in data if not is_pair(d))
            msg = f"{self.name}: expected (key, value) pairs, got {bad!r}"
            raise TypeError(msg)
        ks, vs = zip(*data)
        return list(ks), list(vs)


def _per_time(time: Time, batch: Any) -> list[tuple[Time, Any]]:
    """A message as messages of one time each."""
    return batch.per_time() if batch.__class__ is RunsBatch else [(time, batch)]


_TWO = {2}
_TUPLE = {tuple}


class AsCollection(Operator):
    """Turn an arrangement's batches back into update batches grouped by time."""

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False

    def __init__(self, name: str, by_self: bool) -> None:
        self.name = name
        self.by_self = by_self

    def schedule(self, ctx: OperatorContext) -> None:
        """Regroup every batch's updates by time and send them."""
        unit = self.by_self
        for _time, batch in ctx.messages(0):
            by_time: dict[Any, tuple[list[Any], list[int]]] = {}
            for k, v, t, r in batch.updates():
                slot = by_time.get(t)
                if slot is None:
                    slot = by_time[t] = ([], [])
                slot[0].append(k if unit else (k, v))
                slot[1].append(r)
            for t in sorted(by_time):
                d, r = by_time[t]
                ctx.send(0, t, UpdateBatch(d, r))
