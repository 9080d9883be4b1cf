"""Delta queries and worst-case optimal joins (multiway joins that keep only input indexes).

* :func:`multiway_join` — a conjunctive query, maintained by one delta rule per atom
  (:mod:`.query`).
* :mod:`.index` — the shared index of a collection that the rules look up.
* :mod:`.lookup` — lookups as of a time: count, propose, validate, and the operator running
  them.
"""

from __future__ import annotations

from .query import multiway_join as multiway_join

__all__ = ["multiway_join"]
