"""Reductions: ``reduce(logic)`` and ``count``, ``distinct``, ``threshold``, ``min``, ``max``,
``top_k`` built on it.

A reduction keeps, for every key and at every time ``t``,
``output[key][t] = logic(key, input[key][t])``: the output is a *function of the accumulated
input*, not of its changes. ``logic(key, vals)`` gets the key's accumulated values as
``[(val, count), ...]`` and returns ``[(out_val, count), ...]``; the output holds
``(key, out_val)`` with that count.

What ``logic`` sees
===================

* Only values with a **positive** accumulated count, each once, with its count; zero counts
  are left out, and a key with no positive value is absent (``logic`` is not called for it).
* A **negative** count (a value, or for ``count`` a key's total, retracted more than it was
  inserted) is no collection: the public reductions raise an
  :class:`~deltaflow.errors.OperatorValueError` naming the reduction, the key and the count,
  on every path (the columnar kernels included), rather than let the key vanish. Only
  ``threshold(f)`` takes such counts: its ``f`` is given the key's count, whatever its sign.
  The rule holds at every scope, loops included, at the times the frontier has passed: the
  accumulation there is the program's collection at that time. A count at a time not yet
  complete (a retraction stored before the insertion it cancels) is a guess, never checked.
* Sorted by value when the values are mutually comparable with ``<``, otherwise by deltaflow's
  deterministic universal order (numbers, then strings, bytes, tuples, ...; see
  :mod:`deltaflow.framework.trace.order`).
* ``count`` and ``threshold`` use an internal variant that sees every non-zero count,
  because their contract is about the key's total (``reduce_core(strict=False)`` is how
  ``threshold`` is handed negative ones).

How it is computed
==================

One module per concept:

* :mod:`.operator` - :class:`ReduceOperator`: receiving batches, correcting the keys due at
  each frontier step, emitting corrections, holding capabilities;
* :mod:`.paths` - the per-key path, chosen once per operator by the shape of its times;
* :mod:`.interesting_times` - where a key's output may change, and which of those times can
  be evaluated now (with :mod:`.points`, product times as flat int tuples and chains);
* :mod:`.accumulation` - what a history sums to at a time, and corrections as differences;
* :mod:`.chains` - keys whose times lie on one line or row: one sweep in chain order;
* :mod:`.general` - every other key of a partial order;
* :mod:`.total` - totally ordered (``int``) times;
* :mod:`.counting` - ``distinct`` and ``threshold`` by plain int counts;
* :mod:`.columnar` - ``count``, ``distinct`` and ``threshold`` at int times over batches of
  ints, as one numpy kernel per batch (:mod:`deltaflow.framework.kernels` chooses);
* :mod:`.logics` - the built-in logics and the operator's shortcuts for them;
* :mod:`.reductions` - the public functions below, and :func:`reduce_core`.

Footguns
========

* ``logic`` must be a function of ``(key, vals)`` only: it is called at many times, in any
  order compatible with the partial order, and possibly again at a time it already saw.
* Counts returned by ``logic`` must be ``int``; returning a value twice adds its counts.
* Per-key work is proportional to the key's (compacted) history and interesting times: one
  key with a huge history is evaluated in one piece (the operator does not yield inside a
  round).
* The int path keeps every key's live values in a dict (about as much memory again as the
  compacted input trace); the other paths keep their input and output histories in dicts of
  lists (Python objects, more memory per update than a columnar trace).

    >>> from deltaflow.testing import example
    >>> example(lambda xs: count(xs), xs=[(("a", 1), 0, 1), (("a", 2), 0, 1), (("a", 1), 2, -1)])
    [(('a', 2), 0, 1), (('a', 1), 2, 1), (('a', 2), 2, -1)]
"""

from __future__ import annotations

from .counting import ByCount

# The built-in logics and the operator's shortcuts for them, under the names they had when
# this package was one module: tests and benchmarks build operators with them and check the
# shortcuts against them.
from .logics import (
    FOLDS as _FOLDS,  # noqa: F401
    Logic,
    count_logic as _count_logic,  # noqa: F401
    distinct_by_count as _distinct_by_count,  # noqa: F401
    distinct_logic as _distinct_logic,  # noqa: F401
    max_logic as _max_logic,  # noqa: F401
    min_logic as _min_logic,  # noqa: F401
    threshold_functions as _threshold_functions,  # noqa: F401
)
from .operator import ReduceOperator
from .reductions import count, distinct, max, min, reduce, reduce_core, threshold, top_k

__all__ = [
    "ByCount",
    "Logic",
    "ReduceOperator",
    "count",
    "distinct",
    "max",
    "min",
    "reduce",
    "reduce_core",
    "threshold",
    "top_k",
]
