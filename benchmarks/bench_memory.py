"""Memory per stored update of integer data, in each of today's layouts (issue #35).

``n`` updates ``(key, val, time, diff)`` of ints: keys uniform in ``0..n/10`` (ten updates a
key), values uniform in ``0..2**31`` (ints Python does not cache), times uniform in
``0..n/100`` (a hundred updates a time), diffs 1. The bytes each layout holds once built
(``tracemalloc``: what is allocated and still referenced after the build, its temporaries
freed, numpy's buffers included), per update, at 1,000 to 1,000,000 updates:

* ``rows``: a list of ``(key, val, time, diff)`` tuples, as updates travel between operators;
* ``list_batch``: a :class:`~deltaflow.framework.trace.Batch` on the list layout (four Python
  lists; ``force_objects=True``), what a small batch, or one of data that cannot be encoded,
  holds;
* ``columns_batch``: the same updates as a batch of ``int64`` columns (numpy; 32 bytes an
  update of raw data), the layout of large batches of ints;
* ``spine``: a trace (:class:`~deltaflow.framework.trace.Spine`) fed the updates in batches
  of 1,000 (each with its own 10 times, a reader holding compaction at the start so nothing
  cancels), merges finished: what an arrangement holds, in the layouts it picks itself.

``--product`` also gives the times inside ``iterate``: ``Product(round, iteration)`` times (a
hundred rounds, twenty iterations, each distinct time one shared object), in ``rows``,
``list_batch`` and the encoded batch (``columns_batch``: code columns).

Prints one JSON line per figure ``memory.<layout>`` with ``bytes_per_update`` at each size and
the build's peak per update.

Run: ``python benchmarks/bench_memory.py [--quick] [--product]``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product
from deltaflow.framework.trace import Batch, Description, Spine

SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
SPINE_BATCH = 1_000

Columns = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]


def data(n: int, seed: int = 35) -> Columns:
    """Keys, values and times (``int64``) of ``n`` updates (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, max(n // 10, 1), n)
    vals = rng.integers(0, 2**31, n)
    times = np.sort(rng.integers(0, max(n // 100, 1), n))
    return keys, vals, times


def held(build: Callable[[], Any]) -> tuple[int, int]:
    """Bytes ``build()``'s result holds, and the peak of the build, both over what was
    allocated before (``tracemalloc``)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return now - before, peak - before


def _description(times: Any) -> Description:
    return Description(Antichain([0]), Antichain([int(max(times)) + 1]))


def _products(times: np.ndarray[Any, Any]) -> list[Product]:
    """``Product(round, iteration)`` times, one object per distinct time."""
    pool: dict[int, Product] = {}
    out = []
    for t in times.tolist():
        p = pool.get(t)
        if p is None:
            p = pool[t] = Product(t // 20, t % 20)
        out.append(p)
    return out


def layouts(product: bool) -> dict[str, Callable[[Columns], Any]]:
    """Each layout's build, from the ``int64`` columns of the updates."""

    def times_of(t: np.ndarray[Any, Any]) -> list[Any]:
        return _products(t) if product else t.tolist()

    def rows(c: Columns) -> Any:
        k, v, t = c
        return list(zip(k.tolist(), v.tolist(), times_of(t), [1] * len(k)))

    def list_batch(c: Columns) -> Any:
        k, v, t = c
        tt = times_of(t)
        return Batch.from_columns(
            k.tolist(), v.tolist(), tt, [1] * len(k), _description_of(tt), force_objects=True
        )

    def columns_batch(c: Columns) -> Any:
        k, v, t = c
        diffs = np.ones(len(k), dtype=np.int64)
        if product:
            tt = _products(t)
            return Batch.from_columns(k.tolist(), v.tolist(), tt, diffs, _description_of(tt))
        return Batch.from_columns(k, v, t, diffs, _description(t))

    def spine(c: Columns) -> Any:
        k, v, _ = c
        trace = Spine(Antichain([0]))
        reader = trace.reader()  # holds compaction at 0: every update is kept
        ones = np.ones(SPINE_BATCH, dtype=np.int64)
        for i, lo in enumerate(range(0, len(k), SPINE_BATCH)):
            hi = lo + SPINE_BATCH
            times = (np.arange(hi - lo) % 10) + 10 * i
            desc = Description(Antichain([10 * i]), Antichain([10 * (i + 1)]))
            trace.insert(Batch.from_columns(k[lo:hi], v[lo:hi], times, ones[: hi - lo], desc))
        while trace.merging:
            trace.exert(1_000_000)
        return trace, reader

    built: dict[str, Callable[[Columns], Any]] = {
        "rows": rows,
        "list_batch": list_batch,
        "columns_batch": columns_batch,
    }
    if not product:
        built["spine"] = spine
    return built


def _description_of(times: list[Any]) -> Description:
    if times and isinstance(times[0], Product):
        return Description(
            Antichain([Product(0, 0)]), Antichain([Product(max(times).outer + 1, 0)])
        )
    return _description(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="up to 100,000 updates")
    parser.add_argument("--product", action="store_true", help="Product times too")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    for product in (False, True) if args.product else (False,):
        for name, build in layouts(product).items():
            per: dict[str, float] = {}
            peak: dict[str, float] = {}
            for n in sizes:
                cols = data(n)
                kept, top = held(functools.partial(build, cols))
                per[str(n)] = round(kept / n, 1)
                peak[str(n)] = round(top / n, 1)
            record = {
                "figure": f"memory.{name}",
                "times": "Product(int, int)" if product else "int",
                "bytes_per_update": per,
                "build_peak_bytes_per_update": peak,
            }
            print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
