"""The command line run as a user runs it: ``python -m deltaflow`` in a subprocess, and the
pipelines the command-line tests give it."""

from __future__ import annotations

import os
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


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m deltaflow *args`` run in ``cwd`` with this tree importable."""
    env = {**os.environ, "PYTHONPATH": str(Path(df.__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "deltaflow", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
