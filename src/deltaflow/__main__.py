"""``python -m deltaflow``: the command line (:mod:`deltaflow.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
