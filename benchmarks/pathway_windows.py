"""Pathway's ``windowby(sliding)`` on the events of ``bench_windows.py``, for comparison.

Pathway is not a dependency of deltaflow: run this with an interpreter that has it (a
virtualenv of its own, ``pip install pathway``). The events (``window_events.py``) enter
through a Python connector committing once per round of 1,000; the query counts events per
page in sliding windows of 10 minutes every minute, forgetting a window a minute after its
end (``common_behavior(cutoff=60, keep_results=False)``, Pathway's equivalent of
``retention=60``). Prints one JSON line: events/s from the first event to the end of the run,
and the resident memory at a quarter, half, three quarters and the end of the stream.

Run: ``/path/to/pathway-venv/bin/python benchmarks/pathway_windows.py [--events N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import pathway as pw
from window_events import HOP, RETENTION, SIZE, rounds


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


class Event(pw.Schema):
    page: int
    ts: int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    events = args.events
    n_rounds = events // 1_000
    marks = {n_rounds * k // 4 for k in (1, 2, 3, 4)}
    rss: list[float] = []
    started: list[float] = []

    class Stream(pw.io.python.ConnectorSubject):
        def run(self) -> None:
            started.append(time.perf_counter())
            for r, batch in enumerate(rounds(events)):
                for page, ts in batch:
                    self.next(page=page, ts=ts)
                self.commit()
                if r + 1 in marks:
                    rss.append(round(rss_mb(), 1))

    # At most two rounds read ahead of the engine: the memory measured is the engine's, not a
    # queue of events it has not taken yet.
    table = pw.io.python.read(
        Stream(), schema=Event, autocommit_duration_ms=None, max_backlog_size=2_000
    )
    counts = table.windowby(
        table.ts,
        window=pw.temporal.sliding(hop=HOP, duration=SIZE),
        instance=table.page,
        behavior=pw.temporal.common_behavior(cutoff=RETENTION, keep_results=False),
    ).reduce(pw.this._pw_instance, pw.this._pw_window_start, n=pw.reducers.count())
    changes = [0]

    def seen(**_kw: Any) -> None:
        changes[0] += 1

    pw.io.subscribe(counts, on_change=lambda key, row, time, is_addition: seen())
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    seconds = time.perf_counter() - started[0]
    print(
        json.dumps(
            {
                "figure": "windows.pathway",
                "events": events,
                "events_per_s": round(events / seconds),
                "seconds": round(seconds, 2),
                "rss_mb_quarters": rss,
                "output_changes": changes[0],
            }
        )
    )


if __name__ == "__main__":
    main()
