"""Sliding-window counts over a stream of timestamped events (issue #34).

Events ``(page, ts)`` (100 pages, ``ts`` in seconds) arrive in rounds of 1,000, one round per
logical time; round ``r`` holds event times around ``6 r`` seconds, up to 30 s out of order,
and one event in a thousand 300 s late. The query counts events per page in sliding windows
of 10 minutes every minute (each event in 10 windows), closing a window once the stream is a
minute past its end (``retention=60``, ``clock = ts // 6``, the round of a second).

Three ways, each in a fresh process, printing events/s and the resident memory (RSS, current)
at a quarter, half, three quarters and the end of the stream:

* ``window``: ``events.window(df.sliding(600, 60), at=..., retention=60, clock=...)``;
* ``temporal_filter``: the same by hand as before windows existed: ``flat_map`` into windows
  then ``temporal_filter`` retracting each at its close (late events vanish unreported);
* ``unretained``: ``window`` without a retention, where every window stays (memory grows);
* ``watermark``: ``window`` closing on event time instead, ``watermark=90`` (a window is final
  once an event 90 s past its end was seen: the minute of ``retention=60`` plus the 30 s an
  event may be out of order; every event goes through one worker).

``--check`` compares the final collection of ``window`` and ``temporal_filter``. The same
events go through Pathway's ``windowby(sliding)`` with ``pathway_windows.py`` (run with an
interpreter that has Pathway; it is not a dependency of this project).

``--sessions`` prints instead what one change costs a key of 1,000 to 100,000 events in
sessions: the session operator (work for the sessions within ``gap`` of the change) beside
the same sessions as a reduction over the key's whole sorted history.

Run: ``python benchmarks/bench_windows.py [--quick] [--events N] [--only window,...]
[--check] [--sessions]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import trio
from window_events import HOP, RETENTION, ROUND, SIZE, clock, rounds

import deltaflow as df

WATERMARK = 90


def ts_of(event: tuple[int, int]) -> int:
    return event[1]


def per_page(window_event: Any) -> Any:
    (window, (page, _)) = window_event
    return ((window, page), ())


class Windowed(df.Pipeline):
    def __init__(self, retention: int | None, watermark: int | None = None) -> None:
        self.retention = retention
        self.watermark = watermark

    def build(self, events: df.Collection) -> df.Collection:
        kw: dict[str, Any] = {}
        if self.retention is not None:
            kw = {"retention": self.retention, "clock": clock}
        if self.watermark is not None:
            kw = {"watermark": self.watermark}
        w = events.window(df.sliding(SIZE, HOP), at=ts_of, **kw)
        return w.map(per_page).count()


def by_hand(event: tuple[int, int]) -> list[Any]:
    """The sliding windows holding an event, as one wrote them with ``flat_map``."""
    ts = event[1]
    last = ts - ts % HOP
    return [((s, s + SIZE), event) for s in range(last - SIZE + HOP, last + 1, HOP)]


class ByHand(df.Pipeline):
    def build(self, events: df.Collection) -> df.Collection:
        w = events.flat_map(by_hand).temporal_filter(
            lambda _we: 0, lambda we: clock(we[0][1] + RETENTION)
        )
        return w.map(per_page).count()


PIPELINES = {
    "window": lambda: Windowed(RETENTION),
    "temporal_filter": ByHand,
    "unretained": lambda: Windowed(None),
    "watermark": lambda: Windowed(None, watermark=WATERMARK),
}


class Sessions(df.Pipeline):
    """One key's sessions, by the session operator or as a reduction over the key's events."""

    def __init__(self, reduction: bool) -> None:
        self.reduction = reduction

    def build(self, events: df.Collection) -> df.Collection:
        if not self.reduction:
            return events.window(df.session(5), at=ts_of, key=lambda e: e[0])
        from deltaflow.operators.windows.sessions import session_logic

        pairs = events.map(lambda e: (e[0], (e[1], e)))
        return pairs.reduce(session_logic(5)).map(lambda kv: kv[1])


async def session_rounds(history: int, reduction: bool, changes: int = 200) -> dict[str, Any]:
    """Seconds per round adding one event to a key holding ``history`` events (in sessions of
    about ten): the work a change costs against the size of the key."""
    async with df.open(Sessions(reduction)) as job:
        feed = job.inputs["events"]
        feed.insert_many([(0, 20 * (i // 10) + i % 10) for i in range(history)])
        await job.advance_to(1)
        start = time.perf_counter()
        for r in range(changes):
            feed.insert((0, 20 * ((r * 7919) % (history // 10)) + 15))
            await job.advance_to(r + 2)
        per_round = (time.perf_counter() - start) / changes
    return {
        "figure": f"windows.sessions.{'reduce' if reduction else 'operator'}",
        "key_events": history,
        "ms_per_change": round(per_round * 1e3, 3),
    }


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def measure(mode: str, events: int) -> dict[str, Any]:
    n_rounds = events // ROUND
    marks = {n_rounds * k // 4 for k in (1, 2, 3, 4)}
    rss: list[float] = []
    async with df.open(PIPELINES[mode](), history=2) as job:
        feed = job.inputs["events"]
        start = time.perf_counter()
        for r, batch in enumerate(rounds(events)):
            feed.insert_many(batch)
            await job.advance_to(r + 1)
            if r + 1 in marks:
                rss.append(round(rss_mb(), 1))
        seconds = time.perf_counter() - start
        final = job.output.at(n_rounds - 1)
    late = sum(job.statistics()["late"].values())
    return {
        "figure": f"windows.{mode}",
        "events": events,
        "late": late,
        "events_per_s": round(events / seconds),
        "seconds": round(seconds, 2),
        "rss_mb_quarters": rss,
        "windows_open": len(final),
        # The final collection, as a digest that two modes can compare.
        "final": hashlib.sha256(repr(sorted(final.items())).encode()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 events")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--only", default="window,temporal_filter,unretained")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # one measurement, in this process
    parser.add_argument(
        "--sessions", action="store_true", help="the cost of a session change by key size"
    )
    args = parser.parse_args()
    events = 100_000 if args.quick else args.events
    if args.sessions:
        for history in (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000):
            for reduction in (False, True):
                print(json.dumps(trio.run(session_rounds, history, reduction)), flush=True)
        return
    if args.mode:
        print(json.dumps(trio.run(measure, args.mode, events)))
        return
    results = {}
    for mode in args.only.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--events", str(events)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[mode] = json.loads(out.stdout.splitlines()[-1])
        shown = {k: v for k, v in results[mode].items() if k != "final"}
        print(json.dumps(shown), flush=True)
    if args.check and {"window", "temporal_filter"} <= set(results):
        a, b = results["window"]["final"], results["temporal_filter"]["final"]
        ok = a == b
        print(json.dumps({"figure": "windows.check", "check": "ok" if ok else "MISMATCH"}))


if __name__ == "__main__":
    main()
