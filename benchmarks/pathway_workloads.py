"""Pathway's W1, W2 and W3 on the data ``bench_pathway.py`` gives it, for comparison.

Pathway is not a dependency of deltaflow: this script runs with an interpreter that has it
(a virtualenv of its own); ``bench_pathway.py`` starts it, alternating with deltaflow's runs.
The data come in an ``.npz`` file written by ``bench_pathway.py`` from ``workloads.py``, so
both systems run exactly the same updates:

* W1, W2: ``items`` (records' keys, or edges) in the order they enter a FIFO window of
  ``window`` items: the first ``window`` at the load, then round ``t`` (from 1) inserts item
  ``window + t - 1`` and retracts item ``t - 1``. W2 has ``roots`` too.
* W3: ``edges`` and ``round`` (the round, from 1, each edge is inserted at).

Every item is a row whose primary key is its index, so a retraction removes exactly the row
its insertion made. The queries, one worker:

* W1: ``groupby(key).reduce(key, count)``;
* W2: ``pw.iterate`` from the roots' ``(root, root)`` pairs, each step the reach joined with
  the edges on the node, concatenated with the roots and made distinct (a ``groupby``);
* W3: edges joined with edges on ``b`` (2-paths ``a, b, c``), joined with edges on
  ``(a, c)`` (binary joins, no worst-case optimal join).

Modes (each prints one JSON line: seconds and the final answer, checked by the caller):

* ``interactive``: a Python connector feeding the load (one commit), then one commit per
  round, each waiting until the output is complete for it before the next is fed (the
  output's ``on_time_end``; a tick row, one per commit, joins the output through a
  ``concat`` so that every time has an output change and ends visibly). ``rounds_s`` is the
  wall time of the round loop; per-round latencies give ``p50_ms``/``p99_ms``.
* ``static``: every update known at once (``table_from_pandas`` with ``__time__`` and
  ``__diff__``: the load at one time, each round at its own later time), one ``pw.run``;
  ``--load-only`` runs the load alone (``total_s`` of both gives the rounds' share).
* ``streamed``: as ``interactive``, but the rounds are fed without waiting for their
  output (each commit still its own time; the engine may take several at once when it
  lags); ``rounds_s`` runs from the load complete to the engine stopped after the last.

Run: ``/path/to/pathway-venv/bin/python benchmarks/pathway_workloads.py DATA.npz
{w1,w2,w3} {interactive,streamed,static} [--load-only]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pathway as pw

DATA, TICK, ROOT = 0, 1, 2  # kinds of input rows
WAIT_S = 600  # a commit whose output never ends is an error, not a hang


class Row(pw.Schema):
    rid: int = pw.column_definition(primary_key=True)
    kind: int
    a: int
    b: int


# -- the queries ---------------------------------------------------------------------------
def count(items: pw.Table) -> pw.Table:
    return items.groupby(items.a).reduce(key=items.a, n=pw.reducers.count())


def reach(roots: pw.Table, edges: pw.Table) -> pw.Table:
    start = roots.select(root=roots.a, node=roots.a)

    def step(reach: pw.Table, start: pw.Table, edges: pw.Table) -> dict[str, pw.Table]:
        hop = reach.join(edges, reach.node == edges.a).select(root=reach.root, node=edges.b)
        both = pw.Table.concat_reindex(start, hop)
        return {"reach": both.groupby(both.root, both.node).reduce(both.root, both.node)}

    return pw.iterate(step, reach=pw.iterate_universe(start), start=start, edges=edges).reach


def triangles(edges: pw.Table) -> pw.Table:
    e2 = edges.copy()
    paths = edges.join(e2, edges.b == e2.a).select(a=edges.a, b=edges.b, c=e2.b)
    e3 = edges.copy()
    return paths.join(e3, paths.a == e3.a, paths.c == e3.b).select(paths.a, paths.b, paths.c)


def query(workload: str, rows: pw.Table) -> pw.Table:
    data = rows.filter(rows.kind == DATA)
    if workload == "w1":
        return count(data)
    if workload == "w2":
        return reach(rows.filter(rows.kind == ROOT), data)
    return triangles(data)


# -- answers -------------------------------------------------------------------------------
class Collect:
    """The output collection: each row's multiplicity after every change seen."""

    def __init__(self) -> None:
        self.rows: Counter[tuple[Any, ...]] = Counter()

    def __call__(self, key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        self.rows[tuple(row.values())] += 1 if is_addition else -1

    def final(self) -> list[tuple[Any, ...]]:
        bad = [(r, n) for r, n in self.rows.items() if n not in (0, 1)]
        if bad:
            raise AssertionError(f"output rows with multiplicity other than 0 or 1: {bad[:3]}")
        return [r for r, n in self.rows.items() if n == 1]


def answer(workload: str, rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """The same summary ``bench_workloads.py`` checks (ticks, with negative fields, left out)."""
    rows = [r for r in rows if min(r) >= 0]
    if workload == "w1":
        return {"keys": len(rows), "checksum": sum(k * n for k, n in rows)}
    if workload == "w2":
        return {"pairs": len(rows)}
    return {"triangles": len(rows)}


# -- the data as updates -------------------------------------------------------------------
def updates(workload: str, data: Any, load_only: bool) -> tuple[list[Any], list[list[Any]]]:
    """``(load, rounds)``: lists of ``(rid, kind, a, b, diff)``."""
    if workload == "w3":
        edges, at = data["edges"].tolist(), data["round"].tolist()
        n_rounds = 0 if load_only else max(at, default=0)
        rounds: list[list[Any]] = [[] for _ in range(n_rounds)]
        for rid, ((a, b), t) in enumerate(zip(edges, at)):
            if t <= n_rounds:
                rounds[t - 1].append((rid, DATA, a, b, 1))
        return [], rounds
    items = data["items"].tolist()
    window = int(data["window"])
    pair = (lambda x: (x, 0)) if workload == "w1" else (lambda x: tuple(x))
    load = [(i, DATA, *pair(items[i]), 1) for i in range(window)]
    if workload == "w2":
        base = len(items)
        load += [(base + i, ROOT, r, r, 1) for i, r in enumerate(data["roots"].tolist())]
    rounds = []
    for t in range(1, 0 if load_only else len(items) - window + 1):
        new, old = window + t - 1, t - 1
        rounds.append([(new, DATA, *pair(items[new]), 1), (old, DATA, *pair(items[old]), -1)])
    return load, rounds


# -- the two modes -------------------------------------------------------------------------
def static(workload: str, data: Any, load_only: bool) -> dict[str, Any]:
    load, rounds = updates(workload, data, load_only)
    rows = [(*u, 2) for u in load]
    rows += [(*u, 2 * (t + 1)) for t, batch in enumerate(rounds, start=1) for u in batch]
    frame = pd.DataFrame(rows, columns=["rid", "kind", "a", "b", "__diff__", "__time__"])
    if frame.empty:  # the load alone of W3: nothing at all, the engine's fixed cost
        frame = pd.DataFrame([(-1, TICK, -1, -1, 1, 2)], columns=frame.columns)
    table = pw.debug.table_from_pandas(frame, schema=Row)
    out = Collect()
    pw.io.subscribe(query(workload, table), on_change=out)
    start = time.perf_counter()
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    total = time.perf_counter() - start
    return {"rounds": len(rounds), "total_s": total, "answer": answer(workload, out.final())}


def interactive(workload: str, data: Any, wait: bool = True) -> dict[str, Any]:
    load, rounds = updates(workload, data, False)
    ended = threading.Semaphore(0)
    marks: dict[str, float] = {}
    lat: list[float] = []
    tick_base = 1 << 40

    class Feed(pw.io.python.ConnectorSubject):
        def _commit(self, batch: list[Any], t: int) -> None:
            # A tick row per commit: the output changes at every time (see the docstring).
            self.next(rid=tick_base + t, kind=TICK, a=-1, b=-1 - t % 2)
            if t:
                self.delete(rid=tick_base + t - 1, kind=TICK, a=-1, b=-1 - (t - 1) % 2)
            for rid, kind, a, b, diff in batch:
                if diff > 0:
                    self.next(rid=rid, kind=kind, a=a, b=b)
                else:
                    self.delete(rid=rid, kind=kind, a=a, b=b)
            self.commit()
            if (wait or not t) and not ended.acquire(timeout=WAIT_S):
                msg = f"no output for commit {t} after {WAIT_S} s"
                raise TimeoutError(msg)

        def run(self) -> None:
            marks["start"] = time.perf_counter()
            self._commit(load, 0)
            marks["loaded"] = time.perf_counter()
            for t, batch in enumerate(rounds, start=1):
                s = time.perf_counter()
                self._commit(batch, t)
                lat.append(time.perf_counter() - s)
            marks["end"] = time.perf_counter()

        @property
        def _deletions_enabled(self) -> bool:
            return True

    table = pw.io.python.read(Feed(), schema=Row, autocommit_duration_ms=None)
    result = query(workload, table)
    ticks = table.filter(table.kind == TICK)
    if workload == "w1":
        ticks = ticks.select(key=ticks.a, n=ticks.b)
    elif workload == "w2":
        ticks = ticks.select(root=ticks.a, node=ticks.b)
    else:
        ticks = ticks.select(a=ticks.a, b=ticks.b, c=ticks.b)
    out = Collect()
    pw.io.subscribe(
        pw.Table.concat_reindex(result, ticks),
        on_change=out,
        on_time_end=lambda _time: ended.release(),
    )
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    if not wait:  # the rounds are done when the engine has caught up and stopped
        marks["end"] = time.perf_counter()
    rounds_s = marks["end"] - marks["loaded"]
    return {
        "rounds": len(rounds),
        "load_s": marks["loaded"] - marks["start"],
        "rounds_s": rounds_s,
        "rounds_per_s": len(rounds) / rounds_s if rounds_s else None,
        "p50_ms": statistics.median(lat) * 1e3 if lat and wait else None,
        "p99_ms": sorted(lat)[int(0.99 * len(lat))] * 1e3 if lat and wait else None,
        "answer": answer(workload, out.final()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("workload", choices=["w1", "w2", "w3"])
    parser.add_argument("mode", choices=["interactive", "streamed", "static"])
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    with np.load(args.data) as data:
        if args.mode == "static":
            result = static(args.workload, data, args.load_only)
        else:
            result = interactive(args.workload, data, wait=args.mode == "interactive")
    print(json.dumps({"system": "pathway", "workload": args.workload, "mode": args.mode,
                      "load_only": args.load_only, **result}))  # fmt: skip


if __name__ == "__main__":
    main()
