"""The Spark adapter's accounting: an input left out of dfspark.run or dfspark.stream is an
error naming it (an optional one is empty)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.adapters import spark_pipelines as pipes

import deltaflow as df

dfspark = pytest.importorskip("deltaflow.adapters.spark")


def test_an_omitted_input_is_an_error_naming_it(spark: Any) -> None:
    """dfspark.run and dfspark.stream refuse a pipeline whose input is left out, naming it,
    before any Spark job; an input build() declares optional may be left out."""
    left = spark.createDataFrame([(1, "a")], "k long, v string")
    with pytest.raises(TypeError, match=r"input\(s\) 'right' not given; give right=DATAFRAME"):
        dfspark.run(pipes.Pairs(), spark, left=left, schema="k long, a string, b string")
    rates = spark.readStream.format("rate").load()
    with pytest.raises(TypeError, match=r"input\(s\) 'right' not given"):
        dfspark.stream(pipes.Pairs(), spark, left=rates, schema="k long, a string, b string",
                       foreach_batch=lambda frame, batch: None)  # fmt: skip
    out = dfspark.run(pipes.MaybeBots(), spark, clicks=left.select("v"), schema="v string, n long")
    assert sorted(tuple(r) for r in out.collect()) == [("a", 1, 0, 1)]
    assert df.run(pipes.MaybeBots(), clicks=[("a", 0, 1)]) == [(("a", 1), 0, 1)]
