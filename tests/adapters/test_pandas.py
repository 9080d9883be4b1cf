"""pandas DataFrames in (df.run, input handles) and out (to_dataframe), round trips."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import deltaflow as df
from deltaflow.adapters.pandas import from_dataframe, to_dataframe


class Same(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs


class Totals(df.Pipeline):
    def build(self, sales: df.Collection) -> df.Collection:
        return sales.sum()


def test_columns_form_the_datum_with_optional_time_and_diff() -> None:
    frame = pd.DataFrame(
        {"src": [1, 2, 1], "time": [0, 1, 2], "dst": [2, 3, 2], "diff": [1, 1, -1]}
    )
    assert from_dataframe(frame) == [((1, 2), 0, 1), ((2, 3), 1, 1), ((1, 2), 2, -1)]
    assert df.run(Same(), xs=frame) == [((1, 2), 0, 1), ((2, 3), 1, 1), ((1, 2), 2, -1)]
    assert df.run(Same(), xs=pd.DataFrame({"word": ["a", "b"]})) == [("a", 0, 1), ("b", 0, 1)]


@settings(max_examples=30)
@given(
    st.lists(
        st.tuples(
            st.tuples(st.integers(-5, 5), st.sampled_from(["x", "y"])),
            st.integers(0, 4),
            st.integers(-2, 2).filter(bool),
        ),
        max_size=12,
    )
)
def test_round_trip_through_run(updates: list[Any]) -> None:
    """A DataFrame of updates gives what the same triples give, and to_dataframe of the
    result reads back as the result."""
    frame = to_dataframe(updates, ["n", "s"])
    assert list(frame.columns) == ["n", "s", "time", "diff"]
    assert from_dataframe(frame) == updates
    out = df.run(Same(), workers=2, xs=frame)
    assert out == df.run(Same(), workers=2, xs=updates)
    assert from_dataframe(to_dataframe(out, ["n", "s"])) == out


def test_to_dataframe_flattens_nested_tuples_and_names_defaults() -> None:
    frame = to_dataframe([((1, ("a", 2.5)), 3, -1)])
    assert list(frame.columns) == ["c0", "c1", "c2", "time", "diff"]
    assert list(to_dataframe([("a", 0, 1)]).columns) == ["data", "time", "diff"]
    assert list(to_dataframe([]).columns) == ["data", "time", "diff"]
    with pytest.raises(ValueError, match=r"datum \(1, 2\) has 2 values, not 3"):
        to_dataframe([((1, 2), 0, 1)], ["a", "b", "c"])


async def test_input_handles_take_a_dataframe(workers: int) -> None:
    async with df.open(Totals(), workers) as job:
        sales = job.inputs["sales"]
        sales.insert_many(pd.DataFrame({"who": ["ann", "bob"], "amount": [3, 4]}))
        await job.advance_to(2)
        later = pd.DataFrame({"who": ["ann", "ann"], "amount": [3, 10], "diff": [-1, 1],
                              "time": [2, 3]})  # fmt: skip
        sales.insert_many(later)
        await job.advance_to(4)
        assert job.output.at(1) == {("ann", 3): 1, ("bob", 4): 1}
        assert job.output.at(2) == {("bob", 4): 1}
        assert job.output.at(3) == {("ann", 10): 1, ("bob", 4): 1}


async def test_a_bad_dataframe_feeds_nothing() -> None:
    async with df.open(Same()) as job:
        xs = job.inputs["xs"]
        xs.insert(1)
        await job.advance_to(5)
        with pytest.raises(ValueError, match=r"input 'xs': time 2 for 7 is before"):
            xs.insert_many(pd.DataFrame({"x": [6, 7], "time": [5, 2]}))
        with pytest.raises(TypeError, match="input 'xs': diff 'one'"):
            xs.insert_many(pd.DataFrame({"x": [6], "diff": ["one"]}))
        with pytest.raises(TypeError, match="own diff column"):
            xs.insert_many(pd.DataFrame({"x": [6]}), [1])
        await job.advance_to(6)
        assert job.output.at(5) == {1: 1}


def test_a_frame_with_only_time_and_diff_is_refused() -> None:
    with pytest.raises(ValueError, match="input 'xs': no data columns"):
        df.run(Same(), xs=pd.DataFrame({"time": [0], "diff": [1]}))
