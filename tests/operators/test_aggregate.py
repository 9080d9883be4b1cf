"""sum and mean against a recompute, and the reductions' errors on values they cannot use."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.testing import example

KEYS = st.sampled_from(["a", "b", "c"])


def updates(vals: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """``((key, number), time, diff)`` with retractions (of values not inserted too)."""
    return st.lists(
        st.tuples(
            st.tuples(KEYS, vals),
            st.integers(min_value=0, max_value=5),
            st.integers(min_value=-2, max_value=3).filter(bool),
        ),
        max_size=14,
    ).map(nonnegative)


def positive_by_key(c: Counter[Any]) -> dict[Any, list[tuple[Any, int]]]:
    out: dict[Any, list[tuple[Any, int]]] = {}
    for (k, v), n in c.items():
        if n > 0:
            out.setdefault(k, []).append((v, n))
    return out


def q_sum(c: dict[str, Counter[Any]]) -> Counter[Any]:
    return Counter(
        {(k, sum(v * n for v, n in vs)): 1 for k, vs in positive_by_key(c["xs"]).items()}
    )


def q_mean(c: dict[str, Counter[Any]]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for k, vs in positive_by_key(c["xs"]).items():
        exact = Fraction(sum(v * n for v, n in vs), sum(n for _, n in vs))
        out[(k, float(exact))] += 1
    return out


class Sum(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.sum()


class Mean(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.mean()


@pytest.mark.parametrize("workers", [1, 2, 3])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=updates(st.integers(-5, 5)))
def test_sum_and_mean_of_ints_match_a_recompute(ups: list[Any], workers: int) -> None:
    """sum is exact; mean is the correctly rounded quotient, at every time and worker count."""
    assert_matches_oracle(df.run(Sum(), workers=workers, xs=ups), {"xs": ups}, q_sum)
    assert_matches_oracle(df.run(Mean(), workers=workers, xs=ups), {"xs": ups}, q_mean)


@settings(max_examples=20)
@given(ups=updates(st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 2.5])))
def test_float_sums_do_not_depend_on_the_worker_count(ups: list[Any]) -> None:
    """Values are added in sorted order, so floats give one answer on any number of workers."""
    one = df.run(Sum(), workers=1, xs=ups)
    assert df.run(Sum(), workers=3, xs=ups) == one
    assert df.run(Mean(), workers=2, xs=ups) == df.run(Mean(), workers=1, xs=ups)


def test_sum_of_a_known_history() -> None:
    ups = [(("a", 2), 0, 3), (("a", 5), 1, 1), (("a", 2), 2, -3), (("a", 5), 3, -1)]
    assert example(lambda xs: xs.sum(), xs=ups) == [
        (("a", 6), 0, 1), (("a", 6), 1, -1), (("a", 11), 1, 1), (("a", 5), 2, 1),
        (("a", 11), 2, -1), (("a", 5), 3, -1),
    ]  # fmt: skip
    assert example(lambda xs: xs.mean(), xs=ups[:2]) == [
        (("a", 2.0), 0, 1), (("a", 2.0), 1, -1), (("a", 2.75), 1, 1),
    ]  # fmt: skip


@pytest.mark.parametrize("method", ["sum", "mean", "min", "max", "top_k"])
def test_nan_is_a_value_error_naming_operator_and_key(method: str, workers: int) -> None:
    """A ValueError that is also the OperatorError of the operator (the job stops)."""

    class Made(df.Pipeline):
        """The NaN is made inside the pipeline (inputs refuse one): 0 * inf."""

        def build(self, xs: df.Collection) -> df.Collection:
            ys = xs.map(lambda kv: (kv[0], kv[1] * float("inf")) if kv[1] == 0 else kv)
            return ys.top_k(2) if method == "top_k" else getattr(ys, method)()

    ups = [(("k", 1.0), 0, 1), (("k", 0.0), 0, 1), (("j", 2.0), 0, 1)]
    with pytest.raises(ValueError, match=f"^{method}: key 'k' has NaN") as info:
        df.run(Made(), workers=workers, xs=ups)
    assert isinstance(info.value, df.OperatorError)
    assert info.value.operator == method


@pytest.mark.parametrize("method", ["min", "max", "top_k"])
def test_incomparable_values_name_operator_key_and_both_values(method: str, workers: int) -> None:
    class P(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.top_k(2) if method == "top_k" else getattr(xs, method)()

    ups = [(("k", 1), 0, 1), (("k", "x"), 0, 1), (("j", 2), 0, 1)]
    with pytest.raises(TypeError, match=f"^{method}: key 'k' has values 1 and 'x'") as info:
        df.run(P(), workers=workers, xs=ups)
    assert isinstance(info.value, df.OperatorError)
    assert info.value.operator == method


def test_top_k_with_incomparable_sort_keys_names_the_values() -> None:
    class P(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.top_k(1, key=lambda v: v[1])

    ups = [(("k", ("a", 1)), 0, 1), (("k", ("b", "z")), 0, 1)]
    with pytest.raises(TypeError, match=r"key 'k' has values \('a', 1\) and \('b', 'z'\)"):
        df.run(P(), xs=ups)


def test_sum_of_a_non_number_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="sum: key 'k' has the value 'x', which is not"):
        df.run(Sum(), xs=[(("k", "x"), 0, 1)])


def test_numpy_integer_counts_from_logic_and_threshold_are_ints(workers: int) -> None:
    class P(df.Pipeline):
        def build(self, xs: df.Collection) -> dict[str, df.Collection]:
            return {
                "reduce": xs.reduce(lambda k, vs: [(len(vs), np.int64(2))]),
                "threshold": xs.threshold(lambda d, n: np.int32(n * 2)),
            }

    out = df.run(P(), workers=workers, xs=[(("k", 1), 0, 1), (("k", 2), 1, 1)])
    assert out["reduce"] == [(("k", 1), 0, 2), (("k", 1), 1, -2), (("k", 2), 1, 2)]
    assert out["threshold"] == [(("k", 1), 0, 2), (("k", 2), 1, 2)]
    assert all(type(r) is int for updates in out.values() for _, _, r in updates)


def test_numpy_integer_diffs_and_times_from_linear_functions(workers: int) -> None:
    class P(df.Pipeline):
        def build(self, xs: df.Collection) -> dict[str, df.Collection]:
            return {
                "explode": xs.explode(lambda x: [(x, np.int64(3))]),
                "join_function": xs.join_function(lambda x: [(x, np.int64(2), np.int32(-1))]),
            }

    out = df.run(P(), workers=workers, xs=[("a", 0, 1), ("b", 3, 1)])
    assert out["explode"] == [("a", 0, 3), ("b", 3, 3)]
    assert out["join_function"] == [("a", 2, -1), ("b", 3, -1)]
    assert all(type(v) is int for ups in out.values() for _, t, r in ups for v in (t, r))
