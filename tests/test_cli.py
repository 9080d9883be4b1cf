"""The command line, through a subprocess on real files: run, graph, --version, errors."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import cli, start_cli

import deltaflow as df

PIPELINES = '''
import time
import urllib.request

import deltaflow as df


class Totals(df.Pipeline):
    """(who, amount) rows to (who, total)."""

    def build(self, sales):
        return sales.sum()


class Split(df.Pipeline):
    def build(self, edges):
        return {"sources": edges.map(lambda e: e[0]).distinct(),
                "targets": edges.map(lambda e: e[1]).distinct()}


class Needs(df.Pipeline):
    def __init__(self, k):
        self.k = k

    def build(self, xs):
        return xs


class Reach(df.Pipeline):
    def build(self, roots, edges):
        def step(reach):
            return (reach.join_map(edges, lambda src, root, dst: (dst, root))
                         .concat(roots.map(lambda r: (r, r))).distinct())
        return roots.map(lambda r: (r, r)).iterate(step)


class Shared(df.Pipeline):
    def build(self, roots, edges):
        e = edges.map(lambda e: (e[0], e[1])).arrange_by_key()
        return roots.map(lambda r: (r, 1)).join(e).concat(roots.map(lambda r: (r, 2)).join(e))


class Broken(df.Pipeline):
    def build(self, xs):
        return xs.map(lambda x: 1 // 0)


def pause(x):
    time.sleep(0.005)
    return x


class Slow(df.Pipeline):
    def build(self, xs):
        return xs.map(pause)


class Climb(df.Pipeline):
    """Each x climbs to 300 a step per loop round, a round at least 5 ms."""

    def build(self, xs):
        return xs.iterate(lambda n: n.map(lambda x: pause(min(x + 1, 300))).concat(xs).distinct())


instance = Totals()
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pipes.py").write_text(PIPELINES)
    (tmp_path / "sales.csv").write_text("who,amount,time\nann,3,0\nbob,4,0\nann,2.5,1\n")
    (tmp_path / "sales.jsonl").write_text(
        '{"who": "ann", "amount": 3}\n\n{"who": "bob", "amount": 4, "time": 2, "diff": 2}\n'
    )
    (tmp_path / "edges.jsonl").write_text(
        '{"src": 1, "dst": 2}\n{"src": 2, "dst": 3}\n{"src": 2, "dst": 3, "time": 4, "diff": -1}\n'
    )
    (tmp_path / "roots.csv").write_text("root\n1\n")
    (tmp_path / "slow.csv").write_text("x,time\n" + "".join(f"{i},{i}\n" for i in range(400)))
    return tmp_path


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_version(project: Path) -> None:
    done = cli(project, "--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"deltaflow {df.__version__}"


def test_run_csv_to_stdout(project: Path) -> None:
    done = cli(project, "run", "pipes:Totals", "--input", "sales=sales.csv")
    assert done.returncode == 0, done.stderr
    assert lines(done.stdout) == [
        {"data": ["ann", 3], "time": 0, "diff": 1},
        {"data": ["bob", 4], "time": 0, "diff": 1},
        {"data": ["ann", 3], "time": 1, "diff": -1},
        {"data": ["ann", 5.5], "time": 1, "diff": 1},
    ]
    assert done.stderr == ""


def test_run_jsonl_to_a_file_with_workers_and_progress(project: Path) -> None:
    done = cli(project, "run", "pipes:instance", "--input", "sales=sales.jsonl",
               "--output", "out.jsonl", "--workers", "2", "--progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert lines((project / "out.jsonl").read_text()) == [
        {"data": ["ann", 3], "time": 0, "diff": 1},
        {"data": ["bob", 8], "time": 2, "diff": 1},
    ]
    assert "deltaflow: time done | 2 updates out |" in done.stderr


def test_run_a_dict_pipeline_names_outputs(project: Path) -> None:
    done = cli(project, "run", "pipes.py:Split", "--input", "edges=edges.jsonl")
    assert done.returncode == 0, done.stderr
    got = lines(done.stdout)
    assert {"data": 3, "time": 4, "diff": -1, "output": "targets"} in got
    assert {"data": 1, "time": 0, "diff": 1, "output": "sources"} in got
    assert {u["output"] for u in got} == {"sources", "targets"}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["pipes:Nope"], "module 'pipes' has no 'Nope'"),
        (["nomodule:X"], "cannot import 'nomodule'"),
        (["pipes"], "expected module:Pipeline"),
        (["pipes:Needs"], "must take no arguments"),
        (["pipes:df"], "not a deltaflow Pipeline"),
        (["pipes:Totals", "--input", "bogus=sales.csv"], "Totals has the inputs ['sales']"),
        (["pipes:Totals", "--input", "sales=missing.csv"], "no file 'missing.csv'"),
        (["pipes:Totals", "--input", "sales"], "NAME=FILE"),
        (["pipes:Totals", "--input", "sales=pipes.py"], "neither .csv nor .jsonl"),
        (["pipes:Totals", "--workers", "0"], "expected a positive int"),
    ],
)
def test_usage_errors_exit_2_with_a_message(project: Path, args: list[str], fragment: str) -> None:
    done = cli(project, "run", *args)
    assert done.returncode == 2
    assert fragment in done.stderr
    assert done.stdout == ""


def test_bad_updates_and_failing_jobs_exit_1(project: Path) -> None:
    (project / "bad.csv").write_text("who,amount,time\nann,3,x\n")
    done = cli(project, "run", "pipes:Totals", "--input", "sales=bad.csv")
    assert done.returncode == 2  # a malformed file, like a malformed line of JSON
    assert "input 'sales', bad.csv, line 2: column 'time' is 'x', which is not an int" in (
        done.stderr
    )
    done = cli(project, "run", "pipes:Broken", "--input", "xs=roots.csv")
    assert done.returncode == 1
    assert "OperatorError" in done.stderr and "ZeroDivisionError" in done.stderr
    done = cli(project, "run", "pipes:Totals", "--input", "sales=sales.csv", "--output",
               "no/such/dir/out.jsonl")  # fmt: skip
    assert done.returncode == 1
    assert "FileNotFoundError" in done.stderr and "no/such/dir/out.jsonl" in done.stderr


def test_graph_mermaid_and_dot(project: Path) -> None:
    done = cli(project, "graph", "pipes:Reach", "--workers", "2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("flowchart TD\n")
    loops = [line for line in out.splitlines() if "subgraph" in line]
    assert len(loops) == 1
    assert loops[0].startswith('    subgraph loop1["loop iterate at ')
    assert re.search(r'pipes\.py:\d+"\]$', loops[0])
    assert "-. exchange .->" in out
    done = cli(project, "graph", "pipes:Reach", "--format", "dot", "--output", "g.dot")
    assert done.returncode == 0, done.stderr
    dot = (project / "g.dot").read_text()
    assert dot.startswith("digraph deltaflow {") and dot.rstrip().endswith("}")
    assert '    subgraph cluster_loop1 {\n        label="loop iterate at ' in dot


def test_graph_annotated_with_a_run(project: Path) -> None:
    done = cli(project, "graph", "pipes:Shared", "--input", "roots=roots.csv",
               "--input", "edges=edges.jsonl")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "arrange_by_key<br/>shared by 2 readers<br/>3 records in<br/>3 updates arranged" in (
        done.stdout
    )
    assert "join_map<br/>+ map(...)<br/>+ arrange_by_key<br/>4 records in" in done.stdout


def test_console_script_is_declared() -> None:
    pyproject = Path(df.__file__).parent.parent.parent / "pyproject.toml"
    assert 'deltaflow = "deltaflow.cli:main"' in pyproject.read_text()


def test_a_long_run_shows_progress_after_a_second(project: Path) -> None:
    done = cli(project, "run", "pipes:Slow", "--input", "xs=slow.csv", "--output", "o.jsonl")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith("deltaflow: time done | 400 updates out | ")
    assert len((project / "o.jsonl").read_text().splitlines()) == 400


def test_ctrl_c_stops_the_run_with_exit_code_130(project: Path) -> None:
    (project / "long.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(4000)))
    proc = start_cli(project, "run", "pipes:Slow", "--input", "xs=long.csv", stdout=True)
    try:
        time.sleep(5)  # the job takes 20 s; the interpreter starts in well under 5 s
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err.strip().endswith("deltaflow: interrupted")
    assert out == ""


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_run_serves_a_dashboard_while_it_runs(project: Path, host: str) -> None:
    """``--dashboard 0`` writes the dashboard's address on stderr (with a token off
    loopback), the page's JSON follows the job (a loop, whose rounds let the page in), and
    the output is as without it."""
    (project / "climb.csv").write_text("x\n0\n")
    args = ["run", "pipes:Climb", "--input", "xs=climb.csv", "--output", "o.jsonl"]
    with start_cli(project, *args, "--dashboard", "0", "--dashboard-host", host) as proc:
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()
            match = re.fullmatch(r"deltaflow: dashboard at (http://\S+)\n", first)
            assert match, first
            url = match.group(1)
            assert ("?token=" in url) == (host != "127.0.0.1")
            port = re.search(r":(\d+)/", url)
            assert port is not None
            query = url.partition("?")[2]
            stats = f"http://127.0.0.1:{port.group(1)}/api/stats" + (f"?{query}" if query else "")
            seen = []
            for _ in range(3):
                with urllib.request.urlopen(stats, timeout=10) as response:
                    seen.append(json.loads(response.read()))
                time.sleep(0.3)
            proc.stderr.read()
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
    assert all(s["pipeline"] == "Climb" for s in seen)
    records = [sum(e["records"] for e in s["edges"]) for s in seen]
    assert records == sorted(records) and records[-1] > records[0], records
    assert len((project / "o.jsonl").read_text().splitlines()) == 301


def test_a_bad_dashboard_port_is_a_usage_error(project: Path) -> None:
    done = cli(project, "run", "pipes:Slow", "--input", "xs=slow.csv", "--dashboard", "70000")
    assert done.returncode == 2 and "expected a port from 0 to 65535" in done.stderr
