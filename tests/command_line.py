"""The command line run as a user runs it: ``python -m deltaflow`` in a subprocess, and the
pipelines the command-line tests give it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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


class Recent(df.Pipeline):
    schemas = {"events": "user string, n long not null"}

    def build(self, events):
        return events.window(df.tumbling(2), at=lambda e: e[1], retention=0)
"""


def cli_env() -> dict[str, str]:
    """This process's environment, with this tree importable."""
    return {**os.environ, "PYTHONPATH": str(Path(df.__file__).parent.parent)}


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m deltaflow *args`` run in ``cwd`` with this tree importable."""
    return subprocess.run(
        [sys.executable, "-m", "deltaflow", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )


def terminal_sigint() -> None:
    """Give the child Ctrl-C as a terminal does (default action, not blocked), whatever the
    test runner's own disposition or signal mask, which a child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start_cli(cwd: Path, *args: str, stdout: bool = False) -> subprocess.Popen[str]:
    """``python -m deltaflow *args`` started in ``cwd`` with this tree importable, its stderr
    (and with ``stdout`` its stdout) piped as text, taking Ctrl-C as from a terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "deltaflow", *args],
        cwd=cwd,
        stdout=subprocess.PIPE if stdout else None,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=terminal_sigint,
    )
