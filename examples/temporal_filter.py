"""Sliding time windows with ``temporal_filter`` and ``join_function``.

Sensors send readings ``(sensor, reading_id, valid_from)``; a reading fed at time ``t`` may
be scheduled for later (``valid_from >= t``). A reading counts during ``[valid_from,
valid_from + window)`` of *logical* time: ``temporal_filter(lower, upper)`` makes it appear
at ``valid_from`` and retracts it at ``valid_from + window`` by itself — nobody has to delete
old readings, the retraction is an update at a future time that waits until time gets there.
``count`` then gives the live readings per sensor.

A second output builds a window by hand with ``join_function``, the general linear operator
``temporal_filter`` is made of: ``logic(d)`` yields ``(d2, t2, r2)`` and the output is ``(d2,
join(t, t2), r * r2)``. Here each reading is listed as *expiring* during the last two time
units of its window.

Run: ``python examples/temporal_filter.py [--rounds 60] [--window 10] [--sensors 4]
[--per-round 3] [--workers 1] [--check]``.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import trio

import deltaflow as df

Reading = tuple[int, int, int]  # (sensor, reading_id, valid_from)


class Windows(df.Pipeline):
    """``per_sensor``: ``(sensor, live readings)``; ``expiring``: readings about to leave."""

    def __init__(self, window: int) -> None:
        if window < 2:
            msg = f"window must be at least 2 time units, not {window}"
            raise ValueError(msg)
        self.window = window

    def build(self, readings: df.Collection) -> dict[str, df.Collection]:
        w = self.window
        live = readings.temporal_filter(lambda r: r[2], lambda r: r[2] + w)
        per_sensor = live.map(lambda r: (r[0], r[1])).count()
        expiring = readings.join_function(lambda r: [(r, r[2] + w - 2, 1), (r, r[2] + w, -1)])
        return {"per_sensor": per_sensor, "expiring": expiring}


def generate(rounds: int, sensors: int, per_round: int, seed: int = 3) -> list[list[Reading]]:
    """``rounds`` lists of readings; those fed in round ``t`` become valid at ``t`` .. ``t+2``."""
    rng = np.random.default_rng(seed)
    who = rng.integers(0, sensors, size=(rounds, per_round)).tolist()
    delay = rng.integers(0, 3, size=(rounds, per_round)).tolist()
    out = []
    rid = 0
    for t in range(rounds):
        batch = []
        for s, d in zip(who[t], delay[t]):
            batch.append((s, rid, t + d))
            rid += 1
        out.append(batch)
    return out


def expected(
    rounds: list[list[Reading]], window: int, at: int
) -> tuple[dict[int, int], set[Reading]]:
    """The answer in plain Python at time ``at``: live readings per sensor, and expiring ones."""
    fed = [r for t, batch in enumerate(rounds) if t <= at for r in batch]
    live = Counter(s for s, _, v in fed if v <= at < v + window)
    expiring = {r for r in fed if r[2] + window - 2 <= at < r[2] + window}
    return dict(live), expiring


async def run(
    rounds: list[list[Reading]], window: int, workers: int, report_every: int
) -> tuple[dict[int, int], set[Reading]]:
    """Feed round ``t`` at time ``t``; return both outputs at the last time."""
    async with df.open(Windows(window), workers=workers) as job:
        handle = job.inputs["readings"]
        for t, batch in enumerate(rounds):
            handle.insert_many(batch)
            await job.advance_to(t + 1)
            if (t + 1) % report_every == 0:
                now = job.outputs["per_sensor"].at(t)
                live = dict(sorted(k for k, c in now.items() if c > 0))
                print(f"time {t:>3}: live readings per sensor {live}")
        last = len(rounds) - 1
        per_sensor = job.outputs["per_sensor"].at(last) if rounds else {}
        expiring = job.outputs["expiring"].at(last) if rounds else {}
    return (
        {s: n for (s, n), c in per_sensor.items() if c > 0},
        {r for r, c in expiring.items() if c > 0},
    )


def main(argv: list[str] | None = None) -> tuple[dict[int, int], set[Reading]]:
    """Parse the arguments, run, print the answer; returns ``(per_sensor, expiring)``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--window", type=int, default=10, help="time units (>= 2)")
    parser.add_argument("--sensors", type=int, default=4)
    parser.add_argument("--per-round", type=int, default=3, help="readings fed per round")
    parser.add_argument("--report-every", type=int, default=10, metavar="N")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    if args.window < 2:
        parser.error("--window must be at least 2")
    rounds = generate(args.rounds, args.sensors, args.per_round)
    per_sensor, expiring = trio.run(
        run, rounds, args.window, args.workers, max(1, args.report_every)
    )
    print("answer: live readings per sensor", dict(sorted(per_sensor.items())))
    print(f"expiring soon: {sorted(expiring)}")
    if args.check:
        ok = (per_sensor, expiring) == expected(rounds, args.window, len(rounds) - 1)
        print("check:", "ok" if ok else "MISMATCH")
    return per_sensor, expiring


if __name__ == "__main__":
    main()
