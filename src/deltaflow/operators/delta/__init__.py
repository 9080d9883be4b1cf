"""Delta queries and worst-case optimal joins (multiway joins that keep only input indexes).

* :mod:`.query` — :func:`~.query.multiway_join` (``df.multiway_join``), a conjunctive query
  maintained by one delta rule per atom. It builds on ``Collection`` (its atoms are
  collections), while ``Collection``'s own ``half_join``, ``index_by_key`` and ``extend`` build
  on the rest of this package: the package imports only the modules below ``Collection``.
* :mod:`.build` — adding indexes and a rule's operators to a dataflow under construction.
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

__all__ = ["Index", "PrefixExtender", "extend", "half_join", "index_by_key"]
