"""No silent wrong answers from files or NaN: each case a reliability probe found, on real
files through the command line and through the API at one and two processes, and typed
inputs declared as Spark DDL strings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import trio
from tests import command_line

import deltaflow as df
from deltaflow.adapters.files import read_updates
from deltaflow.framework.schema import Schema

PIPELINES = '''
import deltaflow as df


class Keys(df.Pipeline):
    """How many times each datum appears."""

    def build(self, xs):
        return xs.map(lambda x: (x, ())).count()


class Totals(df.Pipeline):
    def build(self, sales):
        return sales.sum()


class Typed(df.Pipeline):
    schemas = {"sales": "who string, zip string, amount double"}

    def build(self, sales):
        return sales.map(lambda s: (s[0], s[2])).sum()


class Clicks(df.Pipeline):
    schemas = {"clicks": "user string, n long"}

    def build(self, clicks):
        return clicks
'''


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m deltaflow run *args`` run in ``project``."""
    return command_line.cli(project, "run", *args)


def strict_lines(text: str) -> list[Any]:
    """Every line parsed as strict JSON (NaN and Infinity are not JSON)."""

    def refuse(token: str) -> Any:
        msg = f"{token} is not JSON"
        raise AssertionError(msg)

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pipes.py").write_text(PIPELINES)
    return tmp_path


def test_a_byte_order_mark_and_a_time_column_named_otherwise(project: Path) -> None:
    """Case 1: a BOM before ``time`` was read as part of the name (every update at 0); a time
    column named ``ts`` is named with --time-column."""
    (project / "bom.csv").write_bytes("time,x\n0,a\n3,b\n".encode("utf-8-sig"))
    done = cli(project, "pipes:Keys", "--input", "xs=bom.csv")
    assert done.returncode == 0, done.stderr
    assert sorted((r["data"][0], r["time"]) for r in strict_lines(done.stdout)) == [
        ("a", 0),
        ("b", 3),
    ]
    (project / "ts.csv").write_text("x,ts,n\na,0,1\nb,2,1\na,5,-1\n")
    done = cli(
        project, "pipes:Keys", "--input", "xs=ts.csv", "--time-column", "ts", "--diff-column", "n"
    )
    assert done.returncode == 0, done.stderr
    assert sorted((r["data"][0], r["time"], r["diff"]) for r in strict_lines(done.stdout)) == [
        ("a", 0, 1),
        ("a", 5, -1),
        ("b", 2, 1),
    ]


def test_nan_and_inf_words_and_zip_codes_stay_strings(project: Path) -> None:
    """Cases 2 and 6: undeclared cells are numbers only when the number prints back as the
    same text, so "nan" three times is one key counted 3, "01234" and "1_000" keep their
    text, and the output is strict JSON."""
    (project / "words.csv").write_text("x\nnan\nnan\nNaN\ninf\n01234\n1_000\n7\n")
    done = cli(project, "pipes:Keys", "--input", "xs=words.csv")
    assert done.returncode == 0, done.stderr
    got = {r["data"][0]: r["data"][1] for r in strict_lines(done.stdout)}
    assert got == {"nan": 2, "NaN": 1, "inf": 1, "01234": 1, "1_000": 1, 7: 1}


def test_declared_types_parse_and_name_misfits(project: Path) -> None:
    """Typed inputs: values parsed by the declared type (the zip code a string whatever it
    looks like, infinities allowed in a double, written as strings: strict JSON); a value that
    does not fit names the file, line, column and value."""
    (project / "sales.csv").write_text(
        "amount,zip,who,time\n2.5,01234,ann,0\ninf,1_000,bob,0\n-inf,99,bob,1\n"
    )
    done = cli(project, "pipes:Typed", "--input", "sales=sales.csv")
    assert done.returncode == 1
    assert "sum: key 'bob' adds up to NaN" in done.stderr
    (project / "ok.csv").write_text("amount,zip,who,time\n2.5,01234,ann,0\ninf,1_000,bob,0\n")
    done = cli(project, "pipes:Typed", "--input", "sales=ok.csv")
    assert done.returncode == 0, done.stderr
    assert sorted(tuple(r["data"]) for r in strict_lines(done.stdout)) == [
        ("ann", 2.5),
        ("bob", "Infinity"),
    ]
    for body, where in [
        (
            "amount,zip,who\n1.0,1,ann\nmany,2,bob\n",
            "line 3: column 'amount': 'many' is not a double",
        ),
        ("amount,zip,who\nnan,1,ann\n", "line 2: column 'amount': 'nan' is a NaN"),
        ("amount,who\n1.0,ann\n", "no column 'zip' of the declared"),
        ("amount,zip,who,extra\n1,2,ann,3\n", "column 'extra' is not declared"),
    ]:
        (project / "bad.csv").write_text(body)
        done = cli(project, "pipes:Typed", "--input", "sales=bad.csv")
        assert done.returncode == 2, done.stderr
        assert "input 'sales'" in done.stderr and "bad.csv" in done.stderr
        assert where in done.stderr
    (project / "clicks.jsonl").write_text('{"user": "ann", "n": 3}\n{"user": "bob", "n": "4"}\n')
    done = cli(project, "pipes:Clicks", "--input", "clicks=clicks.jsonl")
    assert done.returncode == 2
    assert "clicks.jsonl, line 2: column 'n': '4' is not a bigint" in done.stderr


def test_jsonl_rows_with_other_fields_and_non_json_constants(project: Path) -> None:
    """Case 7: a row missing a field was read as a bare string; now an error naming the line.
    NaN/Infinity in the input are not JSON either."""
    (project / "rows.jsonl").write_text(
        '{"who": "ann", "n": 1}\n{"who": "bob", "n": 2, "time": 1}\n{"who": "cy"}\n'
    )
    done = cli(project, "pipes:Keys", "--input", "xs=rows.jsonl")
    assert done.returncode == 2
    assert "rows.jsonl, line 3: the fields differ from the first row's ['who', 'n']" in done.stderr
    assert "lacks ['n']" in done.stderr
    (project / "nan.jsonl").write_text('{"x": 1}\n{"x": NaN}\n')
    done = cli(project, "pipes:Keys", "--input", "xs=nan.jsonl")
    assert done.returncode == 2
    assert "nan.jsonl, line 2: not JSON (NaN is not JSON" in done.stderr


def test_a_file_that_is_not_utf8_names_the_file_and_offset(project: Path) -> None:
    (project / "latin.csv").write_bytes(b"x\nabc\ncaf\xe9\n")
    done = cli(project, "pipes:Keys", "--input", "xs=latin.csv")
    assert done.returncode == 2
    assert "latin.csv' is not UTF-8: byte 0xe9 at offset 9 (line 3)" in done.stderr


def test_readers_directly() -> None:
    """The readers a pipeline's declaration feeds, on files: order by declaration."""
    schema = Schema.parse("zip string, n int")
    with pytest.raises(ValueError, match="'99999999999' is out of range for a int"):
        schema.columns[1].type.parse("99999999999")
    with pytest.raises(ValueError, match="unknown type 'timestamp'"):
        Schema.parse("at timestamp")
    with pytest.raises(ValueError, match=r"columns \['a'\] appear twice"):
        Schema.parse("a int, a long")


def test_reader_keeps_declared_order(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"n": 5, "zip": "01", "time": 2}\n')
    assert read_updates(path, "xs", Schema.parse("zip string, n int")) == [(("01", 5), 2, 1)]


# -- NaN: refused at input, at any worker and process count ---------------------------------


class Keys(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: (x, ())).count()


class Mins(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.min()


class Sums(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.sum()


@pytest.mark.parametrize("processes", [1, 2])
def test_nan_data_are_refused_at_input(processes: int) -> None:
    """Cases 3 and 4: NaN keys in min were each their own key, and the same NaN object
    inserted then removed cancelled at one process but not at two. A datum holding a NaN (at
    the top or inside a tuple) is now refused, naming the input and the datum."""
    nan = float("nan")
    workers = processes
    for pipe, ups in [
        (Mins(), [((nan, 1), 0, 1), ((nan, 2), 0, 1)]),
        (Keys(), [(nan, 0, 1), (nan, 1, -1)]),
        (Keys(), [(("a", (1, nan)), 0, 1)]),
        (Keys(), [(("a", np.float32("nan")), 0, 1)]),
    ]:
        with pytest.raises(ValueError, match=r"input 'xs': datum .*nan.* holds a NaN"):
            df.run(pipe, workers=workers, processes=processes, xs=ups)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_sum_that_is_nan_names_the_key(processes: int) -> None:
    """Case 5: inf + -inf then retracting -inf gave NaN counts at two processes; now the
    sum's error, naming the key, at any process count."""
    inf = float("inf")
    ups = [(("k", inf), 0, 1), (("k", -inf), 0, 1), (("k", -inf), 1, -1)]
    with pytest.raises(df.OperatorError, match="sum: key 'k' adds up to NaN") as info:
        df.run(Sums(), workers=processes, processes=processes, xs=ups)
    assert info.value.operator == "sum"
    # Infinities alone are numbers.
    assert df.run(Sums(), xs=ups[:1]) == [(("k", inf), 0, 1)]


async def test_handles_refuse_nan_and_keep_what_was_fed() -> None:
    async with df.open(Keys()) as job:
        xs = job.inputs["xs"]
        xs.insert("a")
        for feed in (
            lambda: xs.insert(float("nan")),
            lambda: xs.update_at(("b", float("nan")), 3),
            lambda: xs.insert_many(["b", float("nan")]),
            lambda: xs.insert_many(pd.DataFrame({"x": [1.0, None]})),
        ):
            with pytest.raises(ValueError, match="holds a NaN"):
                feed()
        await job.advance_to(1)
        assert job.output.at(0) == {("a", 1): 1}


def test_pandas_input_read_by_declaration() -> None:
    """A DataFrame fed to a declared input: columns by name, values checked by type."""

    class P(df.Pipeline):
        schemas = {"xs": "who string, n long"}

        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    frame = pd.DataFrame({"n": [1, 2], "who": ["a", "b"], "time": [0, 1]})
    assert df.run(P(), xs=frame) == [(("a", 1), 0, 1), (("b", 2), 1, 1)]
    with pytest.raises(ValueError, match=r"input 'xs', row 1: column 'n': 2.5 is not a bigint"):
        df.run(P(), xs=pd.DataFrame({"who": ["a", "b"], "n": [1, 2.5]}))
    with pytest.raises(ValueError, match="no column 'n' of the declared"):
        df.run(P(), xs=pd.DataFrame({"who": ["a"]}))

    class Wrong(df.Pipeline):
        schemas = {"ys": "who string"}

        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    with pytest.raises(ValueError, match=r"declares \['ys'\], but the inputs are \['xs'\]"):
        df.run(Wrong(), xs=pd.DataFrame({"who": ["a"]}))


def test_subscribe_is_bounded_by_default() -> None:
    """A reader that never reads ends alone after DEFAULT_MAX_BUFFER times; the job goes on."""
    from deltaflow.scheduler.handles import DEFAULT_MAX_BUFFER

    async def main() -> None:
        async with df.open(Keys()) as job:
            sub = job.output.subscribe()
            for t in range(DEFAULT_MAX_BUFFER + 2):
                job.inputs["xs"].insert(t)
                await job.advance_to(t + 1)
            seen = 0
            with pytest.raises(df.SubscriptionOverflowError, match="1024 times behind"):
                async for _ in sub:
                    seen += 1
            assert seen == DEFAULT_MAX_BUFFER
            assert job.output.at(DEFAULT_MAX_BUFFER) == {
                (t, 1): 1 for t in range(DEFAULT_MAX_BUFFER + 1)
            }

    trio.run(main)
