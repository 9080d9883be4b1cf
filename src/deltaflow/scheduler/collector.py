"""The cyclic garbage collector while jobs run: fewer passes over the operators' state.

CPython's cyclic collector makes a pass over its youngest generation every 700 net container
allocations, and every so often a full pass over every tracked object. Operators allocate
many small tuples per update and keep large histories of them, so with the default settings a
run spends a large share of its time in full passes that find nothing to free: deltaflow's
state holds no reference cycles.

So while at least one job runs, :func:`collector_tuned` raises the collector's first
threshold to :data:`GC_THRESHOLD` (never lowering it), and restores the thresholds it found
when the last job ends. Reference counting frees everything else at once, as always; only
cycles wait a little longer. ``df.open(..., gc_threshold=None)`` or ``df.run(...,
gc_threshold=None)`` leaves the collector alone; another number sets the threshold used.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> with collector_tuned(100_000):
    ...     gc.get_threshold()[0] >= 100_000
    True
    >>> gc.get_threshold() == before
    True
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

from ..framework.tuning import GC_THRESHOLD

__all__ = ["GC_THRESHOLD", "check_gc_threshold", "collector_paused", "collector_tuned"]

# Jobs running now (in any thread), and the thresholds found when the first of them started.
_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


def check_gc_threshold(threshold: object) -> int | None:
    """``threshold`` itself if it is a positive int or ``None``.

    Raises:
        ValueError: otherwise, naming the value.
    """
    if threshold is None:
        return None
    if isinstance(threshold, int) and threshold.__class__ is int and threshold >= 1:
        return threshold
    msg = f"gc_threshold must be a positive int or None, not {threshold!r}"
    raise ValueError(msg)


@contextlib.contextmanager
def collector_tuned(threshold: int | None = GC_THRESHOLD) -> Iterator[None]:
    """Raise the collector's first threshold to at least ``threshold`` inside the block.

    Blocks may nest or overlap (one per running job, in any thread): the thresholds found when
    the first one started come back when the last one ends. ``None`` changes nothing.

    Raises:
        ValueError: if ``threshold`` is not a positive int.
    """
    if check_gc_threshold(threshold) is None:
        yield
        return
    assert threshold is not None
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
        _active += 1
        first, second, third = gc.get_threshold()
        if first < threshold:
            gc.set_threshold(threshold, second, third)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


_paused = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside the block (a resumed job's state being built: millions of
    containers, no cycle among them, which every collection would walk again as they grow).

    Blocks may nest or overlap, in any thread: the collector runs again (if it ran before the
    first) when the last one ends.
    """
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
