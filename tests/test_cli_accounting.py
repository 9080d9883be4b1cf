"""The command line's accounting, through a subprocess on real files: --on-bad, --rejected,
the end summary, --log-level, required inputs and the line of a parse error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import deltaflow as df

PIPELINES = """
import deltaflow as df


class Totals(df.Pipeline):
    schemas = {"events": "user string, n long not null"}

    def build(self, events):
        return events.sum()


class Pairs(df.Pipeline):
    def build(self, left, right=df.optional()):
        return left.concat(right)


class Both(df.Pipeline):
    def build(self, left, right):
        return left.concat(right)
"""


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(df.__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "deltaflow", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pipes.py").write_text(PIPELINES)
    (tmp_path / "events.csv").write_text("user,n,time\nu1,2,0\nu2,,0\nu1,x,1\nu2,5,1\n")
    (tmp_path / "xs.csv").write_text("x\n1\n2\n")
    return tmp_path


def test_bad_records_fail_by_default_at_their_line(project: Path) -> None:
    """Without --on-bad the first bad record stops the run, naming its file and line."""
    done = cli(project, "run", "pipes:Totals", "--input", "events=events.csv")
    assert done.returncode == 2
    assert "events.csv, line 3: column 'n' is null ('')" in done.stderr


def test_skip_counts_and_quarantine_writes_json_lines(project: Path) -> None:
    """--on-bad skip runs the good records and says how many were refused; quarantine
    also writes each bad one (input, record, reason, file and line) to --rejected."""
    done = cli(project, "run", "pipes:Totals", "--input", "events=events.csv", "--on-bad", "skip")
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert {"data": ["u1", 2], "time": 0, "diff": 1} in out
    assert {"data": ["u2", 5], "time": 1, "diff": 1} in out
    assert "input 'events': 4 read, 2 accepted, 2 refused (2 skipped)" in done.stderr
    done = cli(project, "run", "pipes:Totals", "--input", "events=events.csv",
               "--on-bad", "events=quarantine", "--rejected", "bad.jsonl")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 refused (2 quarantined to bad.jsonl)" in done.stderr
    rejected = [json.loads(line) for line in (project / "bad.jsonl").read_text().splitlines()]
    assert [(r["input"], r["datum"], r["where"]) for r in rejected] == [
        ("events", ["u2", "", "0"], "events.csv, line 3"),
        ("events", ["u1", "x", "1"], "events.csv, line 4"),
    ]
    assert "NOT NULL" in rejected[0]["reason"] and "bigint" in rejected[1]["reason"]
    done = cli(project, "run", "pipes:Totals", "--input", "events=events.csv", "--on-bad", "x=y")
    assert done.returncode == 2 and "on_bad names the input 'x'" in done.stderr


def test_an_omitted_input_is_a_usage_error(project: Path) -> None:
    """An input left out is an error naming it, unless build() declares it optional."""
    done = cli(project, "run", "pipes:Both", "--input", "left=xs.csv")
    assert done.returncode == 2
    assert "input(s) 'right' not given; give --input right=FILE" in done.stderr
    done = cli(project, "run", "pipes:Pairs", "--input", "left=xs.csv")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2


def test_log_level_shows_deltaflow_records(project: Path) -> None:
    """--log-level INFO shows the job's start and end on stderr; a bad level is refused."""
    done = cli(project, "run", "pipes:Pairs", "--input", "left=xs.csv", "--log-level", "info")
    assert done.returncode == 0, done.stderr
    assert "INFO deltaflow: job Pairs started" in done.stderr
    assert "INFO deltaflow: job Pairs finished" in done.stderr
    done = cli(project, "run", "pipes:Pairs", "--input", "left=xs.csv", "--log-level", "loud")
    assert done.returncode == 2 and "expected a log level" in done.stderr


def test_an_unclosed_quote_names_its_line(project: Path) -> None:
    """An unclosed quote on line 3 is reported as line 3, saying how to fix it."""
    (project / "q.csv").write_text('x,y\n1,2\n3,"4\n5,6\n7,8\n')
    done = cli(project, "run", "pipes:Pairs", "--input", "left=q.csv")
    assert done.returncode == 2
    assert "q.csv, line 3: a quoted field opens here and is never closed" in done.stderr
    assert "close the quote" in done.stderr
