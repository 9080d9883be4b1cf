"""Arrangement storage: batches, descriptions, resumable merges, spines (and their readers'
holds, :mod:`.holds`) and cursors.

A *trace* stores a collection's history of ``(key, val, time, diff)`` updates so that operators
can look up a key's updates and accumulate them at any time. deltaflow's trace is a
:class:`Spine`: a log-structured chain of immutable, sorted, consolidated :class:`Batch` es (each
with a :class:`Description` of the times it covers), merged geometrically by resumable
:class:`Merger` s that compact times with ``advance_by`` against the readers' compaction
frontiers, so cancelled history disappears and reading stays fast however long a computation
runs. Several operators share one spine through :class:`TraceReader` handles; a :class:`Cursor`
walks the merged view ``key -> val -> history``.

This package is pure data structures: no scheduling, no I/O.

    >>> from deltaflow.framework.antichain import Antichain
    >>> spine = Spine(Antichain([0]))
    >>> d = Description(Antichain([0]), Antichain([1]))
    >>> spine.insert(Batch.from_updates([("a", 1, 0, 1)], d))
    >>> spine.lookup("a")
    [(1, 0, 1)]
"""

from __future__ import annotations

from .batch import Batch as Batch, Update as Update
from .cursor import Cursor as Cursor
from .description import Description as Description
from .merger import Merger as Merger, merge_batches as merge_batches
from .spine import Spine as Spine, TraceReader as TraceReader, TraceStatistics as TraceStatistics

__all__ = [
    "Batch",
    "Cursor",
    "Description",
    "Merger",
    "Spine",
    "TraceReader",
    "TraceStatistics",
    "Update",
    "merge_batches",
]
