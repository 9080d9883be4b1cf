"""The event stream of the window benchmarks (``bench_windows.py`` and
``pathway_windows.py``): numpy only, so that an interpreter without deltaflow can make it.

Events ``(page, ts)``: 100 pages, ``ts`` in seconds, in rounds of 1,000; round ``r`` holds
event times around ``6 r`` seconds, up to 30 s out of order, and one event in a thousand
300 s late.

    >>> first = next(rounds(1_000))
    >>> len(first), first[0]
    (1000, (6, -16))
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

PAGES = 100
ROUND = 1_000
SECONDS_PER_ROUND = 6
SIZE, HOP, RETENTION = 600, 60, 60
SEED = 34


def rounds(events: int, seed: int = SEED) -> Iterator[list[tuple[int, int]]]:
    """The stream, round by round: ``[(page, ts), ...]`` (deterministic)."""
    rng = np.random.default_rng(seed)
    for r in range(events // ROUND):
        pages = rng.integers(0, PAGES, ROUND)
        ts = SECONDS_PER_ROUND * r + rng.integers(0, SECONDS_PER_ROUND, ROUND)
        ts -= rng.integers(0, 31, ROUND)
        ts[rng.random(ROUND) < 0.001] -= 300
        yield list(zip(pages.tolist(), ts.tolist()))


def clock(seconds: int) -> int:
    """The logical time (round) of an event time."""
    return seconds // SECONDS_PER_ROUND
