"""Benchmark: interesting times and accumulation for one key's reduction.

Prints one JSON line per figure:

* ``lines`` - times on a few lines (seeds on odd lines, stored times on even lines, random
  gaps), so the answer is linear in the input. Timed at ``n`` and ``10 n`` times; the
  ``lines_ratio`` line gives time(10 n) / time(n), which should stay <= 12 (linear-ish).
  The timing runs with the garbage collector set as a running job sets it
  (:func:`deltaflow.scheduler.collector.collector_tuned`), since that is where the function
  runs: with the interpreter's default thresholds, collections triggered by the larger size's
  allocations add a share that grows faster than the work (``ratio_default_gc`` shows it).
  Variants: ``sweep`` (``Product(int, int)``, the default path), ``fold`` (the same times
  through the general chain fold) and ``nested`` (``Product(Product(int, int), int)`` times,
  which always take the chain fold). At the small size, pairwise joining is timed alongside.
* ``lines_seed_example`` - the seed's example: stored ``(0, 0..n)``, seeds ``(1, 0..n)``.
* ``grid`` - seeds on one axis, stored times on the other: a quadratic answer, for reference,
  with the chain fold and plain pairwise joining alongside.
* ``accumulate`` - accumulating a history at the ready times of the ``lines`` case, with a
  brute-force scan alongside at the small size.

Run: ``python benchmarks/bench_interesting_times.py``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, less_equal
from deltaflow.operators.reduce.accumulation import accumulate
from deltaflow.operators.reduce.interesting_times import (
    SEARCH,
    InterestingTimes,
    interesting_times,
)
from deltaflow.scheduler.collector import collector_tuned

REPEATS = 5


def best_of(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    """Smallest wall time over ``repeats`` runs, and the last result."""
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def lines_case(
    n: int, lines: int = 5, seed: int = 1, nested: bool = False
) -> tuple[list[Time], list[Time], Antichain]:
    """n times spread over ``lines`` lines with random gaps; seeds on the odd lines.

    With ``nested`` the times are ``Product(Product(line, j), 0)`` (a loop inside a loop).
    """
    rng = random.Random(seed)
    span = 2 * n
    seeds: list[Time] = []
    stored: list[Time] = []
    per_line = n // lines

    def make(line: int, j: int) -> Time:
        return Product(Product(line, j), 0) if nested else Product(line, j)

    for line in range(lines):
        inners = rng.sample(range(span), per_line)
        target = seeds if line % 2 else stored
        target.extend(make(line, j) for j in inners)
    upper = Antichain([make(lines - 1, span // 2)])
    return seeds, stored, upper


FOLD = InterestingTimes(pair_sweep=False)
"""The search without the pair sweep: the general chain fold."""
PAIRWISE = InterestingTimes(pair_sweep=False, pairwise_below=1 << 62, short_chain=1 << 62)
"""The search joining every time pairwise, without chain crossing either."""


def _best_times(
    cases: dict[int, tuple[list[Time], list[Time], Antichain]],
    repeats: int,
    search: InterestingTimes = SEARCH,
) -> tuple[dict[int, float], dict[int, Any]]:
    """Each case's best time over ``repeats`` rounds, the sizes timed alternately so that a
    burst of load on the machine cannot land on one size only; and each case's answer."""
    best = dict.fromkeys(cases, float("inf"))
    answers: dict[int, Any] = {}
    for _ in range(repeats):
        for n, case in cases.items():
            secs, answers[n] = best_of(partial(search.search, *case), 1)
            best[n] = min(best[n], secs)
    return best, answers


def bench_lines(small: int, variant: str, repeats: int = 25) -> None:
    """``variant``: "sweep" (pairs, default path), "fold" (pairs, chain fold), "nested"."""
    sizes = (small, 10 * small)
    cases = {n: lines_case(n, nested=variant == "nested") for n in sizes}
    search = FOLD if variant == "fold" else SEARCH
    with collector_tuned():
        best, answers = _best_times(cases, repeats, search)
    default_gc, _ = _best_times(cases, repeats, search)
    for n in sizes:
        ready, deferred = answers[n]
        fields: dict[str, Any] = {
            "figure": "lines",
            "variant": variant,
            "n": n,
            "seconds": round(best[n], 6),
            "seconds_default_gc": round(default_gc[n], 6),
            "ready": len(ready),
            "deferred": len(deferred),
        }
        if n == small:
            p_secs, expected = best_of(partial(PAIRWISE.search, *cases[n]), 1)
            assert expected == (ready, deferred)
            fields["pairwise_seconds"] = round(p_secs, 6)
        emit(**fields)
    ratio = best[10 * small] / best[small]
    emit(
        figure="lines_ratio",
        variant=variant,
        n=small,
        ratio=round(ratio, 2),
        ratio_default_gc=round(default_gc[10 * small] / default_gc[small], 2),
        target=12,
        ok=ratio <= 12,
    )


def bench_seed_example(n: int) -> None:
    rng = random.Random(2)
    stored: list[Time] = [Product(0, j) for j in range(n) if rng.random() < 0.9]
    seeds: list[Time] = [Product(1, j) for j in range(n) if rng.random() < 0.9]
    upper = Antichain([Product(1, n // 2)])
    secs, (ready, deferred) = best_of(partial(interesting_times, seeds, stored, upper))
    emit(
        figure="lines_seed_example", n=n, seconds=round(secs, 6), output=len(ready) + len(deferred)
    )


def bench_grid(side: int) -> None:
    seeds: list[Time] = [Product(i, 0) for i in range(side)]
    stored: list[Time] = [Product(0, j) for j in range(side)]
    upper = Antichain([Product(side // 2, side // 2)])
    secs, (ready, deferred) = best_of(partial(interesting_times, seeds, stored, upper), 3)
    f_secs, folded = best_of(partial(FOLD.search, seeds, stored, upper), 3)
    p_secs, expected = best_of(partial(PAIRWISE.search, seeds, stored, upper), 2)
    assert folded == expected == (ready, deferred)
    emit(
        figure="grid",
        side=side,
        output=len(ready) + len(deferred),
        seconds=round(secs, 6),
        fold_seconds=round(f_secs, 6),
        pairwise_seconds=round(p_secs, 6),
    )


def bench_accumulate(small: int) -> None:
    for n in (small, 10 * small):
        seeds, stored, upper = lines_case(n, seed=3)
        rng = random.Random(4)
        history = [(rng.randrange(50), t, rng.choice((1, -1))) for t in seeds + stored]
        ready, deferred = interesting_times(seeds, stored, upper)
        times = ready + deferred
        secs, result = best_of(partial(accumulate, history, times), 3)
        fields: dict[str, Any] = {
            "figure": "accumulate",
            "history": len(history),
            "times": len(times),
            "output_entries": sum(len(d) for d in result),
            "seconds": round(secs, 6),
        }
        if n == small:

            def brute(
                history: list[tuple[int, Time, int]] = history, times: list[Time] = times
            ) -> list[dict[Any, int]]:
                out = []
                for t in times:
                    acc: dict[Any, int] = {}
                    for v, u, d in history:
                        if less_equal(u, t):
                            acc[v] = acc.get(v, 0) + d
                    out.append({v: c for v, c in acc.items() if c})
                return out

            b_secs, expected = best_of(brute, 1)
            assert expected == result
            fields["brute_seconds"] = round(b_secs, 6)
        emit(**fields)
    ints = [(random.Random(5).randrange(50), i, 1) for i in range(20 * small)]
    secs, _ = best_of(lambda: accumulate(ints, list(range(0, 20 * small, 2))), 3)
    emit(figure="accumulate_int", history=len(ints), times=10 * small, seconds=round(secs, 6))


def main() -> None:
    for variant in ("sweep", "fold", "nested"):
        bench_lines(200, variant)
    bench_lines(2000, "sweep")
    bench_seed_example(2000)
    bench_grid(30)
    bench_grid(100)
    bench_accumulate(200)


if __name__ == "__main__":
    main()
