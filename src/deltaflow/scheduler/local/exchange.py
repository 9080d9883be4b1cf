"""The exchange: an update batch cut into one part per worker that owns its keys.

An exchange edge sends each update to the worker owning ``key(datum)``
(:func:`~deltaflow.framework.hashing.worker_of`). :func:`split` does it for a whole message,
an :class:`~deltaflow.operators.base.UpdateBatch` or a many-times
:class:`~deltaflow.operators.base.RunsBatch`, in order, each part keeping its runs.

The keys of a batch are read in one pass: a datum that is its own key is not read at all, a
``(key, value)`` pair's key (:func:`~deltaflow.operators.dataflow.pair_key`) is taken by
``itemgetter`` once every datum is known to be a pair, anything else by calling the key.
Keys that are int columns (:func:`~deltaflow.framework.hashing.owner_column`) are owned in
numpy, and the parts then cut from the owner column at once: how many updates each run
gives each worker is one ``bincount``, each part's data one ``compress``. Few or other keys
go one by one.

    >>> from deltaflow.operators.base import RunsBatch
    >>> runs = RunsBatch([1, 2], [2, 1], [(4, "a"), (5, "b"), (6, "c")], [1, 1, -1])
    >>> for w, part in split(runs, pair_key, 2):
    ...     print(w, part)
    0 RunsBatch(times=[1, 2], lengths=[1, 1], data=[(4, 'a'), (6, 'c')], diffs=[1, -1])
    1 RunsBatch(times=[1], lengths=[1], data=[(5, 'b')], diffs=[1])
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

import numpy as np

from ...framework.hashing import COLUMNS_FROM, SELF_HASHED_BELOW, owner_column, stable_hash
from ...operators.base import RunsBatch, UpdateBatch
from ...operators.dataflow import identity_key, pair_key

__all__ = ["split"]

_TUPLE = {tuple}
_TWO = {2}
_key_of_pair = itemgetter(0)


def keys_of(data: list[Any], key: Callable[[Any], Hashable]) -> Sequence[Hashable]:
    """``key(datum)`` for every datum, in order (the data itself for :func:`identity_key`).

    >>> keys_of([(1, "a"), (2, "b")], pair_key)
    [1, 2]
    """
    if key is identity_key:
        return data
    if key is pair_key and set(map(type, data)) == _TUPLE and set(map(len, data)) == _TWO:
        return list(map(_key_of_pair, data))
    return list(map(key, data))  # (``pair_key`` names a datum that is not a pair)


def split(payload: Any, key: Callable[[Any], Hashable], peers: int) -> list[tuple[int, Any]]:
    """``payload``'s updates by the worker that owns ``key(datum)``, in order; each part with
    its worker (a part keeps its sender's word that it is consolidated; a
    :class:`~deltaflow.operators.base.RunsBatch`'s parts keep their runs, empty ones dropped).

    Raises:
        TypeError: ``payload`` is not an update batch.
    """
    runs = payload.__class__ is RunsBatch
    if not runs and not isinstance(payload, UpdateBatch):
        msg = f"only update batches can be exchanged between workers, not {type(payload)!r}"
        raise TypeError(msg)
    data = payload.data
    if not data:
        return []
    keys = keys_of(data, key)
    column = owner_column(keys, peers) if len(keys) >= COLUMNS_FROM else None
    if column is not None:
        return _split_column(payload, column, peers)
    h = stable_hash
    below = SELF_HASHED_BELOW
    # ``worker_of``, inlined: small non-negative ints are their own hash.
    owner = [(k if k.__class__ is int and 0 <= k < below else h(k)) % peers for k in keys]
    first = owner[0]
    if owner.count(first) == len(owner):
        return [(first, payload)]
    parts = []
    for w in range(peers):
        mask = [o == w for o in owner]
        if any(mask):
            parts.append((w, _part(payload, mask, None)))
    return parts


def _split_column(payload: Any, owner: np.ndarray[Any, Any], peers: int) -> list[tuple[int, Any]]:
    """:func:`split` with the owners as a numpy column: per worker one mask, and the runs'
    lengths of every part from one ``bincount`` of ``(worker, run)`` pairs."""
    counts = np.bincount(owner, minlength=peers)
    if counts.max() == len(owner):
        return [(int(owner[0]), payload)]
    per_run = None
    if payload.__class__ is RunsBatch:
        lengths = payload.lengths
        n_runs = len(lengths)
        run_of = np.repeat(np.arange(n_runs, dtype=np.int64), lengths)
        per_run = np.bincount(owner * n_runs + run_of, minlength=peers * n_runs).reshape(
            peers, n_runs
        )
    parts = []
    for w in np.flatnonzero(counts).tolist():
        mask = (owner == w).tolist()
        parts.append((w, _part(payload, mask, None if per_run is None else per_run[w])))
    return parts


def _part(payload: Any, mask: list[bool], lengths: np.ndarray[Any, Any] | None) -> Any:
    """The updates of ``payload`` where ``mask`` is true; a RunsBatch's runs' lengths in the
    part given (``lengths``, one per run) or counted from the mask."""
    if payload.__class__ is not RunsBatch:
        data = list(compress(payload.data, mask))
        return UpdateBatch(data, list(compress(payload.diffs, mask)), payload.consolidated)
    if lengths is None:
        return payload.take(mask)
    kept = lengths.tolist()
    return RunsBatch(
        [t for t, n in zip(payload.times, kept) if n],
        [n for n in kept if n],
        list(compress(payload.data, mask)),
        list(compress(payload.diffs, mask)),
        payload.consolidated,
    )
