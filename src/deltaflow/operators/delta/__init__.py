"""Delta queries and worst-case optimal joins (multiway joins that keep only input indexes).

* :func:`multiway_join` — a conjunctive query, maintained by one delta rule per atom
  (:mod:`.query`).
* :mod:`.index` — the shared index of a collection that the rules look up.
* :mod:`.lookup` — lookups as of a time: count, propose, validate, intersect.
* :mod:`.rule` — :class:`~.rule.RuleOperator`, the operator running one rule's lookups.
* :mod:`.extenders` — the pieces, public: ``half_join``, :class:`Index`,
  :class:`PrefixExtender` (count, propose, validate) and ``extend``.
"""

from __future__ import annotations

from .extenders import (
    Index as Index,
    PrefixExtender as PrefixExtender,
    extend as extend,
    half_join as half_join,
    index_by_key as index_by_key,
)
from .query import multiway_join as multiway_join

__all__ = ["Index", "PrefixExtender", "extend", "half_join", "index_by_key", "multiway_join"]
