"""``dfspark.run`` on a real local Spark: its output DataFrame equals ``df.run``'s updates.

Every oracle test feeds the same updates to ``df.run`` (itself checked against the
from-scratch oracle of :mod:`tests.reference`) and, as DataFrames, to ``dfspark.run``, and
compares the rows with the flattened updates.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.adapters import spark_pipelines as pipes
from tests.adapters.spark_data import expected, random_edges, rows, triples

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")


@pytest.mark.parametrize("partitions", [2, 3])
def test_reductions_match_run(spark: Any, partitions: int) -> None:
    """Two chained counts, and a reduce with user logic, over several times."""
    edges = random_edges(1, 12, 40, 4)
    out = dfspark.run(
        pipes.Degrees(),
        spark,
        edges=spark.createDataFrame(edges, "src long, dst long, time long, diff long"),
        schema="degree long, nodes long",
        partitions=partitions,
    )
    assert rows(out) == expected(df.run(pipes.Degrees(), edges=triples(edges)))
    # Each sale is inserted at its time; every seventh is retracted again one time later
    # (a reduction's input is a collection: only what was inserted is retracted).
    inserted = [(k % 5, v, t, 1) for k, v, t in zip(range(60), range(60), [0, 1, 2] * 20)]
    sales = inserted + [(k, v, t + 1, -1) for k, v, t, _ in inserted if v % 7 == 0]
    sales_in = [((k, v), t, r) for k, v, t, r in sales]
    out = dfspark.run(
        pipes.Totals(),
        spark,
        sales=spark.createDataFrame(sales, "k long, v long, time int, diff int"),
        schema="k long, total long, top long",
        partitions=partitions,
    )
    assert rows(out) == expected(df.run(pipes.Totals(), sales=sales_in))


@pytest.mark.parametrize("partitions", [2, 3])
def test_join_matches_run(spark: Any, partitions: int) -> None:
    """A join whose output datum nests tuples, flattened into the schema's columns."""
    customers = [(c, f"name{c}", c % 2, 1) for c in range(8)] + [(3, "name3", 2, -1)]
    orders = [(o, o % 9, float(o) / 4, o % 3, 1) for o in range(50)]
    out = dfspark.run(
        pipes.Orders(),
        spark,
        orders=spark.createDataFrame(
            orders, "id long, customer long, amount double, time long, diff long"
        ),
        customers=spark.createDataFrame(
            customers, "customer long, name string, time long, diff long"
        ),
        schema="customer long, id long, amount double, name string",
        partitions=partitions,
    )
    want = df.run(
        pipes.Orders(),
        orders=[((o, c, a), t, r) for o, c, a, t, r in orders],
        customers=[((c, n), t, r) for c, n, t, r in customers],
    )
    assert want and rows(out) == expected(want)


@pytest.mark.parametrize("partitions", [2, 3])
def test_iterate_matches_run(spark: Any, partitions: int) -> None:
    """Reachability (iterate, join, distinct) with edges changing at later times."""
    edges = random_edges(7, 30, 45, 4)
    roots = [(0, 0, 1), (1, 0, 1), (2, 2, 1)]
    out = dfspark.run(
        pipes.Reachability(),
        spark,
        roots=spark.createDataFrame(roots, "root long, time long, diff long"),
        edges=spark.createDataFrame(edges, "src long, dst long, time long, diff long"),
        schema="root long, node long",
        partitions=partitions,
    )
    want = df.run(pipes.Reachability(), roots=triples(roots), edges=triples(edges))
    assert len(want) > 20 and rows(out) == expected(want)


def test_static_inputs_without_time_and_diff(spark: Any) -> None:
    """Without ``time``/``diff`` columns every row is inserted at time 0; the default
    partitions is the default parallelism."""
    edges = [(s, d) for s, d, _, _ in random_edges(3, 20, 30, 1)]
    out = dfspark.run(
        pipes.Reachability(),
        spark,
        roots=spark.createDataFrame([(0,), (5,)], "root long"),
        edges=spark.createDataFrame(edges, "src long, dst long"),
        schema="root long, node long",
    )
    want = df.run(
        pipes.Reachability(), roots=[(0, 0, 1), (5, 0, 1)], edges=[(e, 0, 1) for e in edges]
    )
    assert rows(out) == expected(want)
    assert rows(out.select("time").distinct()) == [(0,)]


def test_dict_outputs(spark: Any) -> None:
    """A ``build()`` returning a dict takes a dict of schemas and gives a dict of DataFrames."""
    words = [("cat", 0, 1), ("horse", 0, 1), ("cat", 1, 1), ("dog", 1, 1), ("horse", 2, -1)]
    out = dfspark.run(
        pipes.Split(),
        spark,
        words=spark.createDataFrame(words, "word string, time long, diff long"),
        schema={"words": "word string", "lengths": "length int, words long"},
        partitions=2,
    )
    want = df.run(pipes.Split(), words=words)
    assert set(out) == {"words", "lengths"}
    for name in out:
        assert rows(out[name]) == expected(want[name]), name
    assert out["lengths"].columns == ["length", "words", "time", "diff"]


def test_nulls_in_data_columns_are_none(spark: Any) -> None:
    """A null in a data column is ``None`` in the datum, and ``None`` comes back as null."""
    xs = [(1, "a"), (None, "b"), (2, None)]
    out = dfspark.run(
        pipes.Identity(),
        spark,
        xs=spark.createDataFrame(xs, "n long, s string"),
        schema="n long, s string",
        partitions=2,
    )
    assert rows(out) == sorted(((n, s, 0, 1) for n, s in xs), key=repr)


def is_spark_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the exception Spark raised for a failed job."""
    return exc is not None and type(exc).__module__.startswith(("py4j", "pyspark"))


def test_null_time_names_input_column_and_row(spark: Any) -> None:
    """A null time fails the job with the ValueError df.run raises for it: the input, the
    column and the row in the message, Spark's exception its cause."""
    xs = spark.createDataFrame([(1, 0), (2, None)], "x long, time long")
    with pytest.raises(ValueError, match=r"input 'xs': column 'time' is null in the row \(x=2\)"):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x long", partitions=2)
    xs = spark.createDataFrame([("a", 1, None)], "x string, time long, diff long")
    with pytest.raises(ValueError, match=r"column 'diff' is null in the row \(x='a'\)") as info:
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x string", partitions=2)
    assert type(info.value) is ValueError and is_spark_error(info.value.__cause__)


def test_declared_input_columns_by_name_and_type(spark: Any) -> None:
    """A declared input takes its columns by name in the declared order (an int column
    widens to a declared bigint); a column of another type, or a missing one, is refused on
    the driver naming the input and the column; a NaN in a double is refused in the task."""
    clicks = spark.createDataFrame([(3, "ann", 0), (4, "bob", 1)], "n int, user string, time long")
    out = dfspark.run(pipes.TypedClicks(), spark, clicks=clicks, schema="user string, n long")
    assert rows(out) == [("ann", 3, 0, 1), ("bob", 4, 1, 1)]
    bad = spark.createDataFrame([("3", "ann")], "n string, user string")
    with pytest.raises(TypeError, match="input 'clicks': column 'n' is string, but"):
        dfspark.run(pipes.TypedClicks(), spark, clicks=bad, schema="user string, n long")
    bad = spark.createDataFrame([("ann",)], "user string")
    with pytest.raises(ValueError, match="input 'clicks': no column 'n' of the declared"):
        dfspark.run(pipes.TypedClicks(), spark, clicks=bad, schema="user string, n long")
    nan = spark.createDataFrame([(float("nan"),)], "x double")
    with pytest.raises(Exception, match=r"input 'xs': datum nan holds a NaN"):
        dfspark.run(pipes.Identity(), spark, xs=nan, schema="x double", partitions=2)


def test_non_integer_time_is_an_error_before_any_job(spark: Any) -> None:
    """A ``time`` or ``diff`` column that is not of an integer type is refused at once."""
    xs = spark.createDataFrame([(1, 0.5)], "x long, time double")
    with pytest.raises(TypeError, match="input 'xs': column 'time' has type double"):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x long")
    xs = spark.createDataFrame([(1, "1")], "x long, diff string")
    with pytest.raises(TypeError, match="input 'xs': column 'diff' has type string"):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x long")


def test_output_that_does_not_fit_the_schema(spark: Any) -> None:
    """A datum that does not fit is a TypeError naming the output, the datum and the column."""
    xs = spark.createDataFrame([("a", "b")], "x string, y string")
    with pytest.raises(
        TypeError, match=r"output 'output': datum \('a', 'b'\) does not fit column 'y' \(bigint\)"
    ):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x string, y long", partitions=2)
    with pytest.raises(
        TypeError, match=r"datum \('a', 'b'\) has 2 field\(s\) but the schema has 3"
    ):
        dfspark.run(
            pipes.Identity(), spark, xs=xs, schema="x string, y string, z long", partitions=2
        )


def pipes_line(text: str) -> int:
    """The line of ``spark_pipelines.py`` holding ``text``."""
    source = Path(pipes.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


def test_failing_user_code_fails_the_job_quickly(spark: Any) -> None:
    """User code raising in one task fails the job within seconds with the OperatorError
    df.run raises: the operator's name, the user's exception type and message, and no more;
    its cause is the user's exception, whose traceback names the user's file and line (not
    cloudpickle's <dynamic-code>); Spark's exception is its context."""
    xs = spark.createDataFrame([(n,) for n in range(40)], "x long")
    start = time.monotonic()
    with pytest.raises(df.OperatorError) as info:
        dfspark.run(pipes.Fails(), spark, xs=xs, schema="x long", partitions=3)
    assert time.monotonic() - start < 30
    with pytest.raises(df.OperatorError) as local:
        df.run(pipes.Fails(), xs=[(n, 0, 1) for n in range(40)])
    assert str(info.value) == str(local.value)
    assert str(info.value).endswith("raised ValueError: thirteen is unlucky")
    assert "map(" in info.value.operator and "explode" in info.value.operator
    user = info.value.__cause__
    assert type(user) is ValueError and str(user) == "thirteen is unlucky"
    assert is_spark_error(info.value.__context__)
    trace = str(user.__cause__)
    line = pipes_line("thirteen is unlucky") + 1  # the raise after the message
    assert f'spark_pipelines.py", line {line}, in explode' in trace, trace
    assert "<dynamic-code>" not in trace


def test_a_pipeline_from_a_module_the_executors_cannot_import(spark: Any, tmp_path: Any) -> None:
    """A pipeline whose class and helper function live in modules only the driver can import
    (a directory on the driver's path alone) runs as df.run does: they travel by value."""
    (tmp_path / "unshipped_helpers.py").write_text(
        "def halve(x):\n    if x < 0:\n        raise ArithmeticError(f'{x} < 0')\n"
        "    return x // 2\n"
    )
    (tmp_path / "unshipped_pipes.py").write_text(
        "import deltaflow as df\nfrom unshipped_helpers import halve\n\n"
        "class Halves(df.Pipeline):\n    def build(self, xs):\n"
        "        return xs.map(halve).map(lambda h: (h % 3, h)).count()\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import unshipped_pipes  # type: ignore[import-not-found]

        xs = [(x, x % 3, 1) for x in range(30)]
        out = dfspark.run(
            unshipped_pipes.Halves(),
            spark,
            xs=spark.createDataFrame(xs, "x long, time long, diff long"),
            schema="half long, n long",
            partitions=2,
        )
        assert rows(out) == expected(df.run(unshipped_pipes.Halves(), xs=triples(xs)))
        negative = spark.createDataFrame([(-4,)], "x long")
        with pytest.raises(df.OperatorError, match="raised ArithmeticError: -4 < 0") as info:
            dfspark.run(unshipped_pipes.Halves(), spark, xs=negative, schema="h long, n long")
        assert "unshipped_helpers.halve" in info.value.operator
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("unshipped_pipes", "unshipped_helpers"):
            sys.modules.pop(name, None)


def test_a_module_the_executors_lack_is_named_before_the_job(spark: Any) -> None:
    """An installed module the executors cannot import is a ModuleNotFoundError naming it and
    the fix, from a small job before the barrier job."""
    from deltaflow.adapters.spark._ship import require_importable

    with pytest.raises(ModuleNotFoundError, match="cannot import 'no_such_module_32'") as info:
        require_importable(spark.sparkContext, ["json", "no_such_module_32"], "this test")
    assert info.value.name == "no_such_module_32"
    assert "addPyFile" in str(info.value) and str(info.value).startswith("this test: ")
    require_importable(spark.sparkContext, ["json", "deltaflow.graphs"], "this test")


def test_too_few_slots_is_a_clear_error(spark: Any) -> None:
    """More partitions than free task slots fails at once, naming both."""
    xs = spark.createDataFrame([(1,)], "x long")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"needs 6 free task slots .* has 5 free of 5"):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x long", partitions=6)
    assert time.monotonic() - start < 5


def test_bad_arguments(spark: Any) -> None:
    """Unknown inputs, non-DataFrames and a single schema for a dict of outputs are refused."""
    xs = spark.createDataFrame([(1,)], "x long")
    with pytest.raises(TypeError, match=r"unknown input\(s\) \['ys'\]"):
        dfspark.run(pipes.Identity(), spark, ys=xs, schema="x long")
    with pytest.raises(TypeError, match="expected a Spark DataFrame, got list"):
        dfspark.run(pipes.Identity(), spark, xs=[1], schema="x long")
    with pytest.raises(TypeError, match="pass a dict of schemas"):
        dfspark.run(pipes.Split(), spark, words=xs, schema="x long")
    with pytest.raises(ValueError, match="the adapter adds 'time' and 'diff'"):
        dfspark.run(pipes.Identity(), spark, xs=xs, schema="x long, time long")


def test_public_names_and_signature() -> None:
    """The adapter's names are documented, and run() has the contract's signature."""
    import inspect

    for name in dfspark.__all__:
        assert inspect.getdoc(getattr(dfspark, name)), name
    params = inspect.signature(dfspark.run).parameters
    assert list(params)[:2] == ["pipeline", "spark"]
    assert params["schema"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["partitions"].default is None
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
