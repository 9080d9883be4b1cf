"""``python -m deltaflow run ... --follow`` on a directory input: each file one time, each
time's output written as JSON lines as soon as it closes, until Ctrl-C (exit code 130);
without ``--follow`` a directory is read once, as ``df.run`` reads a files source."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import PIPELINES, cli, start_cli

import deltaflow as df

TOTALS = "class Totals"  # pipes:Totals: the sum of n per user, "user string, n long not null"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert TOTALS in PIPELINES
    (tmp_path / "pipes.py").write_text(PIPELINES)
    (tmp_path / "in").mkdir()
    return tmp_path


def put(folder: Path, index: int, rows: list[tuple[str, int]]) -> None:
    """File ``index`` of the directory, appearing whole (written beside it, then renamed)."""
    tmp = folder.parent / f".part-{index}.csv"
    tmp.write_text("user,n\n" + "".join(f"{u},{n}\n" for u, n in rows))
    tmp.rename(folder / f"part-{index:04d}.csv")


def canonical(lines: list[dict[str, Any]]) -> list[str]:
    """JSON lines in a fixed order (within a time, an output's lines come in any order)."""
    return sorted(json.dumps(line, sort_keys=True) for line in lines)


def as_lines(updates: list[tuple[Any, int, int]]) -> list[dict[str, Any]]:
    return [{"data": list(d), "time": t, "diff": r} for d, t, r in updates]


def expected(folder: Path) -> list[dict[str, Any]]:
    """What df.run gives over the directory's files now, one time each."""
    out = df.run(_totals(folder.parent), events=df.sources.files(folder, max_files=1))
    return as_lines(out)


def _totals(project: Path) -> df.Pipeline:
    """The project's ``Totals``, loaded from its file (under a name of its own)."""
    spec = importlib.util.spec_from_file_location("follow_pipes", project / "pipes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Totals()  # type: ignore[no-any-return]


def test_follow_writes_each_time_as_files_come_until_ctrl_c(project: Path) -> None:
    folder = project / "in"
    put(folder, 0, [("u1", 2), ("u2", 3)])
    args = ["run", "pipes:Totals", "--input", "events=in", "--follow"]
    lines: queue.Queue[str] = queue.Queue()
    with start_cli(project, *args, stdout=True) as proc:
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: [lines.put(x) for x in stdout], daemon=True)
        reader.start()
        got: list[dict[str, Any]] = []

        def until(n: int) -> None:
            while len(got) < n:
                got.append(json.loads(lines.get(timeout=60)))

        try:
            until(2)  # time 0: u1 2, u2 3
            assert canonical(got) == canonical(expected(folder))
            put(folder, 1, [("u1", 5)])
            until(4)  # time 1: u1's total changes
            assert canonical(got) == canonical(expected(folder))
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().endswith("deltaflow: interrupted")


def test_a_directory_is_read_once_without_follow(project: Path) -> None:
    folder = project / "in"
    put(folder, 0, [("u1", 2), ("u2", 3)])
    put(folder, 1, [("u1", 5)])
    os.utime(folder / "part-0001.csv", (2e9, 2e9))  # oldest first: the files' order
    done = cli(project, "run", "pipes:Totals", "--input", "events=in")
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    # One batch of every file there: one time.
    assert canonical(got) == canonical(
        as_lines(df.run(_totals(project), events=df.sources.files(folder)))
    )
    done = cli(project, "run", "pipes:Totals", "--input", "events=nowhere", "--follow")
    assert done.returncode == 2
    assert "no file 'nowhere'" in done.stderr
    (project / "xs.csv").write_text("user,n\nu1,1\n")
    done = cli(project, "run", "pipes:Totals", "--input", "events=xs.csv", "--follow")
    assert done.returncode == 2
    assert "--follow watches a directory" in done.stderr
