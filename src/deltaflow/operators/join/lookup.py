"""Looking keys up in a side's sorted int runs (:class:`~.kernel.SortedRuns`): the columns of
one run read as memoryviews for a few keys (:class:`RunView`, a binary search per key), or
gathered with numpy for many (:func:`lookup_run`).

    >>> import numpy as np
    >>> from deltaflow.framework.trace.ints import Columns
    >>> run = Columns(np.array([2, 4, 4]), None, np.array([1, 0, 2]), np.array([1, 1, -1]), None)
    >>> found = {}
    >>> lookup_run(run, [4, 3], np.array([4, 3]), found)
    >>> found
    {4: [((), 0, 1), ((), 2, -1)]}
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ...framework.lattice import Product, new_tuple
from ...framework.trace.ints import Columns, gather, pair_keys

if TYPE_CHECKING:
    from ...framework.lattice import Time

__all__ = ["RunView", "codes_of", "lookup_run", "values_of"]


def codes_of(keys: list[Any], run: Columns) -> list[int] | None:
    """``keys`` as codes of ``run``'s kind (plain ints as themselves), or None."""
    if run.objs is not None:
        packed = pair_keys(keys)
        return None if packed is None else packed.tolist()
    for key in keys:
        if key.__class__ is not int:
            return None
    return keys


def _memory(column: Any) -> memoryview:
    """A flat memoryview of an int64 array (a copy only if it is not contiguous)."""
    flat: Any = np.ascontiguousarray(column).reshape(-1)
    return memoryview(flat)


@attrs.define(slots=True, eq=False)
class RunView:
    """A run's columns as memoryviews over its arrays (no copy): an element read as a
    Python int costs an index, where numpy costs a call; searched by :func:`bisect_left`.

    >>> from deltaflow.operators.arrange import RawBatch
    >>> from deltaflow.operators.join.kernel import SortedRuns
    >>> from deltaflow.framework.time_domain import INT
    >>> side = SortedRuns(alone=True, domain=INT)
    >>> side.add(RawBatch([4, 2, 4], [1, 2, 1], [0, 1, 2], [1, 1, -1]))
    >>> found = {}
    >>> RunView.of(side.runs()[0]).lookup([4, 3], [4, 3], found)
    >>> found
    {4: [(1, 0, 1), (1, 2, -1)]}
    """

    keys: memoryview
    vals: Any  # a memoryview, a list of objects, or None (every value ``()``)
    times: memoryview  # ``(n, 2)`` times flattened: outer at 2i, inner at 2i + 1
    product: bool
    diffs: memoryview

    @classmethod
    def of(cls, run: Columns) -> RunView:
        """The views of ``run``'s columns."""
        vals = run.vals
        if isinstance(vals, np.ndarray):
            vals = _memory(vals)
        return cls(
            _memory(run.keys), vals, _memory(run.times), run.times.ndim == 2, _memory(run.diffs)
        )

    def lookup(
        self, keys: list[Any], codes: list[int], found: dict[Any, list[tuple[Any, Time, int]]]
    ) -> None:
        """Add the ``(val, time, diff)`` updates held of ``keys`` (their ``codes``) to
        ``found``: a binary search per key, then a step per update found."""
        sorted_keys = self.keys
        n = len(sorted_keys)
        vals, times, diffs, product = self.vals, self.times, self.diffs, self.product
        for key, code in zip(keys, codes):
            lo = bisect_left(sorted_keys, code)
            if lo == n or sorted_keys[lo] != code:
                continue
            hi = lo + 1
            while hi < n and sorted_keys[hi] == code:
                hi += 1
            rows = []
            for i in range(lo, hi):
                t = new_tuple(Product, (times[2 * i], times[2 * i + 1])) if product else times[i]
                rows.append((() if vals is None else vals[i], t, diffs[i]))
            have = found.get(key)
            if have is None:
                found[key] = rows
            else:
                have.extend(rows)


def lookup_run(
    run: Columns, keys: list[Any], codes: Any, found: dict[Any, list[tuple[Any, Time, int]]]
) -> None:
    """Add the updates ``run`` holds of ``keys`` to ``found``, gathered in one pass."""
    lo = np.searchsorted(run.keys, codes, "left")
    counts = np.searchsorted(run.keys, codes, "right") - lo
    hit = np.flatnonzero(counts)
    if not len(hit):
        return
    counts = counts[hit]
    n = int(counts.sum())
    ends = np.cumsum(counts)
    rows = np.arange(n) + np.repeat(lo[hit] - ends + counts, counts)
    times = run.times[rows].tolist()
    if run.times.ndim == 2:
        times = [new_tuple(Product, t) for t in times]
    got = list(zip(values_of(gather(run.vals, rows), n), times, run.diffs[rows].tolist()))
    pos = 0
    for j, m in zip(hit.tolist(), counts.tolist()):
        key = keys[j]
        have = found.get(key)
        if have is None:
            found[key] = got[pos : pos + m]
        else:
            have.extend(got[pos : pos + m])
        pos += m


def values_of(vals: Any, n: int) -> list[Any]:
    """``n`` values as a list: a column of them (a list or an int64 array), or ``()`` each
    when ``vals`` is None (a collection of keys alone)."""
    if vals is None:
        return [()] * n
    if isinstance(vals, np.ndarray):
        return vals.tolist()  # type: ignore[no-any-return]
    return vals  # type: ignore[no-any-return]
