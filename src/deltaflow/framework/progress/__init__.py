"""Progress tracking: which times can still arrive at each operator input.

The dataflow graph has *nodes* (operators) with numbered input ports (*targets*) and output
ports (*sources*). Edges connect a source to a target and never change times. Inside a node,
each connected (input, output) pair carries a :class:`~deltaflow.framework.summary.PathSummary`
(identity for ordinary operators; ``enter`` / ``leave`` / ``feedback`` for the loop plumbing of
the flat graph encoding).

A *pointstamp* is a (location, time) pair with a signed count: a capability held at an output
port (the operator may still send at that time), or a batch of messages in flight to an input
port. The :class:`ProgressTracker` keeps the counts per location and derives, for every
input port, its *implications*: the antichain of minimal times that could still appear there,
from its own pointstamps and from everything upstream mapped through edges and summaries.
They are the port's **frontier**: once no frontier element is ``<=`` a time ``t``, the
operator has seen every update at ``t`` ("the frontier passed ``t``").

How it works:

* Updates are buffered by :meth:`ProgressTracker.update_source` /
  :meth:`~ProgressTracker.update_target` (or in bulk by
  :meth:`~ProgressTracker.update_pointstamps`), summed per location and time, and applied by
  :meth:`~ProgressTracker.propagate`. A message sent and consumed between two propagations
  cancels in the buffer and costs nothing more.
* Each location keeps its ``pointstamps`` (counts of its own times, with the antichain of
  minimal positive-count times, the semantics of
  :class:`~deltaflow.framework.antichain.MutableAntichain`). Each *watched* input port also
  keeps its ``implications``: counts of the frontier elements of its own pointstamps, of
  those of the locations before it that keep none, and of the implication frontiers of the
  watched ports before it, each mapped along the summary of the path between them, with the
  antichain of minimal positive-count times. Operators read input frontiers only, and some
  never read theirs (a loop's feedback, ``enter``, ``leave``, linear operators): their inputs
  are named to the tracker as ``unwatched``, and a change skips them and every output on its
  way (such frontiers are made on request). Only *frontier changes* travel: a change that
  does not move a port's frontier (an increment of a time already dominated there, a
  decrement that leaves the count positive) stops at once; a change of a port's implication
  frontier is pushed to the watched ports after it. Both are plain dicts of counts plus a
  frontier list, updated one change at a time, over coordinate tuples (``sort_key(time)``,
  e.g. ``(t, i)`` for ``Product(t, i)``), which hash and compare at C speed; times are
  rebuilt only for reports and queries (reusing the time objects the tracker was given), and
  a port's frontier :class:`Antichain` is built when first asked for after it moved (ports
  with equal frontiers share one).
* The pending changes live in a min-heap keyed by ``(sort_key(time), location)``; all entries
  for the same key are summed before they are applied. Processing in time order is what makes
  cycles terminate: a retraction always reaches a location before the times it was hiding can
  travel around a loop and come back. A first-in-first-out queue can chase its own tail for
  ever. Locations are numbered so that, within one time, every location comes after those that
  can pass it that time unchanged: each is visited at most once per time, and a change along a
  chain of single successors skips the heap.

Invariants and footguns:

* :meth:`~ProgressGraphBuilder.build` rejects every cycle that does not strictly advance
  times: around each cycle the composed summary must keep the nesting depth and add a positive
  amount (a loop's feedback). Without that, no frontier on the cycle could ever pass a time.
  It also rejects graphs where one location would see times of different nesting depths.
* A node may declare its depth (``add_node(..., depth=)``; the plan declares every actor's).
  It fixes the depth of every location connected to it (:attr:`ProgressGraph.depths`), and
  with it the :class:`~deltaflow.framework.time_domain.TimeDomain` the tracker reads that
  location's times with: a time of another shape there is rejected, naming the port. Where
  no node declared one, any flat time is taken (and times of two depths at one location are
  the caller's error).
* Counts may go negative for a while (a "consumed" seen before the matching "produced");
  negative counts never hold a frontier back. Report production before consumption where you
  can: while a count is wrongly negative, frontiers may be too far ahead.
* Queries (:meth:`~ProgressTracker.frontier`, :meth:`~ProgressTracker.is_complete`) reflect
  the state as of the last :meth:`~ProgressTracker.propagate`.
* Times must be ints, or Products nested in the outer coordinate with int inner coordinates
  (``Product(Product(t, i), j)``); anything else is rejected when buffered.
* Times at a location must all have the same nesting depth, the one its summaries imply; the
  tracker does not check this on the hot path (:meth:`ProgressTracker._check` does). A time
  too shallow for a ``leave`` raises from ``propagate`` and leaves the tracker inconsistent.
* ``leave`` maps a time to a *smaller* sort key (``(t, i, j) -> (t, i)``), so a location
  outside a loop may be visited again at a key below the one just popped. Around every cycle
  times still strictly grow, which is what termination relies on; the randomized model test
  (``tests/framework/test_progress.py``) checks nested loops against a from-scratch walk.

    >>> b = ProgressGraphBuilder()
    >>> src = b.add_node("input", inputs=0, outputs=1)
    >>> op = b.add_node("map", inputs=1, outputs=1)
    >>> b.add_edge((src, 0), (op, 0))
    >>> tracker = ProgressTracker(b.build())
    >>> tracker.update_source(src, 0, 0, +1)
    >>> tracker.propagate()
    [(1, 0, 0, 1)]
    >>> tracker.update_source(src, 0, 1, +1); tracker.update_source(src, 0, 0, -1)
    >>> tracker.propagate()
    [(1, 0, 0, -1), (1, 0, 1, 1)]
    >>> tracker.frontier(op, 0)
    Antichain([1])

The package, one job per module:

* :mod:`.graph`: :class:`Location`, :class:`ProgressGraphBuilder` and the validated
  :class:`ProgressGraph`;
* :mod:`.validation`: the cycle and nesting-depth checks run by
  :meth:`~ProgressGraphBuilder.build`;
* :mod:`.coords`: times as coordinate tuples and the counted-frontier rule;
* :mod:`.routes`: which locations keep implications and the arcs changes travel along;
* :mod:`.tracker`: :class:`ProgressTracker` and its :class:`ProgressStatistics`.
"""

from __future__ import annotations

from .graph import (
    GraphBuilder as GraphBuilder,
    Location as Location,
    ProgressGraph as ProgressGraph,
    ProgressGraphBuilder as ProgressGraphBuilder,
)
from .tracker import (
    ProgressStatistics as ProgressStatistics,
    ProgressTracker as ProgressTracker,
)

__all__ = [
    "GraphBuilder",
    "Location",
    "ProgressGraph",
    "ProgressGraphBuilder",
    "ProgressStatistics",
    "ProgressTracker",
]
