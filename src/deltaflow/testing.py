"""Helpers for writing deltaflow tests and examples.

A deltaflow collection is a list of ``(data, time, diff)`` updates; the collection *at* time
``t`` is the multiset obtained by adding up the diffs of every update whose time is
``less_equal`` ``t`` (partial order, so with :class:`~deltaflow.framework.lattice.Product`
times this is not "every update listed so far").

* :func:`updates` writes update lists as small text tables, so a test reads like a spec.
* :func:`accumulate` gives the collection at one time.
* :func:`assert_collections_equal` compares two update lists *as collections*: two lists that
  differ as lists (different consolidation, updates split or merged differently) are equal if
  they accumulate to the same multiset at every time. Checking the times that appear in
  either list and their joins is enough: at any other time ``u`` both lists accumulate the
  same updates as at the join of their times ``<= u``.
* :func:`collect` runs a pipeline and returns its output in a canonical form (consolidated,
  deterministically sorted), so tests can compare outputs as lists.
* :func:`example` runs a bare ``build`` function, so a docstring example fits in three lines.

Footgun: times written as tuples in :func:`updates` become :class:`Product` values; in Python
code never use a bare tuple as a time (tuples compare lexicographically, which is a total
order, not the product partial order).

    >>> batch = updates('''
    ...     data | time | diff
    ...     ---  | ---  | ---
    ...     'a'  | 0    | 1
    ...     'b'  | 1    | 2
    ...     'a'  | 2    | -1
    ... ''')
    >>> accumulate(batch, 1)
    {'a': 1, 'b': 2}
    >>> assert_collections_equal(batch, [('b', 1, 1), ('a', 0, 1), ('b', 1, 1), ('a', 2, -1)])
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from deltaflow.framework.lattice import Product, Time, join_closure, less_equal, sort_key
from deltaflow.operators.collection import Collection
from deltaflow.operators.pipeline import Pipeline
from deltaflow.scheduler.collector import GC_THRESHOLD
from deltaflow.scheduler.runtime import run

__all__ = ["accumulate", "assert_collections_equal", "collect", "example", "updates"]

Update = tuple[Any, Time, int]

_SEPARATOR_CHARS = frozenset("-|:+ \t")
_LITERAL_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)
_MAX_REPORTED = 30


def _as_time(value: object) -> Time:
    """Turn a literal (an int, or nested 2-tuples of ints) into a time."""
    if value.__class__ is int:
        return value
    if isinstance(value, tuple):
        if len(value) != 2:
            msg = f"a product time is a pair (outer, inner), got {len(value)} coordinates"
            raise ValueError(msg)
        return Product(_as_time(value[0]), _as_time(value[1]))
    msg = f"a time is an int or a pair (outer, inner), got {value!r}"
    raise ValueError(msg)


def _parse_line(line: str) -> tuple[Any, Time, int]:
    body = line.strip()
    if body.startswith("|") and body.endswith("|") and len(body) > 1:
        body = body[1:-1]
    fields = body.rsplit("|", 2)
    if len(fields) != 3:
        msg = f"expected three fields 'data | time | diff', got {len(fields)}"
        raise ValueError(msg)
    data_text, time_text, diff_text = (f.strip() for f in fields)
    try:
        data = ast.literal_eval(data_text)
    except _LITERAL_ERRORS:
        msg = f"data {data_text!r} is not a Python literal (quote strings: 'apple')"
        raise ValueError(msg) from None
    try:
        hash(data)
    except TypeError:
        msg = f"data {data!r} is not hashable (use tuples instead of lists)"
        raise ValueError(msg) from None
    try:
        time = _as_time(ast.literal_eval(time_text))
    except _LITERAL_ERRORS as exc:
        msg = f"bad time {time_text!r}: {exc}"
        raise ValueError(msg) from None
    try:
        diff = ast.literal_eval(diff_text)
    except _LITERAL_ERRORS:
        diff = None
    if diff.__class__ is not int:
        msg = f"diff {diff_text!r} is not an integer"
        raise ValueError(msg)
    return data, time, diff


def updates(text: str) -> list[Update]:
    """Parse a small table of updates, one ``data | time | diff`` per line.

    Each field is a Python literal (:func:`ast.literal_eval`). A time is an ``int`` or a pair
    ``(outer, inner)`` meaning ``Product(outer, inner)``; nested pairs nest products. A header
    line ``data | time | diff``, markdown separator lines (``--- | --- | ---``), outer pipes
    (``| 1 | 0 | 1 |``), blank lines and lines starting with ``#`` are all optional and
    ignored. Data may itself contain ``|`` inside a string: only the last two pipes split.

    Args:
        text: the table.

    Returns:
        The updates in the order written.

    Raises:
        ValueError: a line is malformed; the message names its line number (1-based, in
            ``text``) and its text.

    >>> updates('''
    ...     # word     | time   | diff
    ...     ('x', 1)   | 0      | 1
    ...     'y'        | (1, 2) | -1
    ... ''')
    [(('x', 1), 0, 1), ('y', Product(outer=1, inner=2), -1)]
    >>> updates("'a' | 0 | one")
    Traceback (most recent call last):
    ...
    ValueError: line 1: "'a' | 0 | one": diff 'one' is not an integer
    """
    out: list[Update] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "-" in stripped and set(stripped) <= _SEPARATOR_CHARS:
            continue
        cells = [c.strip().lower() for c in stripped.strip("|").split("|")]
        if cells == ["data", "time", "diff"]:
            continue
        try:
            out.append(_parse_line(stripped))
        except ValueError as exc:
            msg = f"line {lineno}: {stripped!r}: {exc}"
            raise ValueError(msg) from None
    return out


def accumulate(updates: Iterable[Update], time: Time) -> dict[Any, int]:
    """The collection at ``time``: summed diffs of the updates at times ``<= time``.

    Uses the partial order (:func:`~deltaflow.framework.lattice.less_equal`); data whose
    diffs sum to zero are dropped.

    Runtime complexity: O(len(updates)) comparisons.

    >>> from deltaflow.framework.lattice import Product
    >>> accumulate([('a', Product(0, 1), 1), ('b', Product(1, 0), 1)], Product(0, 5))
    {'a': 1}
    >>> accumulate([('a', 0, 1), ('a', 1, -1)], 1)
    {}
    """
    acc: dict[Any, int] = {}
    for data, t, diff in updates:
        if less_equal(t, time):
            acc[data] = acc.get(data, 0) + diff
    return {d: c for d, c in acc.items() if c}


def _sorted_data(data: Iterable[Any]) -> list[Any]:
    items = list(data)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=repr)


def assert_collections_equal(
    actual_updates: Iterable[Update],
    expected_updates: Iterable[Update],
    times: Iterable[Time] | None = None,
) -> None:
    """Assert that two update lists accumulate to the same collection at every time.

    Args:
        actual_updates: what the computation produced.
        expected_updates: what it should have produced.
        times: the times at which to compare. By default every time appearing in either list
            plus the joins of those times, which covers every time there is.

    Raises:
        AssertionError: listing, for each differing ``(time, data)``, the expected and the
            actual count (at most 30 rows, then how many more).

    >>> assert_collections_equal([('a', 0, 1), ('a', 0, 1)], [('a', 0, 2)])
    >>> assert_collections_equal([('a', 0, 1)], [('a', 0, 1), ('b', 2, 1)])
    Traceback (most recent call last):
    ...
    AssertionError: collections differ at 1 (time, data) point(s):
      time | data | expected | actual
      2 | 'b' | 1 | 0
    """
    actual = list(actual_updates)
    expected = list(expected_updates)
    if times is None:
        check = join_closure([t for _, t, _ in actual] + [t for _, t, _ in expected])
    else:
        check = set(times)
    rows: list[str] = []
    mismatches = 0
    for t in sorted(check, key=sort_key):
        got = accumulate(actual, t)
        want = accumulate(expected, t)
        if got == want:
            continue
        for data in _sorted_data(set(got) | set(want)):
            g, w = got.get(data, 0), want.get(data, 0)
            if g != w:
                mismatches += 1
                if len(rows) < _MAX_REPORTED:
                    rows.append(f"  {t!r} | {data!r} | {w} | {g}")
    if mismatches:
        lines = [f"collections differ at {mismatches} (time, data) point(s):"]
        lines.append("  time | data | expected | actual")
        lines.extend(rows)
        if mismatches > len(rows):
            lines.append(f"  ... and {mismatches - len(rows)} more")
        raise AssertionError("\n".join(lines))


def _canonical(ups: Iterable[Update]) -> list[Update]:
    """Sum the diffs of equal ``(data, time)``, drop zeros, sort by time then data."""
    acc: dict[tuple[Any, Time], int] = {}
    get = acc.get
    for data, t, diff in ups:
        key = (data, t)
        acc[key] = get(key, 0) + diff
    out = [(d, t, r) for (d, t), r in acc.items() if r]
    try:
        out.sort(key=lambda u: (sort_key(u[1]), u[0]))
    except TypeError:
        out.sort(key=lambda u: (sort_key(u[1]), type(u[0]).__name__, repr(u[0])))
    return out


def collect(
    pipeline: Pipeline,
    workers: int = 1,
    *,
    processes: int = 1,
    fuse: bool = True,
    **inputs: Iterable[Update],
) -> Any:
    """Run ``pipeline`` over complete inputs and return its output updates, canonically.

    Like :func:`deltaflow.run`, but the result does not depend on how the run split or
    ordered its work: no two updates share a ``(data, time)``, no diff is zero, and the list
    is sorted by time (outermost coordinate first), then by data (by ``repr`` when the data
    do not compare). Two runs that computed the same collections therefore return equal
    lists. A ``build()`` returning a dict of collections gives a dict of such lists.

    Args:
        pipeline: the :class:`~deltaflow.Pipeline` instance to run.
        workers: how many workers to run it on.
        processes: how many processes they run in (see :func:`deltaflow.open`).
        fuse: fuse chains of linear operators into one actor (see :func:`deltaflow.open`).
        **inputs: one iterable of ``(data, time, diff)`` per input name.

    Raises:
        TypeError, ValueError, OperatorError: as :func:`deltaflow.run` does.

    >>> class Halves(Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: x // 2)
    >>> collect(Halves(), workers=2, xs=[(3, 1, 1), (2, 1, 1), (5, 0, 1), (4, 2, -1)])
    [(2, 0, 1), (1, 1, 2), (2, 2, -1)]
    """
    result = run(
        pipeline,
        workers,
        processes=processes,
        fuse=fuse,
        gc_threshold=GC_THRESHOLD,
        progress=False,
        **inputs,  # type: ignore[arg-type]
    )
    if isinstance(result, dict):
        return {name: _canonical(ups) for name, ups in result.items()}
    return _canonical(result)


def example(build: Callable[..., Collection | dict[str, Collection]], **inputs: Any) -> Any:
    """Run a bare ``build`` function as a one-off pipeline: ``df.run``'s result.

    ``build`` takes the input collections as keyword arguments (its parameter names are the
    input names) and returns a collection (or a dict of them); ``inputs`` are the update
    lists. It saves writing a :class:`~deltaflow.Pipeline` subclass in short examples. A
    parameter with a default (``lambda xs, k=2: ...``) is an input that may be left out
    (empty), as :func:`deltaflow.optional` declares one.

    >>> example(lambda words: words.map(len), words=[("hi", 0, 1), ("hey", 1, 2)])
    [(2, 0, 1), (3, 1, 2)]
    >>> example(lambda xs, ys: xs.concat(ys.negate()), xs=[("a", 0, 1)], ys=[("a", 1, 1)])
    [('a', 0, 1), ('a', 1, -1)]
    """
    pipeline_class = type("Example", (Pipeline,), {"build": staticmethod(build)})
    params = inspect.signature(build).parameters.values()
    left_out: dict[str, Any] = {
        p.name: [] for p in params if p.default is not p.empty and p.name not in inputs
    }
    return run(pipeline_class(), **{**inputs, **left_out})
