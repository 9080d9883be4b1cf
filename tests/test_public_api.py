"""The public surface: every exported name exists, is documented, and the contract's
Collection methods are all there."""

from __future__ import annotations

import inspect

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
