"""The checks on what an application feeds: the NaN check of a whole batch against the rule
for one datum, and the first bad update named whatever else is wrong after it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import given, strategies as st

from deltaflow.operators.values import has_nan
from deltaflow.scheduler.validation import check_nans, validate_updates

NAN = float("nan")

scalars = st.one_of(
    st.integers(),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
    st.binary(max_size=2),
    st.sampled_from([NAN, 0.5, -0.0, float("inf")]),
    st.sampled_from([np.float64("nan"), np.float32(1.5), Decimal("NaN"), Decimal("1.5")]),
)
data = st.recursive(scalars, lambda inner: st.tuples(inner, inner), max_leaves=4)
batches = st.one_of(
    st.lists(st.tuples(st.integers(), st.one_of(st.integers(), st.text(max_size=2)))),
    st.lists(scalars, max_size=20),
    st.lists(st.tuples(scalars, scalars), max_size=20),
    st.lists(data, max_size=20),
)


@given(batches)
def test_a_batch_names_the_first_datum_the_datum_rule_refuses(batch: list[Any]) -> None:
    first = next((d for d in batch if has_nan(d)), None)
    if first is None:
        check_nans("xs", batch)
        return
    with pytest.raises(ValueError, match=r"input 'xs': datum .* holds a NaN") as info:
        check_nans("xs", batch)
    assert repr(first) in str(info.value)


def test_the_first_bad_update_is_named() -> None:
    """A NaN before a malformed update is the error; a malformed update before a NaN is."""
    with pytest.raises(ValueError, match="holds a NaN"):
        validate_updates("xs", [(1, 0, 1), ((2, NAN), 0, 1), (3, -1, 1)])
    with pytest.raises(ValueError, match="must be >= 0"):
        validate_updates("xs", [(1, 0, 1), (3, -1, 1), ((2, NAN), 0, 1)])
    with pytest.raises(TypeError, match="not hashable"):
        validate_updates("xs", [([1], 0, 1), (NAN, 0, 1)])
    with pytest.raises(ValueError, match="holds a NaN"):
        validate_updates("xs", [(("a", (1, NAN)), 0, 1), ([1], 0, 1)])
    assert validate_updates("xs", [(1, 0, 1), ((2, "a"), 1, -1)]) == {
        0: ([1], [1]),
        1: ([(2, "a")], [-1]),
    }


def test_an_error_from_the_iterable_itself_surfaces() -> None:
    def updates() -> Any:
        yield (1, 0, 1)
        raise ValueError("the source broke")

    with pytest.raises(ValueError, match="the source broke"):
        validate_updates("xs", updates())
