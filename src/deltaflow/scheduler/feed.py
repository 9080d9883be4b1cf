"""Feeding a job the updates ``run()`` was given, checked already: each input's updates at
their times, then the job closed and its outputs read (:func:`run_to_end`); with sources,
the other inputs first and the sources' batches after (:func:`feed_sources`).

Shared by ``run()`` in one process (:mod:`.runtime`) and a peer's run across processes
(:mod:`.net.peer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .job import Job

__all__ = ["feed_sources", "run_to_end"]


def _sorted_updates(updates: list[tuple[Any, Any, int]]) -> list[tuple[Any, Any, int]]:
    try:
        return sorted(updates, key=lambda u: (u[1], u[0]))
    except TypeError:
        return sorted(updates, key=lambda u: (u[1], type(u[0]).__name__, repr(u[0])))


async def run_to_end(
    job: Job, validated: dict[str, dict[int, tuple[list[Any], list[int]]]]
) -> dict[str, list[tuple[Any, Any, int]]]:
    """Feed inputs checked by :func:`~.validation.validate_updates`, close the job, and
    return every output's consolidated updates sorted by time."""
    for name, by_time in validated.items():
        handle = job.inputs[name]
        for time in sorted(by_time):
            data, diffs = by_time[time]
            handle.extend_checked(data, diffs, time)
    await job.close()
    return {name: _sorted_updates(out.updates()) for name, out in job.outputs.items()}


async def feed_sources(
    job: Job, validated: dict[str, dict[int, tuple[list[Any], list[int]]]], *, once: bool = True
) -> None:
    """Feed the other inputs' updates up to their last time, then every batch the sources
    hold now (not ``once``: until they end), one time each after those."""
    last = max((max(by_time) for by_time in validated.values() if by_time), default=-1)
    for name in list(validated):
        handle = job.inputs[name]
        for time, (data, diffs) in sorted(validated.pop(name).items()):
            handle.extend_checked(data, diffs, time)
    await job.advance_to(last + 1)
    await job.follow(once=once)
