"""The public surface: every exported name exists, is documented, and the contract's
Collection methods are all there."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import deltaflow as df
from deltaflow.framework import lattice

CONTRACT_METHODS = [
    "map",
    "filter",
    "flat_map",
    "explode",
    "join_function",
    "negate",
    "concat",
    "consolidate",
    "inspect",
    "arrange_by_key",
    "arrange_by_self",
    "join",
    "join_map",
    "semijoin",
    "antijoin",
    "reduce",
    "count",
    "distinct",
    "threshold",
    "min",
    "max",
    "top_k",
    "sum",
    "mean",
    "iterate",
    "enter",
    "leave",
    "probe",
]


def test_all_names_exist_and_are_documented() -> None:
    """Every name in deltaflow.__all__ resolves and has a docstring."""
    for name in df.__all__:
        obj = getattr(df, name)
        assert inspect.getdoc(obj), f"deltaflow.{name} has no docstring"


def test_collection_has_the_contract_methods() -> None:
    """Collection keeps differential dataflow's method names, each documented."""
    missing = [m for m in CONTRACT_METHODS if not callable(getattr(df.Collection, m, None))]
    assert not missing, missing
    undocumented = [m for m in CONTRACT_METHODS if not inspect.getdoc(getattr(df.Collection, m))]
    assert not undocumented, undocumented


def test_lattice_utilities_exist() -> None:
    """The lattice module exposes the functions the contract names."""
    for name in (
        "Product",
        "less_equal",
        "join",
        "meet",
        "advance_by",
        "chain_decomposition",
        "join_closure",
    ):
        assert hasattr(lattice, name), name
    assert lattice.Product(1, 2).outer == 1
    assert lattice.Product(1, 2).inner == 2
    assert hash(lattice.Product(1, 2)) == hash(lattice.Product(1, 2))


def test_entry_points_signatures() -> None:
    """run() and open() take the pipeline, then workers."""
    for fn in (df.run, df.open):
        params = list(inspect.signature(fn).parameters)
        assert params[:2] == ["pipeline", "workers"], (fn, params)


def _keyed(xs: df.Collection) -> df.Collection:
    return xs.map(lambda n: (n, n))


BAD_FUNCTIONS = [
    (lambda xs: xs.map(5), "map: fn must be a function of 1 argument, got 5"),
    (lambda xs: xs.map(lambda a, b: a), r"map: fn must take 1 argument, but <lambda> takes \(a,"),
    (lambda xs: xs.filter(None), "filter: predicate must be a function"),
    (lambda xs: xs.flat_map("abc"), "flat_map: fn must be a function"),
    (lambda xs: xs.explode(lambda: 1), "explode: fn must take 1 argument"),
    (lambda xs: xs.inspect(3), "inspect: fn must be a function"),
    (lambda xs: xs.join_function(len), None),  # a builtin of one argument is fine
    (lambda xs: xs.join_function(lambda d, t: d), "join_function: logic must take 1 argument"),
    (lambda xs: xs.temporal_filter(lambda d: 0, 9), "temporal_filter: upper must be a function"),
    (lambda xs: xs.exchange(key=1), "exchange: key must be a function"),
    (lambda xs: _keyed(xs).join_map(_keyed(xs), lambda k, a: a), "join_map: fn must take 3"),
    (lambda xs: _keyed(xs).reduce(None), "reduce: logic must be a function of 2 arguments"),
    (lambda xs: _keyed(xs).reduce(lambda vs: vs), "reduce: logic must take 2 arguments"),
    (lambda xs: _keyed(xs).reduce(lambda k, vs: vs, name=5), "reduce: name must be a str"),
    (lambda xs: xs.threshold(5), "threshold: f must be a function of 2 arguments, got 5"),
    (lambda xs: xs.threshold(lambda n: n), r"threshold: f must take 2 arguments.*\(n\)"),
    (lambda xs: _keyed(xs).top_k(1, key=3), "top_k: key must be a function of 1 argument"),
    (lambda xs: _keyed(xs).top_k("2"), "top_k: k must be a non-negative int, not '2'"),
    (lambda xs: xs.iterate(5), "iterate: step must be a function of 1 argument, got 5"),
    (
        lambda xs: _keyed(xs).arrange_by_key().join_core(_keyed(xs), lambda k, a, b: [a]),
        "join_core: expected an arrangement",
    ),
    (lambda xs: xs.iterate(lambda x: x.distinct(), limit="3"), "limit must be a positive int"),
]


@pytest.mark.parametrize(("build", "message"), BAD_FUNCTIONS)
def test_bad_functions_are_rejected_while_building(build: Any, message: str | None) -> None:
    """A function argument that is not a function, or takes the wrong number of arguments,
    is a TypeError when the dataflow is built: before any data, so even with no input."""

    class P(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return build(xs)

    if message is None:
        assert df.run(P(), xs=[]) == []
        return
    with pytest.raises(TypeError, match=message):
        df.run(P(), xs=[])


def test_bad_values_of_the_right_type_are_value_errors() -> None:
    """Type mistakes are TypeErrors; a value of the right type out of range a ValueError."""

    class P(df.Pipeline):
        def __init__(self, build: Any) -> None:
            self.build_with = build

        def build(self, xs: df.Collection) -> df.Collection:
            return self.build_with(xs)  # type: ignore[no-any-return]

    with pytest.raises(ValueError, match="non-negative int, not -1"):
        df.run(P(lambda xs: _keyed(xs).top_k(-1)), xs=[])
    with pytest.raises(ValueError, match="positive int or None, not 0"):
        df.run(P(lambda xs: xs.iterate(lambda x: x.distinct(), limit=0)), xs=[])
