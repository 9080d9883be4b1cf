"""Run every benchmark script and print their JSON lines (``make bench``).

Each ``bench_*.py`` beside this file is a standalone script printing one JSON object per
figure; this runner runs them in turn (pass ``--quick`` through for a smoke run, or names
to select: ``python benchmarks/run.py core trace``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    flags = [a for a in argv if a.startswith("--")]
    names = [a for a in argv if not a.startswith("--")]
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    status = 0
    for script in scripts:
        print(f"# {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script), *flags], check=False)
        status = status or proc.returncode
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
