"""Linear operators: each output update depends on one input update, so no state is kept.

``map``, ``filter``, ``flat_map``, ``explode``, ``negate``, ``inspect`` and the general
``join_function`` are *steps* of a :class:`LinearOperator`. A chain of them with nothing in
between that needs its own actor (a second consumer, an exchange, a stateful operator) is fused
into one actor when the dataflow is instantiated: a batch crosses the whole chain in one
activation, paying one Python call per record per step and nothing else.

``join_function(logic)`` is the general form (``logic(data)`` yields ``(data2, time2, diff2)``;
the output is ``(data2, join(time, time2), diff * diff2)``): the output time only ever moves
forward, so the operator needs no capability of its own. Temporal filters are built on it
(:func:`temporal_filter_logic`).

:class:`Concat` merges several inputs; :class:`Consolidate` sums equal updates of a time once
the time is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import OperatorError
from ..framework.lattice import join
from .base import Interest, Operator, RunsBatch, UpdateBatch, describe_callable, sum_diffs
from .durable import StateSink, StateSource
from .pending import Pending
from .values import as_count

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from .base import Capability, OperatorContext

__all__ = [
    "Concat",
    "Consolidate",
    "Exchange",
    "LinearOperator",
    "Step",
    "consolidate_columns",
    "temporal_filter_logic",
]

Groups = list[tuple[Any, list[Any], list[int]]]


@attrs.frozen
class Step:
    """One linear transformation: ``kind`` is map, filter, flat_map, explode, negate, inspect,
    join_function or groups (``fn`` maps whole ``(time, data, diffs)`` groups); ``fn`` the
    user's function (None for negate); ``name`` what errors call the step when ``fn`` is not
    the user's own (``temporal_filter``'s logic, a window's placement)."""

    kind: str
    fn: Callable[..., Any] | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        """The step as shown in errors: ``map(module.func:line)``."""
        if self.name is not None:
            return self.name
        if self.fn is None:
            return self.kind
        return f"{self.kind}({describe_callable(self.fn)})"


def _apply_step(step: Step, groups: Groups) -> Groups:
    kind, fn = step.kind, step.fn
    out: Groups = []
    if kind == "map":
        for t, data, diffs in groups:
            out.append((t, list(map(fn, data)), diffs))  # type: ignore[arg-type]
    elif kind == "filter":
        for t, data, diffs in groups:
            mask = list(map(fn, data))  # type: ignore[arg-type]
            kept = list(compress(data, mask))
            if len(kept) == len(data):
                out.append((t, data, diffs))
            elif kept:
                out.append((t, kept, list(compress(diffs, mask))))
    elif kind == "negate":
        for t, data, diffs in groups:
            out.append((t, data, [-r for r in diffs]))
    elif kind == "flat_map":
        for t, data, diffs in groups:
            nd: list[Any] = []
            nr: list[int] = []
            for d, r in zip(data, diffs):
                for x in fn(d):  # type: ignore[misc]
                    nd.append(x)
                    nr.append(r)
            if nd:
                out.append((t, nd, nr))
    elif kind == "explode":
        for t, data, diffs in groups:
            nd = []
            nr = []
            for d, r in zip(data, diffs):
                for x, r2 in fn(d):  # type: ignore[misc]
                    if r2.__class__ is not int:
                        c = as_count(r2)  # numpy integers count, as they do in inputs
                        if c is None:
                            msg = f"explode: fn({d!r}) gave diff {r2!r} for {x!r}; diffs are ints"
                            raise TypeError(msg)
                        r2 = c
                    nd.append(x)
                    nr.append(r * r2)
            if nd:
                out.append((t, nd, nr))
    elif kind == "inspect":
        for t, data, diffs in groups:
            for d, r in zip(data, diffs):
                fn((d, t, r))  # type: ignore[misc]
            out.append((t, data, diffs))
    elif kind == "groups":
        # A step that needs each update's time (windows with a retention): fn maps the
        # (time, data, diffs) groups to new ones, at the same or later times.
        out = fn(groups)  # type: ignore[misc]
    elif kind == "join_function":
        by_time: dict[Any, tuple[list[Any], list[int]]] = {}
        for t, data, diffs in groups:
            for d, r in zip(data, diffs):
                for d2, t2, r2 in fn(d):  # type: ignore[misc]
                    if r2.__class__ is not int or t2.__class__ is not t.__class__:
                        t2, r2 = _join_function_ints(step, d, t, (d2, t2, r2))
                    t3 = join(t, t2)
                    slot = by_time.get(t3)
                    if slot is None:
                        slot = by_time[t3] = ([], [])
                    slot[0].append(d2)
                    slot[1].append(r * r2)
        out = [(t, d, r) for t, (d, r) in by_time.items()]
    else:  # pragma: no cover - construction validates kinds
        msg = f"unknown linear step {kind!r}"
        raise ValueError(msg)
    return out


def _join_function_ints(step: Step, d: Any, t: Time, out: tuple[Any, Any, Any]) -> tuple[Any, int]:
    """``out``'s time and diff with numpy integers as ints, or a TypeError naming them."""
    _, t2, r2 = out
    what = f"{step.label}: for {d!r} it gave {out!r}"
    r = as_count(r2)
    if r is None:
        msg = f"{what}; diffs are ints"
        raise TypeError(msg)
    if t2.__class__ is not t.__class__:
        t2 = as_count(t2) if t.__class__ is int else None
        if t2 is None:
            msg = f"{what}; times here are {t.__class__.__name__}s, like the input's {t!r}"
            raise TypeError(msg)
    return t2, r


_IN_PLACE = frozenset({"map", "negate"})


class LinearOperator(Operator):
    """A fused chain of linear steps (one input, one output, no state).

    >>> op = LinearOperator([Step("map", lambda x: x + 1), Step("filter", lambda x: x % 2)])
    >>> op.apply(0, [1, 2, 3], [1, 1, 1])
    [(0, [3], [1])]
    """

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False
    reads_runs = True

    def __init__(self, steps: Sequence[Step], name: str | None = None) -> None:
        self.steps = list(steps)
        self.name = name or " -> ".join(s.label for s in self.steps)
        #: Every step makes one datum of each, in place, at its time.
        self.keeps_places = all(s.kind in _IN_PLACE for s in self.steps)

    def apply(self, time: Time, data: list[Any], diffs: list[int]) -> Groups:
        """Run every step on one batch; returns ``(time, data, diffs)`` groups."""
        groups: Groups = [(time, data, diffs)]
        for step in self.steps:
            try:
                groups = _apply_step(step, groups)
            except Exception as exc:
                raise OperatorError.of(step.label, exc) from exc
            if not groups:
                break
        return groups

    def transform(self, messages: list[tuple[Time, Any]]) -> list[tuple[Time, Any]]:
        """Every step on every ``(time, UpdateBatch)`` message; the non-empty results.

        A :class:`~.base.RunsBatch` (several times in one message) goes through steps that
        keep each datum's place (``map``, ``negate``) once, whole, and stays one; through
        any other step, one run at a time."""
        apply = self.apply
        out: list[tuple[Time, Any]] = []
        for time, batch in messages:
            if batch.__class__ is RunsBatch:
                if self.keeps_places:
                    ((_, data, diffs),) = apply(time, batch.data, batch.diffs)
                    out.append((time, RunsBatch(batch.times, batch.lengths, data, diffs)))
                    continue
                out.extend(self.transform(batch.per_time()))
                continue
            for t, data, diffs in apply(time, batch.data, batch.diffs):
                if data:
                    out.append((t, UpdateBatch(data, diffs)))
        return out

    def schedule(self, ctx: OperatorContext) -> None:
        """Transform every waiting batch and send the results."""
        send = ctx.send
        for t, batch in self.transform(ctx.messages(0)):
            send(0, t, batch)


class Concat(Operator):
    """Forward every input's batches to the single output (multiset union)."""

    name = "concat"
    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False
    reads_runs = True

    def __init__(self, inputs: int) -> None:
        self.inputs = inputs

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward what arrived."""
        for port in range(self.inputs):
            for time, batch in ctx.messages(port):
                ctx.send(0, time, batch)


class Exchange(Operator):
    """Forward every batch: the routing to workers happens on the edge into this operator.

    On a single worker nothing is routed, so the key is called here on every datum instead:
    a key that fails (or data it cannot key) fails on any worker count, named as this operator.
    """

    interest = Interest.NEVER
    stateless = True
    reads_frontiers = False
    reads_runs = True

    def __init__(self, key: Callable[[Any], Any] | None, name: str = "exchange") -> None:
        self.key = key
        self.name = name

    def schedule(self, ctx: OperatorContext) -> None:
        """Forward what arrived (keying it first on a single worker)."""
        key = self.key if ctx.peers == 1 else None
        for time, batch in ctx.messages(0):
            if key is not None:
                for d in batch.data:
                    key(d)
            ctx.send(0, time, batch)


def consolidate_columns(data: Iterable[Any], diffs: Iterable[int]) -> UpdateBatch:
    """Sum the diffs of equal data and drop zeros (first-seen order).

    >>> consolidate_columns(["a", "b", "a"], [1, 1, -1])
    UpdateBatch(data=['b'], diffs=[1])
    """
    items = [(d, r) for d, r in sum_diffs(data, diffs, {}).items() if r]
    return UpdateBatch([d for d, _ in items], [r for _, r in items])


class Consolidate(Operator):
    """Hold each time's updates until the time is complete, then send them consolidated."""

    name = "consolidate"
    interest = Interest.ALWAYS

    def __init__(self) -> None:
        self.pending: Pending[Time] = Pending()

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """A capability per time a restored state holds updates at (none on a fresh start)."""
        self.pending.start(capabilities)

    def save(self, sink: StateSink) -> None:
        """Hand the updates of times not complete yet to a checkpoint."""
        self.pending.save(sink)

    def load(self, source: StateSource) -> None:
        """Take this worker's share of the updates held back at a checkpoint."""
        self.pending.load(source)

    def schedule(self, ctx: OperatorContext) -> None:
        """Buffer new batches; flush the times the frontier has passed."""
        pending = self.pending
        pending.queue(ctx)
        if not pending:
            return
        for time, cap, data, diffs in pending.passed(ctx.frontier(0)):
            out = consolidate_columns(data, diffs)
            if out.data:
                ctx.send(0, time, out)
            cap.drop()


def temporal_filter_logic(
    lower: Callable[[Any], Time | None], upper: Callable[[Any], Time | None]
) -> Callable[[Any], list[tuple[Any, Time, int]]]:
    """``join_function`` logic keeping ``data`` present during ``[lower(data), upper(data))``.

    A record becomes visible at ``max(its time, lower)`` and is retracted at ``upper``. Nothing
    is emitted when ``lower >= upper`` or a bound is ``None`` for the lower side (never
    visible); ``upper(data) is None`` means "visible for ever".

    >>> logic = temporal_filter_logic(lambda e: e[0], lambda e: e[1])
    >>> logic((3, 5)), logic((5, 5))
    ([((3, 5), 3, 1), ((3, 5), 5, -1)], [])
    """

    def logic(data: Any) -> list[tuple[Any, Time, int]]:
        lo = lower(data)
        hi = upper(data)
        if lo is None:
            return []
        if hi is None:
            return [(data, lo, 1)]
        if not lo < hi:
            return []
        return [(data, lo, 1), (data, hi, -1)]

    return logic
