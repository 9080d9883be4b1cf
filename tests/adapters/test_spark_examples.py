"""The Spark examples run on the test session, and their answers pass their own checks."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest
from tests.harness import EXAMPLES, import_example

pytestmark = pytest.mark.spark


def load(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (its sibling modules importable, as when run as a
    script); the adapter sends its pipeline to the executors by value."""
    if str(EXAMPLES) not in sys.path:
        sys.path.append(str(EXAMPLES))
    return import_example(name)


def test_spark_reachability_example(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Batch reachability over DataFrames equals the plain-Python search."""
    ex = load("spark_reachability")
    args = ["--nodes", "80", "--edges", "150", "--roots", "3", "--changes", "5", "--check"]
    pairs = ex.main(args, spark=spark)
    out = capsys.readouterr().out
    assert "check: ok" in out
    assert f"answer: {len(pairs)} reachable pairs" in out


def test_spark_streaming_wordcount_example(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Streaming word counts after every micro-batch end equal to counting every line."""
    ex = load("spark_streaming_wordcount")
    counts = ex.main(["--batches", "3", "--check"], spark=spark)
    out = capsys.readouterr().out
    assert "check: ok" in out
    assert "micro-batch 2:" in out
    assert f"answer: {sum(counts.values())} words" in out
