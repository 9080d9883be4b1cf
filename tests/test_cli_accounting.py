"""The command line's accounting, through a subprocess on real files: --on-bad, --rejected,
the end summary, --log-level, required inputs and the line of a parse error."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from tests.command_line import PIPELINES, cli, start_cli


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


def test_late_rows_are_in_the_summary_and_logged_once(project: Path) -> None:
    """Rows a window's retention drops are counted in the end summary under the window
    operator, and logged by one WARNING however many there are."""
    rows = [(f"u{i}", i % 3, t) for t in range(6) for i in range(4)]  # event time i % 3
    late = sum(1 for _, n, t in rows if n - n % 2 + 2 <= t)
    (project / "late.csv").write_text(
        "user,n,time\n" + "".join(f"{u},{n},{t}\n" for u, n, t in rows)
    )
    done = cli(project, "run", "pipes:Recent", "--input", "events=late.csv")
    assert done.returncode == 0, done.stderr
    assert late > 1
    window = "window(tumbling(2, origin=0), at=pipes.Recent.build.<locals>.<lambda>:"
    assert re.search(rf"{re.escape(window)}\d+\): {late} late row\(s\) not applied", done.stderr)
    assert "late update(s)" not in done.stderr  # the log is shown on request
    done = cli(project, "run", "pipes:Recent", "--input", "events=late.csv",
               "--log-level", "WARNING")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("late update(s)") == 1


def test_metrics_are_scraped_over_http_while_the_cli_runs(project: Path) -> None:
    """--metrics 0 serves Prometheus text on loopback while the command runs (its address on
    stderr): scraped over HTTP during the run, the output's frontier and published updates
    advance, the input's read count is every row, and the port closes with the run."""
    pytest.importorskip("prometheus_client")
    times = 30000  # long enough to be scraped several times on a fast, idle machine
    (project / "long.csv").write_text(
        "user,n,time\n" + "".join(f"u{t % 7},{t % 5},{t}\n" for t in range(times))
    )
    args = ["run", "pipes:Totals", "--input", "events=long.csv", "--metrics", "0",
            "--output", "out.jsonl"]  # fmt: skip
    with start_cli(project, *args) as proc:
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.fullmatch(r"deltaflow: metrics at (http://127\.0\.0\.1:\d+/metrics)\n", line)
            assert match, line
            url = match.group(1)
            frontiers: list[float] = []
            written: list[float] = []
            while proc.poll() is None:
                try:
                    with urllib.request.urlopen(url, timeout=10) as reply:
                        text = reply.read().decode("utf-8")
                except OSError:
                    break  # the run ended between the poll and the request
                frontiers.append(_sample(text, 'deltaflow_output_frontier{output="output"}'))
                written.append(_sample(text, 'deltaflow_output_updates_total{output="output"}'))
                read = _sample(text, 'deltaflow_input_records_total{input="events",outcome="read"}')
                assert read == times
            assert proc.wait(timeout=120) == 0, proc.stderr.read()
        finally:
            proc.kill()
    assert len(set(frontiers)) >= 2, frontiers  # scraped at two times at least
    assert frontiers == sorted(frontiers) and written == sorted(written)
    assert written[-1] > written[0]
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def _sample(text: str, name: str) -> float:
    """The value of the sample ``name`` (with its labels) in Prometheus text."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in {text}")
