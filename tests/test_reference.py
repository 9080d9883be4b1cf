"""Checks of the oracle in tests/reference.py and of deltaflow.testing, on hand-made cases."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from tests.reference import (
    assert_matches_oracle,
    collection_at,
    expected_at,
    expected_updates,
    inputs_at,
    interesting_times_for_check,
)
from tests.strategies import shapes, times_of, update_lists

from deltaflow.framework.lattice import Product, Time, join_closure, less_equal
from deltaflow.testing import accumulate, assert_collections_equal, updates

P = Product


def count_query(c: dict[str, Counter[Any]]) -> Counter[Any]:
    """(key, n) for each key of the (key, val) input "xs", n = total count."""
    out: Counter[Any] = Counter()
    totals: Counter[Any] = Counter()
    for (key, _), n in c["xs"].items():
        totals[key] += n
    for key, n in totals.items():
        if n:
            out[(key, n)] = 1
    return out


def distinct_query(c: dict[str, Counter[Any]]) -> Counter[Any]:
    return Counter({d: 1 for d, n in c["xs"].items() if n > 0})


def join_query(c: dict[str, Counter[Any]]) -> Counter[Any]:
    """Equi-join of (k, a) in "left" with (k, b) in "right" giving (k, (a, b))."""
    out: Counter[Any] = Counter()
    for (k1, a), n in c["left"].items():
        for (k2, b), m in c["right"].items():
            if k1 == k2:
                out[(k1, (a, b))] += n * m
    return out


# --- the oracle on hand-written cases ------------------------------------------------------


def test_collection_at_accumulates_int_times() -> None:
    """collection_at sums diffs at times <= t and drops zeros."""
    ups = [("a", 0, 1), ("b", 1, 2), ("a", 2, -1), ("b", 3, -2)]
    assert collection_at(ups, 0) == {"a": 1}
    assert collection_at(ups, 1) == {"a": 1, "b": 2}
    assert collection_at(ups, 2) == {"b": 2}
    assert collection_at(ups, 3) == {}


def test_collection_at_uses_the_partial_order() -> None:
    """With Product times, an update counts only at times coordinate-wise above it."""
    ups = [("a", P(0, 1), 1), ("b", P(1, 0), 1)]
    assert collection_at(ups, P(0, 5)) == {"a": 1}
    assert collection_at(ups, P(5, 0)) == {"b": 1}
    assert collection_at(ups, P(1, 1)) == {"a": 1, "b": 1}
    assert collection_at(ups, P(0, 0)) == {}


def test_inputs_at_gives_fresh_counters() -> None:
    """inputs_at returns one Counter per named input, empty ones included, zeros dropped."""
    got = inputs_at({"xs": [(1, 0, 1), (1, 1, -1)], "ys": []}, 1)
    assert got == {"xs": Counter(), "ys": Counter()}
    assert all(isinstance(c, Counter) for c in got.values())
    assert dict(got["xs"]) == {}


def test_expected_at_count_int_times() -> None:
    """A count over int times, evaluated at each time."""
    inputs = {"xs": [(("k", 1), 0, 1), (("k", 2), 1, 1), (("j", 1), 1, 1), (("k", 1), 2, -1)]}
    assert expected_at(inputs, count_query, 0) == {("k", 1): 1}
    assert expected_at(inputs, count_query, 1) == {("k", 2): 1, ("j", 1): 1}
    assert expected_at(inputs, count_query, 2) == {("k", 1): 1, ("j", 1): 1}


def test_expected_at_join_product_times() -> None:
    """A join of two inputs at incomparable Product times appears only at their join."""
    inputs = {"left": [((1, "a"), P(0, 1), 1)], "right": [((1, "x"), P(1, 0), 2)]}
    assert expected_at(inputs, join_query, P(0, 1)) == {}
    assert expected_at(inputs, join_query, P(1, 0)) == {}
    assert expected_at(inputs, join_query, P(1, 1)) == {(1, ("a", "x")): 2}


def test_expected_at_multiple_outputs() -> None:
    """A query returning a dict of Counters gives a dict of collections."""
    inputs = {"xs": [(1, 0, 1), (2, 0, 1), (2, 1, -1)]}

    def split(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        xs = c["xs"]
        return {
            "odd": Counter({d: n for d, n in xs.items() if d % 2}),
            "even": Counter({d: n for d, n in xs.items() if not d % 2}),
        }

    assert expected_at(inputs, split, 0) == {"odd": {1: 1}, "even": {2: 1}}
    assert expected_at(inputs, split, 1) == {"odd": {1: 1}, "even": {}}
    assert expected_updates(inputs, split) == {
        "odd": [(1, 0, 1)],
        "even": [(2, 0, 1), (2, 1, -1)],
    }


def test_expected_updates_at_a_join_only_time() -> None:
    """f(a) = f(b) = 0 but f(a + b) != 0: the output changes only at the join of the times."""
    inputs = {"xs": [("a", P(0, 1), 1), ("b", P(1, 0), 1)]}

    def both(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return Counter({"both": 1}) if c["xs"]["a"] > 0 and c["xs"]["b"] > 0 else Counter()

    assert expected_updates(inputs, both) == [("both", P(1, 1), 1)]
    assert_matches_oracle([("both", P(1, 1), 1)], inputs, both)
    row = r"Product\(outer=1, inner=1\) \| - \| 'both' \| 1 \| 0"
    with pytest.raises(AssertionError, match=row):
        assert_matches_oracle([], inputs, both)


def test_expected_updates_constant_query_sits_at_bottom() -> None:
    """A query that is non-empty on empty inputs gets its output at the least time."""
    inputs = {"xs": [(1, P(2, 3), 1)]}

    def size(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return Counter({sum(c["xs"].values()): 1})

    assert expected_updates(inputs, size) == [(0, P(0, 0), 1), (0, P(2, 3), -1), (1, P(2, 3), 1)]
    assert expected_updates({"xs": []}, size) == [(0, 0, 1)]


def test_assert_matches_oracle_detects_wrong_output() -> None:
    """A distinct that forgets a retraction is reported at the right time with both counts."""
    inputs = {"xs": [("a", 0, 1), ("a", 0, 1), ("a", 3, -2)]}
    good = [("a", 0, 1), ("a", 3, -1)]
    assert_matches_oracle(good, inputs, distinct_query)
    with pytest.raises(AssertionError) as info:
        assert_matches_oracle([("a", 0, 1)], inputs, distinct_query)
    assert "3 | - | 'a' | 0 | 1" in str(info.value)


def test_assert_matches_oracle_checks_stray_output_times() -> None:
    """Output at a time the inputs never produce (here a spurious blip) is caught."""
    inputs = {"xs": [("a", P(0, 0), 1)]}
    blip = [("a", P(0, 0), 1), ("z", P(2, 1), 1), ("z", P(2, 2), -1)]
    with pytest.raises(AssertionError, match="'z'"):
        assert_matches_oracle(blip, inputs, distinct_query)


def test_interesting_times_for_check() -> None:
    """All times of all sources plus their joins; mappings of lists count too."""
    times = interesting_times_for_check(
        [(1, P(0, 2), 1)], {"x": [(2, P(1, 0), 1)], "y": [(3, P(1, 1), 1)]}
    )
    assert times == {P(0, 2), P(1, 0), P(1, 1), P(1, 2)}
    assert interesting_times_for_check([(1, 3, 1), (1, 5, -1)]) == {3, 5}
    assert interesting_times_for_check() == set()


# --- the oracle against itself, on random inputs --------------------------------------------


def _grid(shape: str) -> list[Time]:
    r = range(4)
    if shape == "int":
        return list(range(7))
    if shape == "product":
        return [P(a, b) for a in r for b in r]
    return [P(P(a, b), c) for a in range(3) for b in range(3) for c in range(3)]


QUERIES = [distinct_query, lambda c: Counter({(d, 1): n for d, n in c["xs"].items()}), count_query]


@settings(max_examples=60, deadline=None)
@given(
    shapes().flatmap(
        lambda s: st.tuples(
            st.just(s),
            update_lists(
                s,
                data=st.tuples(st.integers(0, 2), st.integers(0, 1)),
                max_size=6,
                max_value={"int": 6, "product": 3, "nested": 2}[s],
            ),
        )
    ),
    st.sampled_from(range(len(QUERIES))),
)
def test_expected_updates_reproduce_expected_at_everywhere(
    case: tuple[str, list[Any]], which: int
) -> None:
    """expected_updates accumulate to expected_at at every grid time, not only closure times."""
    shape, ups = case
    query = QUERIES[which]
    inputs = {"xs": ups}
    out = expected_updates(inputs, query)
    for t in _grid(shape):
        assert accumulate(out, t) == expected_at(inputs, query, t)
    assert_matches_oracle(out, inputs, query)
    times = {t for _, t, _ in out}
    assert times <= join_closure([t for _, t, _ in ups] + [t for _, t, _ in out])


@given(shapes().flatmap(lambda s: st.tuples(update_lists(s), update_lists(s), times_of(s))))
def test_collections_equal_iff_equal_at_closure_times(case: tuple[list[Any], ...]) -> None:
    """Equal at the join closure of both lists' times implies equal at any other time too."""
    a, b, t = case
    try:
        assert_collections_equal(a, b)
    except AssertionError:
        return
    assert accumulate(a, t) == accumulate(b, t)


# --- deltaflow.testing ----------------------------------------------------------------------


def test_updates_parses_tables() -> None:
    """Headers, separators, outer pipes, comments and nested product times all parse."""
    text = """
        | data     | time       | diff |
        |----------|------------|------|
        # a comment
        | ('k', 1) | 0          | 1    |
        | 'a|b'    | (1, 2)     | -2   |

        None       | ((1, 2), 3) | +1
    """
    assert updates(text) == [
        (("k", 1), 0, 1),
        ("a|b", P(1, 2), -2),
        (None, P(P(1, 2), 3), 1),
    ]
    assert updates("") == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("'a' | 0", "three fields"),
        ("apple | 0 | 1", "not a Python literal"),
        ("[1] | 0 | 1", "not hashable"),
        ("'a' | (1, 2, 3) | 1", "pair"),
        ("'a' | 1.5 | 1", "an int or a pair"),
        ("'a' | 0 | 1.0", "not an integer"),
        ("'a' | 0 | True", "not an integer"),
    ],
)
def test_updates_rejects_bad_lines(line: str, reason: str) -> None:
    """A bad line raises ValueError naming its line number, its text and the problem."""
    with pytest.raises(ValueError, match=reason) as info:
        updates("data | time | diff\n" + line)
    assert str(info.value).startswith(f"line 2: {line.strip()!r}")


def test_assert_collections_equal_reports_a_readable_diff() -> None:
    """The error lists time, data, expected and actual counts, truncated when long."""
    assert_collections_equal(
        [("a", P(0, 1), 1), ("a", P(1, 0), 1)],
        [("a", P(1, 0), 1), ("a", P(0, 1), 1), ("b", P(2, 2), 0)],
    )
    with pytest.raises(AssertionError) as info:
        assert_collections_equal([("a", P(0, 1), 1)], [("a", P(0, 1), 1), ("b", P(1, 0), 2)])
    message = str(info.value)
    assert "time | data | expected | actual" in message
    assert "Product(outer=1, inner=0) | 'b' | 2 | 0" in message
    assert "Product(outer=1, inner=1) | 'b' | 2 | 0" in message
    many = [(i, 0, 1) for i in range(50)]
    with pytest.raises(AssertionError, match="and 20 more"):
        assert_collections_equal([], many)


def test_assert_collections_equal_explicit_times() -> None:
    """Only the given times are compared when times= is passed."""
    a, b = [("x", 0, 1)], [("x", 0, 1), ("x", 5, 1)]
    assert_collections_equal(a, b, times=[0, 1, 4])
    with pytest.raises(AssertionError):
        assert_collections_equal(a, b, times=[5])


@given(shapes().flatmap(lambda s: st.tuples(update_lists(s), times_of(s))))
def test_accumulate_matches_counter(case: tuple[list[Any], Time]) -> None:
    """accumulate equals a Counter over the updates at times <= t, without zeros."""
    ups, t = case
    model: Counter[Any] = Counter()
    for d, time, diff in ups:
        if less_equal(time, t):
            model[d] += diff
    assert accumulate(ups, t) == {d: n for d, n in model.items() if n}
