"""Keys off a chain: the general interesting-times search, then one accumulation per time.

For a key whose times do not lie on one line or row (:mod:`.chains`), the interesting times
come from :func:`.interesting_times.interesting_times` over its seeds (new and pending times)
and the times of its input *and output* histories (the output's because compaction may cancel
input updates the output has not caught up with yet: then only the output history still shows
where the key changed). Each ready time, in a linear extension of the partial order, is
corrected against the output accumulated there plus this round's earlier corrections below
it; every deferred time stays pending until the frontier passes it.

Counting reductions on ``Product(int, int)`` times sum ints instead of accumulating
(:func:`.counting.count_pairs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import less_equal

from .accumulation import accumulate, add_into, add_rows
from .counting import count_pairs
from .interesting_times import SEARCH, InterestingTimes

if TYPE_CHECKING:
    from deltaflow.framework.lattice import Time

    from .operator import ReduceOperator

__all__ = ["general"]


def _stored_times(
    history: list[tuple[Any, Any, int]], output_history: list[tuple[Any, Any, int]] | None
) -> list[Any]:
    """The times of a key's input and output histories: where its output may need correcting
    once a seed below them changes it (the output's own times, because compaction may cancel
    input updates the output has not caught up with yet)."""
    times = [t for _, t, _ in history]
    if output_history:
        times.extend([t for _, t, _ in output_history])
    return times


def general(
    op: ReduceOperator,
    key: Any,
    times: list[Time],
    history: list[tuple[Any, Time, int]],
    output_history: list[tuple[Any, Time, int]],
    upper: Antichain,
    corrections: dict[Time, list[tuple[Any, Any, int]]],
    search: InterestingTimes = SEARCH,
) -> None:
    """Correct one key by the general interesting-times search (any partial order);
    ``search``'s ``line_fast_path`` also picks the accumulation's one-line sweep."""
    domain = op.domain
    ready, deferred = search.search(times, _stored_times(history, output_history), upper, domain)
    if deferred:
        op.defer(key, deferred)
    if not ready:
        return
    if op.by_count is not None and domain.pairs:
        count_pairs(op.by_count, key, ready, history, output_history, corrections)
        return
    lines = search.line_fast_path
    inputs = accumulate(history, ready, lines=lines, domain=domain)
    outputs = accumulate(output_history, ready, lines=lines, domain=domain)
    correct = op.correction
    made: list[tuple[Time, dict[Any, int]]] = []
    for t, acc, current in zip(ready, inputs, outputs):
        for tm, made_fix in made:
            if less_equal(tm, t):
                add_into(current, made_fix)
        fix = correct(key, acc, current)
        if fix:
            made.append((t, fix))
            add_rows(corrections, t, key, fix)
