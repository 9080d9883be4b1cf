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

Encoded batches (numpy code columns, see :mod:`.batch`) merge with vectorised numpy when both
have the same shapes: the output uses one codec per column covering both inputs (usually the
codec they already share; otherwise the keys are re-encoded once, up front, and values and times
chunk by chunk). Times are advanced with numpy. For ints, ``advance_by`` against ``{f}`` is
``max(t, f)``. For ``Product(int, int)`` times and a frontier ``f_1..f_m`` it is, per coordinate,
``min_j max(t_c, f_j,c)``: the lattice's meet and join are coordinate-wise, so this is exactly
the meet over ``j`` of ``join(t, f_j)``. The advanced chunk is then sorted and consolidated. The
output columns are allocated once, at the size of both inputs, filled step by step, and shrunk in
place when the merge completes, so the peak memory of a merge is its inputs plus its output.
Other batches (and an encoded batch meeting an object batch) merge as Python lists, advancing
each distinct time once.

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

from ..antichain import Antichain
from ..lattice import Product, advance_by, join, less_equal
from . import _order
from .batch import (
    _INT,
    _INT_CODEC,
    _SMALL,
    Batch,
    _Codec,
    _common_codec,
    _consolidate_objects,
    _small_int_arrays,
    _sort_consolidate_int,
    _translate,
)
from .description import Description

__all__ = ["Merger", "merge_batches"]


def _advancer(since: Antichain) -> Callable[[Any], Any] | None:
    """A fast ``t -> advance_by(t, since)``, or None when nothing changes (empty ``since``)."""
    elems = since.elements
    if not elems:
        return None
    if len(elems) == 1:
        f = elems[0]
        if f.__class__ is int:
            return lambda t: t if t >= f else f
        return lambda t: t if less_equal(f, t) else join(t, f)
    return lambda t: advance_by(t, elems)


_Plan = tuple[_Codec, _Codec | None, _Codec]
_INT_PLAN: _Plan = (_INT_CODEC, _INT_CODEC, _INT_CODEC)
_INT_PLAN_UNIT: _Plan = (_INT_CODEC, None, _INT_CODEC)
_INT_PAIR = (_INT_CODEC, _INT_CODEC)


def _columnar_plan(sources: list[Batch], since: Antichain, unit: bool) -> _Plan | None:
    """The output codecs ``(keys, vals or None, times)`` of a numpy merge, or None.

    None when some input is an object batch, the inputs' shapes differ, the frontier's times
    do not have the batches' time shape, or no codec can hold the result.
    """
    plain = True
    for b in sources:
        if not b._columnar:
            return None
        if (
            b._kc is not _INT_CODEC
            or b._tc is not _INT_CODEC
            or (not unit and b._vc is not _INT_CODEC)
        ):
            plain = False
    if plain:
        for e in since.elements:
            if e.__class__ is not int:
                return None
        return _INT_PLAN_UNIT if unit else _INT_PLAN
    kc = _common_codec([b._kc for b in sources])
    if kc is None:
        return None
    vc = None
    if not unit:
        vc = _common_codec([b._vc for b in sources])
        if vc is None:
            return None
    elems = since.elements
    tcs = [b._tc for b in sources]
    if tcs[0].kind == _INT:
        if not all(e.__class__ is int for e in elems):
            return None
        tc = _common_codec(tcs)
    else:
        for e in elems:
            if e.__class__ is not Product or e.outer.__class__ is not int:
                return None
            if e.inner.__class__ is not int:
                return None
        extra = None
        if elems:
            # Advanced coordinates lie between the inputs' and the frontier's largest ones.
            top_o = max(e.outer for e in elems)  # type: ignore[union-attr]
            top_i = max(e.inner for e in elems)  # type: ignore[union-attr]
            extra = [(top_o, top_o), (top_i, top_i)]
        tc = _common_codec(tcs, extra)
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

    #: Fewest updates a numpy step consumes (numpy's per-call overhead dwarfs tiny steps).
    MIN_STEP: ClassVar[int] = 1024
    #: Fewest updates a Python-list step consumes.
    MIN_OBJECT_STEP: ClassVar[int] = 32
    #: Most updates one step consumes (bounds the temporary memory of a step).
    MAX_STEP: ClassVar[int] = 1 << 16

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
    _vcs: tuple[_Codec, _Codec]
    _tcs: tuple[_Codec, _Codec]
    _advance: Callable[[Any], Any] | None
    _memo: dict[Any, Any]
    _result: Batch | None

    def __init__(self, batch1: Batch, batch2: Batch, since: Antichain) -> None:
        if batch1.description.upper != batch2.description.lower:
            msg = (
                f"cannot merge batches that do not chain: first upper "
                f"{batch1.description.upper!r} != second lower {batch2.description.lower!r}"
            )
            raise ValueError(msg)
        self._b1, self._b2 = batch1, batch2
        self._description = Description(batch1.description.lower, batch2.description.upper, since)
        self._i1 = self._i2 = self._w = 0
        self._n1, self._n2 = len(batch1), len(batch2)
        self._result = None
        self._floor = None
        self._front = []
        self._advance = None
        self._memo = {}
        self._vcs = self._tcs = _INT_PAIR
        sources = [b for b in (batch1, batch2) if len(b)]
        self._unit = all(b._vals is None for b in sources)
        same_vals = self._unit or all(b._vals is not None for b in sources)
        plan = None
        if sources and same_vals:
            plan = _columnar_plan(sources, since, self._unit)
        self._plan = plan
        self._columnar = plan is not None
        elems = since.elements
        if plan is _INT_PLAN or plan is _INT_PLAN_UNIT:
            if elems:
                self._floor = elems[0]
        elif plan is not None:
            _, vc, tc = plan
            if tc is _INT_CODEC:
                if elems:
                    self._floor = elems[0]
            else:
                self._front = [(e.outer, e.inner) for e in elems]  # type: ignore[union-attr]
            self._vcs = (
                batch1._vc if self._n1 else (vc or _INT_CODEC),
                batch2._vc if self._n2 else (vc or _INT_CODEC),
            )
            self._tcs = (batch1._tc if self._n1 else tc, batch2._tc if self._n2 else tc)
        if not sources:
            self._src1 = self._src2 = ()
            self._out = []
            self._natural1 = self._natural2 = True
            self._result = Batch.empty(self._description)
        elif plan is not None and self._n1 + self._n2 <= _SMALL:
            self._src1 = self._src2 = ()
            self._out = []
            self._natural1 = self._natural2 = True
            self._i1, self._i2 = self._n1, self._n2
            self._result = self._merge_small(sources, plan)
        elif plan is not None:
            self._src1 = self._columns(batch1, plan[0])
            self._src2 = self._columns(batch2, plan[0])
            total = self._n1 + self._n2
            ncols = 3 if self._unit else 4
            self._out = [np.empty(total, dtype=np.int64) for _ in range(ncols)]
            self._natural1 = self._natural2 = True
        else:
            self._src1 = self._lists(batch1)
            self._src2 = self._lists(batch2)
            self._out = [[], [], [], []]
            self._natural1 = batch1._natural or batch1._columnar
            self._natural2 = batch2._natural or batch2._columnar
            self._advance = _advancer(since)

    def _merge_small(self, sources: list[Batch], plan: _Plan) -> Batch:
        """Merge a few encoded updates at once in plain Python (cheaper than numpy calls)."""
        kc, vc, tc = plan
        ks: list[int] = []
        vs: list[int] | None = None if vc is None else []
        ts: list[int] = []
        ds: list[int] = []
        floor = self._floor
        if plan is _INT_PLAN or plan is _INT_PLAN_UNIT:
            for b in sources:
                ks += b._keys.tolist()
                if vs is not None:
                    vs += b._vals.tolist()
                ts += b._times.tolist()
                ds += b._diffs.tolist()
            if floor is not None:
                ts = [t if t >= floor else floor for t in ts]
            k, v, t, d = _small_int_arrays(ks, vs, ts, ds)
            if not len(k):
                return Batch.empty(self._description)
            return Batch(self._description, k, v, t, d, True, True)
        for b in sources:
            ks += _translate(b._keys, b._kc, kc).tolist()
            if vs is not None:
                assert vc is not None
                vs += _translate(b._vals, b._vc, vc).tolist()
            if tc is _INT_CODEC:
                times = b._times.tolist()
                if floor is not None:
                    times = [t if t >= floor else floor for t in times]
            else:
                times = _advance_product_codes(b._times.tolist(), b._tc, tc, self._front)
            ts += times
            ds += b._diffs.tolist()
        k, v, t, d = _small_int_arrays(ks, vs, ts, ds)
        if not len(k):
            return Batch.empty(self._description)
        return Batch(self._description, k, v, t, d, True, True, kc, vc or _INT_CODEC, tc)

    def _columns(self, b: Batch, kc: _Codec) -> tuple[Any, ...]:
        if len(b) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return (empty, None if self._unit else empty, empty, empty)
        return (_translate(b._keys, b._kc, kc), b._vals, b._times, b._diffs)

    def _lists(self, b: Batch) -> tuple[Any, ...]:
        ks, vs, ts, ds = b._object_columns()
        if vs is None and not self._unit:
            vs = [()] * len(ks)
        return (ks, vs, ts, ds)

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
            if cut is None or _order.lt(c2, cut):
                cut = c2
        if cut is None:
            return n1, n2
        nat1, nat2 = self._natural1, self._natural2
        j1 = _order.bisect_left(k1, cut, i1, n1, nat1)
        j2 = _order.bisect_left(k2, cut, i2, n2, nat2)
        if j1 == i1 and j2 == i2:
            j1 = _order.bisect_right(k1, cut, i1, n1, nat1)
            j2 = _order.bisect_right(k2, cut, i2, n2, nat2)
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
        if tc is _INT_CODEC:
            t = concat((t1[i1:j1], t2[i2:j2]))
            if self._floor is not None:
                np.maximum(t, self._floor, out=t)
        else:
            t = self._advance_products(t1[i1:j1], t2[i2:j2])
        if vc is None:
            v = None
        else:
            vc1, vc2 = self._vcs
            v = concat((_translate(v1[i1:j1], vc1, vc), _translate(v2[i2:j2], vc2, vc)))
        k, v, t, d = _sort_consolidate_int(k, v, t, d)
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
        o1, n1 = tc1.decode_arrays(a)
        o2, n2 = tc2.decode_arrays(b)
        outer = np.concatenate((o1, o2))
        inner = np.concatenate((n1, n2))
        front = self._front
        if len(front) == 1:
            fo, fi = front[0]
            np.maximum(outer, fo, out=outer)
            np.maximum(inner, fi, out=inner)
        elif front:
            # advance_by: the meet (coordinate-wise min) over f of join(t, f) (coordinate-wise max).
            fo, fi = front[0]
            ro, ri = np.maximum(outer, fo), np.maximum(inner, fi)
            for fo, fi in front[1:]:
                np.minimum(ro, np.maximum(outer, fo), out=ro)
                np.minimum(ri, np.maximum(inner, fi), out=ri)
            outer, inner = ro, ri
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
        ks, vs, ts, ds = _consolidate_objects(ks, vs, ts, ds)
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
                self._result = Batch(desc, k, None, t, d, True, True, kc, _INT_CODEC, tc)
            else:
                k, v, t, d = out
                self._result = Batch(desc, k, v, t, d, True, True, kc, vc or _INT_CODEC, tc)
            return
        ks, vs, ts, ds = out
        if not ks:
            self._result = Batch.empty(desc)
            return
        self._result = Batch(
            desc, ks, None if self._unit else vs, ts, ds, False, _order.is_safe(ks)
        )


def _advance_product_codes(
    codes: list[int], src: _Codec, dst: _Codec, front: list[tuple[int, int]]
) -> list[int]:
    """Product time codes of ``src`` advanced to the frontier ``front`` and re-encoded in ``dst``.

    Plain Python, one computation per distinct code (for small merges).
    """
    so, mi = src.shifts[0], (1 << src.widths[1]) - 1
    oo, oi = src.offsets
    do, di = dst.offsets
    dw = dst.widths[1]
    memo: dict[int, int] = {}
    for c in set(codes):
        o = (c >> so) + oo
        i = (c & mi) + oi
        if front:
            o, i = (
                min(o if o >= fo else fo for fo, _ in front),
                min(i if i >= fi else fi for _, fi in front),
            )
        memo[c] = ((o - do) << dw) | (i - di)
    return [memo[c] for c in codes]


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
