"""Merging two adjacent batches into one, compacting times, a bounded amount of work at a time.

Two batches chain when the first's ``upper`` is the second's ``lower``; their merge covers
``(first.lower, second.upper)``. While merging, every time is advanced to the compaction frontier
``since`` with ``advance_by(time, since)`` and updates that land on equal ``(key, val, time)``
are summed, zeros dropped. That is what makes cancelled history disappear: ``+1`` at time 3 and
``-1`` at time 5, advanced to a frontier ``{5}``, both sit at 5 and vanish. It is correct because
``advance_by`` keeps every time's relation to every time beyond ``since``: for each ``u`` beyond
``since``, ``t <= u`` iff ``advance_by(t, since) <= u``, so every accumulation at such a ``u`` is
unchanged.

A :class:`Merger` is *resumable*: :meth:`Merger.work` does roughly ``fuel`` units of work (one
unit per input update consumed) and returns, so that a trace can spread a large merge over many
later insertions instead of stalling one of them. Each step merges a prefix of the remaining keys
of both inputs: it picks a cut key about ``fuel / 2`` updates into each input, binary-searches the
cut in both, and merges everything before it. A single key is never split, so a step may
overshoot its fuel by the size of one key.

Which merge runs depends on size and layout (see :mod:`.batch` for the two layouts):

* *Nothing to do*: when one input is empty and advancing the other's times to ``since``
  changes none of them, the result is the other batch's columns under the merged
  description (shared, not copied). Times are left alone whenever ``since`` is not beyond
  an input's ``lower`` (every time of a batch is beyond its ``lower``), which is the case of
  fresh batches meeting a reader that lags behind.
* *Plain Python, at once* (``Merger.SMALL_MERGE``): merges of at most that many updates, and
  merges of two list batches of at most ``Batch.LIST_ROWS`` updates, concatenate the rows,
  advance each distinct time once (``Product(int, int)`` times with int arithmetic, equal
  results shared as one object), sort the rows as tuples and sum equal neighbours. The result
  is a list batch. Numpy's fixed cost per call, and encoding list batches, cost more at these
  sizes.
* *Vectorised numpy, in steps*: encoded batches, and list batches of encodable data (encoded
  first, O(n)), so that a large encoded batch meeting a few fresh updates stays on this path.
  The output uses one codec per column covering both inputs (usually the codec they already
  share; otherwise the keys are re-encoded once, up front, and values and times chunk by
  chunk). Times are advanced with numpy. For ints, ``advance_by`` against ``{f}`` is
  ``max(t, f)``. For ``Product(int, int)`` times and a frontier ``f_1..f_m`` it is, per
  coordinate, ``min_j max(t_c, f_j,c)``: the lattice's meet and join are coordinate-wise, so
  this is exactly the meet over ``j`` of ``join(t, f_j)``. The advanced chunk is then sorted
  and consolidated. The output columns are allocated once, at the size of both inputs, filled
  step by step, and shrunk in place when the merge completes, so the peak memory of a merge is
  its inputs plus its output; a result of at most ``SMALL_MERGE`` updates (most of it
  cancelled) becomes a list batch.
* *Python lists, in steps*: everything else (data that cannot be encoded, an encoded batch
  meeting such a batch, large ``force_objects`` batches), advancing each distinct time once.

    >>> from deltaflow.framework.antichain import Antichain
    >>> b1 = Batch.from_updates([("x", (), 3, 1)], Description(Antichain([0]), Antichain([5])))
    >>> b2 = Batch.from_updates([("x", (), 5, -1)], Description(Antichain([5]), Antichain([9])))
    >>> m = Merger(b1, b2, Antichain([5]))
    >>> m.work(100) > 0, m.complete
    (True, True)
    >>> len(m.finish()), m.finish().description.since
    (0, Antichain([5]))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import attrs
import numpy as np

from .. import tuning
from ..antichain import Antichain
from ..lattice import Product
from ..time_domain import TimeDomain, domain_for_depth, domain_of
from . import order
from .batch import Batch
from .codec import INT, INT_CODEC, Codec, common_codec, translate
from .columns import consolidate_objects, sort_consolidate_int
from .description import Description

__all__ = ["Merger", "merge_batches", "unchanged_by"]


def _advancer(since: Antichain, domain: TimeDomain) -> Callable[[Any], Any] | None:
    """A fast ``t -> advance_by(t, since)`` (the domain's), or None when nothing changes
    (empty ``since``)."""
    elems = since.elements
    return domain.advancer(elems) if elems else None


def _domain_of(batch1: Batch, batch2: Batch, since: Antichain) -> TimeDomain:
    """The shape of two batches' times, when no trace says: that of a time they name."""
    for frontier in (batch1.description.lower, batch2.description.lower, since):
        if frontier.elements:
            return domain_of(frontier.elements[0])
    return domain_for_depth(0)  # no time is beyond an empty lower: the batches are empty


_Plan = tuple[Codec, Codec | None, Codec]
_INT_PLAN: _Plan = (INT_CODEC, INT_CODEC, INT_CODEC)
_INT_PLAN_UNIT: _Plan = (INT_CODEC, None, INT_CODEC)
_INT_PAIR = (INT_CODEC, INT_CODEC)


def _columnar_plan(
    sources: list[Batch], since: Antichain, unit: bool, domain: TimeDomain
) -> _Plan | None:
    """The output codecs ``(keys, vals or None, times)`` of a numpy merge, or None.

    None when some input is an object batch, the inputs' shapes differ, the times (of
    ``domain``) are not ints or pairs of ints, or no codec can hold the result.
    """
    plain = True
    for b in sources:
        if not b.encoded:
            return None
        if (
            b.key_codec is not INT_CODEC
            or b.time_codec is not INT_CODEC
            or (not unit and b.val_codec is not INT_CODEC)
        ):
            plain = False
    if plain:
        return (_INT_PLAN_UNIT if unit else _INT_PLAN) if domain.total else None
    kc = common_codec([b.key_codec for b in sources])
    if kc is None:
        return None
    vc = None
    if not unit:
        vc = common_codec([b.val_codec for b in sources])
        if vc is None:
            return None
    elems = since.elements
    tcs = [b.time_codec for b in sources]
    if tcs[0].kind == INT:
        if not domain.total:
            return None
        tc = common_codec(tcs)
    else:
        if domain.columns != 2:
            return None
        extra = None
        if elems:
            # Advanced coordinates lie between the inputs' and the frontier's largest ones.
            top_o = max(e.outer for e in elems)  # type: ignore[union-attr]
            top_i = max(e.inner for e in elems)  # type: ignore[union-attr]
            extra = [(top_o, top_o), (top_i, top_i)]
        tc = common_codec(tcs, extra)
    if tc is None:
        return None
    return kc, vc, tc


@attrs.define(eq=False, repr=False, init=False)
class Merger:
    """A resumable merge of two chaining batches, compacting times to ``since``.

    Args:
        batch1: the earlier batch.
        batch2: the later batch; ``batch2.lower`` must equal ``batch1.upper``.
        since: the compaction frontier; it becomes the result's ``description.since``.
        domain: the shape of the times (the trace's; by default, that of a time the batches
            name).

    Raises:
        ValueError: if the batches do not chain.

    >>> from deltaflow.framework.antichain import Antichain
    >>> d1 = Description(Antichain([0]), Antichain([2]))
    >>> d2 = Description(Antichain([2]), Antichain([4]))
    >>> b1 = Batch.from_updates([(k, 0, 0, 1) for k in range(3000)], d1)
    >>> b2 = Batch.from_updates([(k, 0, 3, 1) for k in range(3000)], d2)
    >>> m = Merger(b1, b2, Antichain([3]))
    >>> m.work(1) <= 0, m.complete        # small fuel: a step, not the whole merge
    (True, False)
    >>> m.finish().lookup(4)
    [(0, 3, 2)]
    """

    #: Merges of at most this many updates run at once in plain Python and give a list batch,
    #: as do merges whose result is at most this big, and merges of two list batches of at
    #: most ``Batch.LIST_ROWS`` updates in all (see :mod:`.batch`). 0 turns all three off.
    SMALL_MERGE: ClassVar[int] = tuning.MERGE_SMALL
    #: Fewest updates a numpy step consumes (numpy's per-call overhead dwarfs tiny steps).
    MIN_STEP: ClassVar[int] = tuning.MERGE_MIN_STEP
    #: Fewest updates a Python-list step consumes.
    MIN_OBJECT_STEP: ClassVar[int] = tuning.MERGE_MIN_OBJECT_STEP
    #: Most updates one step consumes (bounds the temporary memory of a step).
    MAX_STEP: ClassVar[int] = tuning.MERGE_MAX_STEP

    _b1: Batch
    _b2: Batch
    _description: Description
    _columnar: bool
    _unit: bool
    _i1: int
    _i2: int
    _n1: int
    _n2: int
    _w: int
    _src1: tuple[Any, ...]
    _src2: tuple[Any, ...]
    _out: list[Any]
    _natural1: bool
    _natural2: bool
    _floor: Any
    _front: list[tuple[int, int]]
    _plan: _Plan | None
    _vcs: tuple[Codec, Codec]
    _tcs: tuple[Codec, Codec]
    _advance: Callable[[Any], Any] | None
    _memo: dict[Any, Any]
    _result: Batch | None
    _domain: TimeDomain

    def __init__(
        self, batch1: Batch, batch2: Batch, since: Antichain, domain: TimeDomain | None = None
    ) -> None:
        if batch1.description.upper != batch2.description.lower:
            msg = (
                f"cannot merge batches that do not chain: first upper "
                f"{batch1.description.upper!r} != second lower {batch2.description.lower!r}"
            )
            raise ValueError(msg)
        self._b1, self._b2 = batch1, batch2
        if domain is None:
            domain = _domain_of(batch1, batch2, since)
        self._domain = domain
        self._description = Description(batch1.description.lower, batch2.description.upper, since)
        self._i1 = self._i2 = self._w = 0
        n1, n2 = self._n1, self._n2 = len(batch1), len(batch2)
        self._result = None
        self._floor = None
        self._front = []
        self._advance = None
        self._memo = {}
        self._vcs = self._tcs = _INT_PAIR
        self._plan = None
        self._columnar = False
        self._src1 = self._src2 = ()
        self._out = []
        self._natural1 = self._natural2 = True
        sources = [b for b in (batch1, batch2) if len(b)]
        self._unit = all(b.unit_values for b in sources)
        if not sources:
            self._result = Batch.empty(self._description)
            return
        if len(sources) == 1 and unchanged_by(sources[0], since, domain):
            # Merging with an empty batch (how a trace's upper advances without updates)
            # changes nothing but the description: keep the columns.
            self._i1, self._i2 = n1, n2
            self._result = sources[0].redescribed(self._description)
            return
        small = self.SMALL_MERGE
        if n1 + n2 <= small or (
            small and n1 + n2 <= Batch.LIST_ROWS and not batch1.encoded and not batch2.encoded
        ):
            # Few updates, or list batches that would have to be encoded first: plain Python.
            self._i1, self._i2 = n1, n2
            self._result = self._merge_lists(sources, since)
            return
        plan = None
        e1: Batch | None = batch1
        e2: Batch | None = batch2
        if self._unit or not any(b.unit_values for b in sources):
            # Small list batches are encoded, so that meeting a large encoded batch keeps
            # the merge vectorised.
            e1, e2 = _encodable(batch1), _encodable(batch2)
            if e1 is not None and e2 is not None:
                plan = _columnar_plan([b for b in (e1, e2) if len(b)], since, self._unit, domain)
        if plan is None or e1 is None or e2 is None:
            self._src1 = self._lists(batch1)
            self._src2 = self._lists(batch2)
            self._out = [[], [], [], []]
            self._natural1 = batch1.natural_keys or batch1.encoded
            self._natural2 = batch2.natural_keys or batch2.encoded
            self._advance = _advancer(since, domain)
            return
        self._start_columns(plan, e1, e2, sources, since)

    def _start_columns(
        self, plan: _Plan, e1: Batch, e2: Batch, sources: list[Batch], since: Antichain
    ) -> None:
        """Set up the vectorised merge of the encoded ``e1`` and ``e2`` by ``plan`` (their
        key, value and time codecs): how times advance to ``since``, the codecs each side's
        columns are read by, and the output columns."""
        n1, n2 = self._n1, self._n2
        self._plan = plan
        self._columnar = True
        elems = since.elements
        kc, vc, tc = plan
        if all(since.dominates(b.description.lower) for b in sources):
            pass  # no time changes (see _merge_lists): neither floor nor front
        elif tc is INT_CODEC:
            if elems:
                self._floor = elems[0]
        else:
            self._front = [(e.outer, e.inner) for e in elems]  # type: ignore[union-attr]
        if plan is not _INT_PLAN and plan is not _INT_PLAN_UNIT:
            self._vcs = (
                e1.val_codec if n1 else (vc or INT_CODEC),
                e2.val_codec if n2 else (vc or INT_CODEC),
            )
            self._tcs = (e1.time_codec if n1 else tc, e2.time_codec if n2 else tc)
        self._src1 = self._columns(e1, kc)
        self._src2 = self._columns(e2, kc)
        ncols = 3 if self._unit else 4
        self._out = [np.empty(n1 + n2, dtype=np.int64) for _ in range(ncols)]

    def _merge_lists(self, sources: list[Batch], since: Antichain) -> Batch:
        """Merge a few updates at once in plain Python, into a list batch.

        Runtime complexity: O(n log n) for n updates (O(n) for a few sorted runs), in Python.
        """
        unit = self._unit
        ks: list[Any] = []
        vs: list[Any] | None = None if unit else []
        ts: list[Any] = []
        ds: list[int] = []
        for b in sources:
            k, v, t, d = b.object_columns()
            ks += k
            ts += t
            ds += d
            if vs is not None:
                vs += [()] * len(k) if v is None else v
        elems = since.elements
        # Every time is beyond its batch's ``lower``: when that is beyond ``since``, so is the
        # time, and advancing it changes nothing.
        done = not elems or all(since.dominates(b.description.lower) for b in sources)
        domain = self._domain
        if not done and domain.total:
            f = min(elems)
            ts = [t if t >= f else f for t in ts]
            done = True
        if not done and domain.columns == 2:
            ts = _advance_products(ts, _pair_front(since))
            done = True
        if not done:
            advance = _advancer(since, domain)
            assert advance is not None
            # Few distinct times recur many times: advance each once.
            memo = {t: advance(t) for t in set(ts)}
            ts = [memo[t] for t in ts]
        # Numpy batches hold ints and int tuples; a list batch knows whether its keys are safe.
        safe = all(b.encoded or b.natural_keys for b in sources) or None
        return Batch.from_sorted_lists(
            self._description, *consolidate_objects(ks, vs, ts, ds, safe)
        )

    def _columns(self, b: Batch, kc: Codec) -> tuple[Any, ...]:
        if len(b) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return (empty, None if self._unit else empty, empty, empty)
        k, v, t, d = b.columns
        return (translate(k, b.key_codec, kc), v, t, d)

    def _lists(self, b: Batch) -> tuple[Any, ...]:
        """The columns of ``b`` as lists (values filled in when only the other has some)."""
        ks, vs, ts, ds = b.object_columns()
        if vs is None and not self._unit:
            vs = [()] * len(ks)
        return (ks, vs, ts, ds)

    @property
    def inputs(self) -> tuple[Batch, Batch]:
        """The two batches being merged, earlier first."""
        return self._b1, self._b2

    @property
    def description(self) -> Description:
        """The description of the merged batch."""
        return self._description

    @property
    def complete(self) -> bool:
        """True once all work is done (:meth:`finish` then returns at once)."""
        return self._result is not None

    @property
    def remaining(self) -> int:
        """Input updates not yet consumed (an upper bound on the work left)."""
        return (self._n1 - self._i1) + (self._n2 - self._i2)

    @property
    def nbytes(self) -> int:
        """Memory held by the partial output, in bytes (an estimate for list outputs)."""
        if self._result is not None:
            return 0
        if self._columnar:
            return sum(int(a.nbytes) for a in self._out)
        return 8 * sum(len(col) for col in self._out)

    def work(self, fuel: int) -> int:
        """Do about ``fuel`` units of work (one per input update consumed).

        Returns:
            The fuel left over: positive when the merge completed with fuel to spare, zero or
            negative (an overshoot) when it used it all.

        Runtime complexity: O(fuel log fuel) plus O(log n) per step.
        """
        if self._result is not None:
            return fuel
        step = self._step_columnar if self._columnar else self._step_objects
        low = self.MIN_STEP if self._columnar else self.MIN_OBJECT_STEP
        high = self.MAX_STEP
        while fuel > 0:
            budget = fuel if fuel > low else low
            if budget > high:
                budget = high
            fuel -= step(budget)
            if self._i1 == self._n1 and self._i2 == self._n2:
                self._complete()
                break
        return fuel

    def finish(self) -> Batch:
        """Complete the merge (doing all remaining work) and return the merged batch.

        Runtime complexity: O(n log n) for the remaining n updates.
        """
        while self._result is None:
            self.work(1 << 62)
        return self._result

    # ------------------------------------------------------------------ steps

    def _cut(self, budget: int) -> tuple[int, int]:
        """End positions in both inputs of the next step: a prefix of the remaining keys."""
        i1, i2, n1, n2 = self._i1, self._i2, self._n1, self._n2
        rem1, rem2 = n1 - i1, n2 - i2
        if rem1 + rem2 <= budget:
            return n1, n2
        half = max(budget >> 1, 1)
        k1, k2 = self._src1[0], self._src2[0]
        if self._columnar:
            cut: Any = None
            if rem1 > half:
                cut = int(k1[i1 + half])
            if rem2 > half:
                c2 = int(k2[i2 + half])
                if cut is None or c2 < cut:
                    cut = c2
            if cut is None:
                return n1, n2
            j1 = i1 + int(np.searchsorted(k1[i1:], cut, "left"))
            j2 = i2 + int(np.searchsorted(k2[i2:], cut, "left"))
            if j1 == i1 and j2 == i2:
                j1 = i1 + int(np.searchsorted(k1[i1:], cut, "right"))
                j2 = i2 + int(np.searchsorted(k2[i2:], cut, "right"))
            return j1, j2
        cut = None
        if rem1 > half:
            cut = k1[i1 + half]
        if rem2 > half:
            c2 = k2[i2 + half]
            if cut is None or order.lt(c2, cut):
                cut = c2
        if cut is None:
            return n1, n2
        nat1, nat2 = self._natural1, self._natural2
        j1 = order.bisect_left(k1, cut, i1, n1, nat1)
        j2 = order.bisect_left(k2, cut, i2, n2, nat2)
        if j1 == i1 and j2 == i2:
            j1 = order.bisect_right(k1, cut, i1, n1, nat1)
            j2 = order.bisect_right(k2, cut, i2, n2, nat2)
        return j1, j2

    def _step_columnar(self, budget: int) -> int:
        i1, i2 = self._i1, self._i2
        j1, j2 = self._cut(budget)
        k1, v1, t1, d1 = self._src1
        k2, v2, t2, d2 = self._src2
        concat = np.concatenate
        k = concat((k1[i1:j1], k2[i2:j2]))
        d = concat((d1[i1:j1], d2[i2:j2]))
        assert self._plan is not None
        _, vc, tc = self._plan
        if tc is INT_CODEC:
            t = concat((t1[i1:j1], t2[i2:j2]))
            if self._floor is not None:
                np.maximum(t, self._floor, out=t)
        else:
            t = self._advance_products(t1[i1:j1], t2[i2:j2])
        if vc is None:
            v = None
        else:
            vc1, vc2 = self._vcs
            v = concat((translate(v1[i1:j1], vc1, vc), translate(v2[i2:j2], vc2, vc)))
        k, v, t, d = sort_consolidate_int(k, v, t, d, Batch.SMALL)
        m = k.shape[0]
        w = self._w
        out = self._out
        out[0][w : w + m] = k
        if v is None:
            out[1][w : w + m] = t
            out[2][w : w + m] = d
        else:
            out[1][w : w + m] = v
            out[2][w : w + m] = t
            out[3][w : w + m] = d
        self._w = w + m
        self._i1, self._i2 = j1, j2
        return (j1 - i1) + (j2 - i2)

    def _advance_products(self, a: Any, b: Any) -> Any:
        """Product time codes of two slices, advanced to ``since`` and in the output codec."""
        assert self._plan is not None
        tc = self._plan[2]
        tc1, tc2 = self._tcs
        if not self._front and tc1 is tc and tc2 is tc:
            return np.concatenate((a, b))
        o1, n1 = tc1.decode_arrays(a)
        o2, n2 = tc2.decode_arrays(b)
        outer = np.concatenate((o1, o2))
        inner = np.concatenate((n1, n2))
        outer, inner = _advance_arrays(outer, inner, self._front, True)
        return tc.encode_arrays([outer, inner])

    def _step_objects(self, budget: int) -> int:
        i1, i2 = self._i1, self._i2
        j1, j2 = self._cut(budget)
        k1, v1, t1, d1 = self._src1
        k2, v2, t2, d2 = self._src2
        ks = k1[i1:j1] + k2[i2:j2]
        ts = t1[i1:j1] + t2[i2:j2]
        ds = d1[i1:j1] + d2[i2:j2]
        vs = None if self._unit else v1[i1:j1] + v2[i2:j2]
        advance = self._advance
        if advance is not None:
            # Few distinct times recur many times: advance each once.
            memo = self._memo
            try:
                ts = [memo[t] for t in ts]
            except KeyError:
                for t in set(ts).difference(memo):
                    memo[t] = advance(t)
                ts = [memo[t] for t in ts]
        ks, vs, ts, ds, _ = consolidate_objects(ks, vs, ts, ds)
        out = self._out
        out[0].extend(ks)
        if vs is not None:
            out[1].extend(vs)
        out[2].extend(ts)
        out[3].extend(ds)
        self._i1, self._i2 = j1, j2
        return (j1 - i1) + (j2 - i2)

    def _complete(self) -> None:
        desc = self._description
        out = self._out
        self._out = []
        self._src1 = self._src2 = ()
        if self._columnar:
            w = self._w
            if w == 0:
                self._result = Batch.empty(desc)
                return
            for arr in out:
                # No views of these buffers survive the steps, so shrinking in place is safe.
                arr.resize(w, refcheck=False)
            assert self._plan is not None
            kc, vc, tc = self._plan
            if self._unit:
                k, t, d = out
                result = Batch(desc, k, None, t, d, True, True, kc, INT_CODEC, tc)
            else:
                k, v, t, d = out
                result = Batch(desc, k, v, t, d, True, True, kc, vc or INT_CODEC, tc)
            if w <= self.SMALL_MERGE:
                # Most of it cancelled: keep the few updates left as a list batch.
                result = Batch.from_sorted_lists(desc, *result.object_columns(), True)
            self._result = result
            return
        ks, vs, ts, ds = out
        if not ks:
            self._result = Batch.empty(desc)
            return
        self._result = Batch.from_sorted_lists(
            desc, ks, None if self._unit else vs, ts, ds, order.is_safe(ks)
        )


def _pair_front(since: Antichain) -> list[tuple[int, int]]:
    """The elements of ``since``, ``Product(int, int)`` times, as ``(outer, inner)`` pairs."""
    return [(e[0], e[1]) for e in since.elements]  # type: ignore[index]


def _advance_products(times: list[Product], front: list[tuple[int, int]]) -> list[Product]:
    """``times``, ``Product(int, int)``, advanced to the frontier ``front`` (``(outer, inner)``
    pairs), with equal times made one object (``times`` itself when no time changes and they
    already are).

    Distinct time objects are found by identity (which hashes in C: hashing a Product calls
    its Python-level ``__hash__``) and each is advanced once, with int arithmetic (see
    :func:`_advance_pair`). Sharing objects keeps later comparisons of equal times cheap
    (tuple comparisons try identity first).

    Runtime complexity: O(n) at C speed plus O(d * len(front)) Python steps for d distinct
    time objects.
    """
    ids = list(map(id, times))
    new_of: dict[int, Product] = {}
    by_value: dict[tuple[int, int], Product] = {}
    changed = False
    for i, t in dict(zip(ids, times)).items():
        o, n = t
        pair = _advance_pair(o, n, front)
        p = by_value.get(pair)
        if p is None:
            p = by_value[pair] = t if pair == (o, n) else Product(*pair)
        if p is not t:
            changed = True
        new_of[i] = p
    if not changed:
        return times
    return list(map(new_of.__getitem__, ids))


def _advance_pair(o: int, n: int, front: list[tuple[int, int]]) -> tuple[int, int]:
    """``advance_by(Product(o, n), front)`` as an ``(outer, inner)`` pair (int arithmetic)."""
    if not front:
        return o, n
    fo, fi = front[0]
    ao = o if o >= fo else fo
    an = n if n >= fi else fi
    for fo, fi in front[1:]:
        x = o if o >= fo else fo
        if x < ao:
            ao = x
        y = n if n >= fi else fi
        if y < an:
            an = y
    return ao, an


def _advance_arrays(
    outer: Any, inner: Any, front: list[tuple[int, int]], inplace: bool
) -> tuple[Any, Any]:
    """Product coordinates ``outer``, ``inner`` (int64 arrays) advanced to the frontier
    ``front`` (``inplace``: the inputs may be overwritten).

    ``advance_by`` is the meet (coordinate-wise min) over ``f`` of ``join(t, f)``
    (coordinate-wise max). Runtime complexity: O(n * len(front)), vectorised.
    """
    if not front:
        return outer, inner
    fo, fi = front[0]
    if len(front) == 1 and inplace:
        np.maximum(outer, fo, out=outer)
        np.maximum(inner, fi, out=inner)
        return outer, inner
    ro, ri = np.maximum(outer, fo), np.maximum(inner, fi)
    for fo, fi in front[1:]:
        np.minimum(ro, np.maximum(outer, fo), out=ro)
        np.minimum(ri, np.maximum(inner, fi), out=ri)
    return ro, ri


def unchanged_by(b: Batch, since: Antichain, domain: TimeDomain) -> bool:
    """Whether advancing every time of ``b`` (of ``domain``) to ``since`` leaves it as it is
    (then a merge of ``b`` with an empty batch can keep ``b``'s columns).

    Runtime complexity: O(n), vectorised for numpy batches; O(n) at C speed plus O(d) Python
    steps for d distinct time objects for list batches.
    """
    elems = since.elements
    if not len(b) or not elems or since.dominates(b.description.lower):
        return True  # no times, or every time is beyond ``lower``, so beyond ``since``
    if b.encoded:
        tc = b.time_codec
        if tc is INT_CODEC:
            return domain.total and int(b.columns[2].min()) >= min(elems)
        if domain.columns != 2:
            return False
        front = _pair_front(since)
        outer, inner = tc.decode_arrays(b.columns[2])
        ro, ri = _advance_arrays(outer, inner, front, False)
        return bool(np.array_equal(ro, outer) and np.array_equal(ri, inner))
    ts = b.columns[2]
    if domain.total:
        return min(ts) >= min(elems)  # type: ignore[no-any-return]
    if domain.columns == 2:
        front = _pair_front(since)
        for o, n in dict.fromkeys([(t[0], t[1]) for t in ts]):
            if _advance_pair(o, n, front) != (o, n):
                return False
        return True
    advance = _advancer(since, domain)
    assert advance is not None
    return all(advance(t) == t for t in dict(zip(map(id, ts), ts)).values())


def _encodable(b: Batch) -> Batch | None:
    """``b`` in the numpy layout for a vectorised merge, or None.

    Empty and numpy batches are returned as they are; list batches of at most
    :attr:`Batch.LIST_ROWS <.batch.Batch.LIST_ROWS>` updates are encoded when their data
    allows it. Larger list batches stay lists (their data was not encodable, or
    ``force_objects`` asked for lists).
    """
    if b.encoded or not len(b):
        return b
    if len(b) > Batch.LIST_ROWS:
        return None
    return b.as_encoded()


def merge_batches(batch1: Batch, batch2: Batch, since: Antichain) -> Batch:
    """Merge two chaining batches at once, compacting times to ``since``.

    Runtime complexity: O(n log n).

    >>> from deltaflow.framework.antichain import Antichain
    >>> b1 = Batch.from_updates([(1, 0, 0, 1)], Description(Antichain([0]), Antichain([1])))
    >>> b2 = Batch.from_updates([(1, 0, 1, 1)], Description(Antichain([1]), Antichain([2])))
    >>> list(merge_batches(b1, b2, Antichain([1])).updates())
    [(1, 0, 1, 2)]
    """
    return Merger(batch1, batch2, since).finish()
