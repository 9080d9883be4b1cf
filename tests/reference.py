"""The from-scratch oracle: what any deltaflow computation must output, recomputed naively.

Every deltaflow operator, and every composition of them, is a function of collections: for
every time ``t``, ``output[t] = query(inputs[t])``, where ``inputs[t]`` accumulates every input
update at a time ``less_equal`` ``t``. This module evaluates that definition literally, with
no incremental state at all, so tests can compare an incremental run against it:

* inputs are named lists of ``(data, time, diff)`` updates (``{"edges": [...], ...}``);
* a *query* is plain Python over multisets: it gets ``{name: collections.Counter}`` (the
  accumulated inputs, zero counts dropped, negative counts kept) and returns a ``Counter``
  (one output) or a ``dict`` of ``Counter``\\ s (several named outputs);
* :func:`expected_at` gives the expected output collection at one time, and
  :func:`assert_matches_oracle` compares actual output update lists with it at every time
  that matters (:func:`interesting_times_for_check`).

Which times matter: a collection built from updates at times ``S`` is, at any time ``u``, equal
to its value at ``join{s in S : s <= u}`` (or to the empty collection when no ``s <= u``). So
comparing two update lists at every time in the join closure of *both* lists' times (plus
the least time, for queries that are non-empty on empty inputs) compares them everywhere.

Int and :class:`~deltaflow.framework.lattice.Product` times (nested too) both work; all the
times of one check must have the same shape.

    >>> from deltaflow.framework.lattice import Product
    >>> inputs = {"xs": [("a", Product(0, 1), 1), ("a", Product(1, 0), 1)]}
    >>> count = lambda c: Counter({n: 1 for n in c["xs"].values()})
    >>> expected_at(inputs, count, Product(1, 1))
    {2: 1}
    >>> assert_matches_oracle([(1, Product(0, 1), 1), (1, Product(1, 0), 1),
    ...                        (1, Product(1, 1), -2), (2, Product(1, 1), 1)], inputs, count)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from deltaflow.framework.lattice import Time, join_closure, minimum_like, sort_key
from deltaflow.testing import accumulate

__all__ = [
    "Inputs",
    "Query",
    "Update",
    "assert_matches_oracle",
    "collection_at",
    "expected_at",
    "expected_updates",
    "inputs_at",
    "interesting_times_for_check",
]

Update = tuple[Any, Time, int]
Inputs = Mapping[str, Iterable[Update]]
QueryResult = Union["Counter[Any]", Mapping[str, "Counter[Any]"]]
Query = Callable[[dict[str, "Counter[Any]"]], QueryResult]
Collection = dict[Any, int]

_MAX_REPORTED = 30


def collection_at(updates: Iterable[Update], time: Time) -> Collection:
    """The collection an update list describes at ``time``: ``{data: count}``, no zeros.

    >>> collection_at([("a", 0, 1), ("b", 1, 1), ("a", 2, -1)], 1)
    {'a': 1, 'b': 1}
    """
    return accumulate(updates, time)


def inputs_at(inputs: Inputs, time: Time) -> dict[str, Counter[Any]]:
    """Every named input accumulated at ``time``, as fresh ``Counter``\\ s (zeros dropped)."""
    return {name: Counter(accumulate(ups, time)) for name, ups in inputs.items()}


def _is_multi(result: object) -> bool:
    """A query result is several outputs when it is a non-Counter dict of dicts/Counters."""
    if isinstance(result, Counter) or not isinstance(result, Mapping):
        return False
    return bool(result) and all(isinstance(v, Mapping) for v in result.values())


def _clean(counts: Mapping[Any, int]) -> Collection:
    return {d: c for d, c in counts.items() if c}


def _evaluate(
    inputs: Mapping[str, list[Update]], query: Query, time: Time
) -> dict[str, Collection]:
    """The query's outputs at ``time`` by name; a single output is named ``""``."""
    result = query(inputs_at(inputs, time))
    if _is_multi(result):
        return {name: _clean(c) for name, c in result.items()}  # type: ignore[union-attr]
    return {"": _clean(result)}  # type: ignore[arg-type]


def expected_at(inputs: Inputs, query: Query, time: Time) -> Any:
    """The expected output at ``time``: ``query`` of the inputs accumulated at ``time``.

    Returns ``{data: count}`` (zero counts dropped), or ``{output name: {data: count}}`` when
    the query returns a dict of ``Counter``\\ s.

    >>> distinct = lambda c: Counter({d: 1 for d, n in c["xs"].items() if n > 0})
    >>> expected_at({"xs": [(7, 0, 2), (8, 1, 1)]}, distinct, 0)
    {7: 1}
    """
    materialized = {name: list(ups) for name, ups in inputs.items()}
    named = _evaluate(materialized, query, time)
    return named[""] if set(named) == {""} else named


def _times_of(source: object) -> list[Time]:
    if isinstance(source, Mapping):
        return [t for ups in source.values() for _, t, _ in ups]
    return [t for _, t, _ in source]  # type: ignore[attr-defined]


def interesting_times_for_check(*sources: Iterable[Update] | Mapping[str, Any]) -> set[Time]:
    """Every time appearing in the sources, plus all joins of them.

    Each source is an update list or a dict of update lists (named inputs or outputs). Two
    collections built from these updates are equal everywhere iff they are equal at these
    times (see the module docstring).

    >>> from deltaflow.framework.lattice import Product
    >>> sorted(interesting_times_for_check([(1, Product(0, 2), 1)], {"b": [(2, Product(1, 0), 1)]}))
    [Product(outer=0, inner=2), Product(outer=1, inner=0), Product(outer=1, inner=2)]
    """
    times: list[Time] = []
    for source in sources:
        times.extend(_times_of(source))
    return join_closure(times)


def expected_updates(inputs: Inputs, query: Query, bottom: Time | None = None) -> Any:
    """A consolidated update list whose collection equals the query's output at every time.

    Times are the join closure of the input times plus the least time (``bottom``; by default
    the least time shaped like the inputs' times, or ``0`` without inputs), which holds the
    output of the query on empty inputs. Visiting them in a linear extension of the partial
    order, the diff at ``t`` is what the expected collection at ``t`` lacks after the
    updates already placed at times ``< t``.

    Returns a list of ``(data, time, diff)`` sorted by time, or a dict of such lists for a
    multi-output query. Runtime is quadratic in the number of times: for tests only.

    >>> count = lambda c: Counter({sum(c["xs"].values()): 1}) if c["xs"] else Counter()
    >>> expected_updates({"xs": [("a", 0, 1), ("b", 2, 1)]}, count)
    [(1, 0, 1), (1, 2, -1), (2, 2, 1)]
    """
    materialized = {name: list(ups) for name, ups in inputs.items()}
    all_times = [t for ups in materialized.values() for _, t, _ in ups]
    if bottom is None:
        bottom = minimum_like(all_times[0]) if all_times else 0
    times = sorted(join_closure(all_times) | {bottom}, key=sort_key)
    outputs: dict[str, list[Update]] = {}
    for t in times:
        named = _evaluate(materialized, query, t)
        for name in set(named) | set(outputs):
            want = named.get(name, {})
            placed = outputs.setdefault(name, [])
            have = accumulate(placed, t)
            for data in set(want) | set(have):
                diff = want.get(data, 0) - have.get(data, 0)
                if diff:
                    placed.append((data, t, diff))
    for ups in outputs.values():
        ups.sort(key=lambda u: (sort_key(u[1]), repr(u[0])))
    if set(outputs) <= {""}:
        return outputs.get("", [])
    outputs.pop("", None)
    return outputs


def _report(rows: list[tuple[Time, str, Any, int, int]], total: int) -> str:
    lines = [f"output differs from the oracle at {total} point(s):"]
    lines.append("  time | output | data | expected | actual")
    lines.extend(f"  {t!r} | {name} | {d!r} | {w} | {g}" for t, name, d, w, g in rows)
    if total > len(rows):
        lines.append(f"  ... and {total - len(rows)} more")
    return "\n".join(lines)


def assert_matches_oracle(
    actual: Iterable[Update] | Mapping[str, Iterable[Update]],
    inputs: Inputs,
    query: Query,
    times: Iterable[Time] | None = None,
) -> None:
    """Assert that actual output updates accumulate to the oracle's output at every time.

    Args:
        actual: the output updates (a dict of lists for a multi-output query).
        inputs: the named input update lists.
        query: plain Python over ``{name: Counter}``, as for :func:`expected_at`.
        times: where to compare; by default the join closure of the input and output times
            plus the least time, which covers every time.

    Raises:
        AssertionError: naming each differing (time, output, data) with both counts.
    """
    materialized = {name: list(ups) for name, ups in inputs.items()}
    if isinstance(actual, Mapping):
        outs: dict[str, list[Update]] = {name: list(ups) for name, ups in actual.items()}
    else:
        outs = {"": list(actual)}
    if times is None:
        check = interesting_times_for_check(materialized, outs)
        if check:
            check.add(minimum_like(next(iter(check))))
    else:
        check = set(times)
    rows: list[tuple[Time, str, Any, int, int]] = []
    total = 0
    for t in sorted(check, key=sort_key):
        expected = _evaluate(materialized, query, t)
        if isinstance(actual, Mapping):
            expected.pop("", None)  # a multi-output query with nothing to say at this time
        for name in sorted(set(expected) | set(outs)):
            want = expected.get(name, {})
            got = accumulate(outs.get(name, []), t)
            if want == got:
                continue
            for data in sorted(set(want) | set(got), key=repr):
                w, g = want.get(data, 0), got.get(data, 0)
                if w != g:
                    total += 1
                    if len(rows) < _MAX_REPORTED:
                        rows.append((t, name or "-", data, w, g))
    if total:
        raise AssertionError(_report(rows, total))
