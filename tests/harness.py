"""What the tests share, in one place: a fake operator context and the driver of a reduction
through it, the accumulation of updates, and the reductions' oracles that several test
modules check against.

- ``FakeContext`` / ``FakeCapability``: one input, one output; every send and mint is checked
  against the rights held, as the actor checks them.
- ``drive``: seals updates into batches along a chain of frontiers and runs a
  ``ReduceOperator`` through a ``FakeContext``.
- ``accumulate`` (:func:`deltaflow.testing.accumulate`): the collection at a time.
- ``frontier_chains``, ``consolidated``, ``GENERAL``, ``BY_COUNT``, ``by_self_query``,
  ``Switching``: strategies, oracles and operator variants of the reduction tests;
  ``drive_counting`` drives one of ``BY_COUNT`` at pairs, ``kernel_mode`` sets the kernels'
  mode for a block.

Test modules import from here (and from :mod:`tests.reference`, :mod:`tests.strategies`,
:mod:`tests.jobs`), never from one another.

>>> accumulate([("a", 0, 1), ("a", 2, -1)], 1)
{'a': 1}
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings, strategies as st
from tests.jobs import pipeline_of
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework import kernels
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product, Time, join, less_equal, sort_key
from deltaflow.framework.trace.batch import Batch
from deltaflow.framework.trace.description import Description
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators import reduce as R
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.base import Interest, UpdateBatch
from deltaflow.operators.join.operator import JoinOperator
from deltaflow.operators.reduce import paths as reduce_paths
from deltaflow.operators.reduce.interesting_times import InterestingTimes
from deltaflow.scheduler.runtime import Job
from deltaflow.testing import accumulate


# -- driving the operator directly (partially ordered times) --------------------------------
class FakeCapability:
    """A capability as the runtime keeps it: a time, validity, and the holder's count."""

    def __init__(self, ctx: FakeContext, time: Time) -> None:
        self.ctx = ctx
        self._time = time
        self.valid = True
        self.port = 0
        ctx.held[time] = ctx.held.get(time, 0) + 1

    @property
    def time(self) -> Time:
        return self._time

    def _release(self) -> None:
        assert self.valid, "capability used after drop"
        n = self.ctx.held[self._time] - 1
        if n:
            self.ctx.held[self._time] = n
        else:
            del self.ctx.held[self._time]

    def downgrade(self, time: Time) -> None:
        assert less_equal(self._time, time)
        self._release()
        self._time = time
        self.ctx.held[time] = self.ctx.held.get(time, 0) + 1

    def delayed(self, time: Time) -> FakeCapability:
        assert less_equal(self._time, time)
        return FakeCapability(self.ctx, time)

    def drop(self) -> None:
        self._release()
        self.valid = False


class FakeContext:
    """One input, one output; checks every send and mint against held rights like the actor.

    ``mailbox`` holds the ``(time, payload)`` messages the next activation reads; ``sent``
    lists every update sent in an ``UpdateBatch`` as ``(data, time, diff)``, ``payloads``
    every send as ``(port, time, payload)`` (an arrangement's trace batches too);
    ``interest`` is what the operator last asked to be woken by.
    """

    worker_index = 0
    peers = 1

    def __init__(self, lower: Time, mailbox: list[tuple[Time, Any]] | None = None) -> None:
        self.mailbox: list[tuple[Time, Any]] = list(mailbox or [])
        self._frontier = Antichain([lower])
        self.rights: list[Time] = []
        self.held: dict[Time, int] = {}
        self.sent: list[tuple[Any, Time, int]] = []
        self.payloads: list[tuple[int, Time, Any]] = []
        self.interest: Interest | None = None

    def messages(self, port: int) -> list[tuple[Time, Any]]:
        box, self.mailbox = self.mailbox, []
        self.rights.extend(t for t, _ in box)
        return box

    def frontier(self, port: int) -> Antichain:
        return self._frontier

    def _may(self, time: Time) -> bool:
        return any(less_equal(t, time) for t in [*self.rights, *self.held])

    def send(self, port: int, time: Time, payload: UpdateBatch | RawBatch | Batch) -> None:
        assert self._may(time), f"send at {time!r} without a capability"
        self.payloads.append((port, time, payload))
        if not isinstance(payload, (RawBatch, Batch)):
            self.sent.extend((d, time, r) for d, r in zip(payload.data, payload.diffs))

    def set_interest(self, interest: Interest) -> None:
        self.interest = interest

    def capability(self, time: Time, port: int = 0) -> FakeCapability:
        assert self._may(time), f"capability at {time!r} without a right"
        return FakeCapability(self, time)

    def activate(self) -> None:
        pass

    def run(self, op: R.ReduceOperator, frontier: Antichain | None = None) -> None:
        if frontier is not None:
            self._frontier = frontier
        op.schedule(self)  # type: ignore[arg-type]
        self.rights.clear()
        op._check()


def identical(a: Any, b: Any) -> bool:
    """Equal and of the same classes all the way down (``1`` is not ``True`` nor ``1.0``),
    as a value read back from a checkpoint must be.

    >>> identical((1, 2.0), (1, 2.0)), identical((1, 2.0), (True, 2))
    (True, False)
    """
    if a.__class__ is not b.__class__:
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def frontier_join(a: Antichain, b: Antichain) -> Antichain:
    return Antichain(join(x, y) for x in a for y in b)


# The general search for every key, with none of its shortcuts: what each shortcut must match.
GENERAL = reduce_paths.general_only(InterestingTimes(line_fast_path=False))


def drive(
    updates: list[Any],
    frontiers: list[Antichain],
    logic: R.Logic,
    lower: Time,
    *,
    lag: list[bool] | None = None,
    total_order: bool | None = None,
    positive_only: bool = True,
    key_only: bool = False,
    by_count: R.ByCount | None = None,
    early: int = 0,
    path: reduce_paths.KeyPath | None = None,
    operator: type[R.ReduceOperator] = R.ReduceOperator,
    strict: bool = False,
    ahead: list[int] | None = None,
    batched: bool = False,
) -> tuple[list[Any], FakeContext, R.ReduceOperator]:
    """Seal ``updates`` into one batch per frontier of the advancing chain and drive the
    operator: messages one per distinct time; with ``lag[i]`` the frontier moves only in a
    later activation than the one delivering the messages; with ``early`` each batch's
    messages come that many frontiers early (times the frontier has not passed yet, as a
    loop's next rounds do); with ``ahead``, batch ``i`` comes ``ahead[i % len(ahead)]``
    frontiers early instead, so a later batch may come before an earlier one (a retraction
    before the insertion it cancels, as operators that hold some times back send them);
    with ``batched`` a message holds updates at its time and later ones (a sender may send
    at any time it holds, updates at later times): each update goes in the message at the
    first element not after it of the frontier before the activation it comes in; ``path``
    replaces the per-key path the operator chose, ``operator`` may be a subclass with other
    tunables, and ``strict`` refuses negative counts. The last frontier must be empty.
    """
    source = Spine(Antichain([lower]))
    op = operator(
        "reduce(test)",
        source,
        Spine(Antichain([lower])),
        logic,
        total_order=total_order,
        positive_only=positive_only,
        key_only=key_only,
        by_count=by_count,
        strict=strict,
    )
    if path is not None:
        op.path = path
    ctx = FakeContext(lower)
    remaining = list(updates)
    previous = Antichain([lower])
    sealed = []
    for f in frontiers:
        now = [u for u in remaining if not f.less_equal(u[1])]
        remaining = [u for u in remaining if f.less_equal(u[1])]
        sealed.append((Description(previous, f), [(k, v, t, r) for (k, v), t, r in now]))
        previous = f
    assert not remaining

    def deliver(step: int, now: Antichain) -> None:
        desc, rows = sealed[step]
        if batched:
            at = {u: next(f for f in now.elements if less_equal(f, u[2])) for u in rows}
            for t in sorted(set(at.values())):
                ctx.mailbox.append((t, Batch.from_updates([u for u in rows if at[u] == t], desc)))
            return
        for t in sorted({t for _, _, t, _ in rows}):
            ctx.mailbox.append((t, Batch.from_updates([u for u in rows if u[2] == t], desc)))

    arrivals: dict[int, list[int]] = {}
    for step in range(len(frontiers)):
        at = max(0, step - ahead[step % len(ahead)]) if ahead else max(0, step - early)
        arrivals.setdefault(at, []).append(step)
    for i, f in enumerate(frontiers):
        desc, rows = sealed[i]
        source.insert(Batch.from_updates(rows, desc))
        for step in sorted(arrivals.get(i, []), reverse=bool(ahead)):
            deliver(step, desc.lower)
        if lag and lag[i % len(lag)]:
            ctx.run(op)
        done = len(ctx.sent)
        ctx.run(op, f)
        # Corrections only at times the frontier has passed: what lies beyond it waits.
        early_sent = [t for _, t, _ in ctx.sent[done:] if f.less_equal(t)]
        assert not early_sent, f"sent at {early_sent} beyond the frontier {f}"
    return ctx.sent, ctx, op


def frontier_chains(times: st.SearchStrategy[Any], n: int = 4) -> st.SearchStrategy[Any]:
    """Advancing frontiers: each one the join of the previous and a random antichain, then []."""

    def build(raw: list[list[Any]]) -> list[Antichain]:
        out: list[Antichain] = []
        current: Antichain | None = None
        for elems in raw:
            a = Antichain(elems)
            current = a if current is None else frontier_join(current, a)
            if out and current == out[-1]:
                continue
            out.append(current)
        out.append(Antichain())
        return out

    return st.lists(st.lists(times, min_size=1, max_size=3), max_size=n).map(build)


def consolidated(updates: list[Any]) -> Counter[Any]:
    """``{(data, time): diff}`` of an update list, zero sums dropped."""
    out: Counter[Any] = Counter()
    for d, t, r in updates:
        out[(d, t)] += r
    return Counter({dt: r for dt, r in out.items() if r})


def halve(_d: Any, n: int) -> int:
    """A threshold that is zero for some non-zero counts and negative for negative ones."""
    return n // 2


def by_self_query(f: Callable[[Any, int], int]) -> Callable[..., Counter[Any]]:
    """The meaning of a reduction by self whose output count is ``f(datum, n)`` (n != 0)."""

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        counts = {d: f(d, n) for (d, _), n in c["xs"].items() if n}
        return Counter({d: m for d, m in counts.items() if m})

    return query


BY_COUNT: dict[str, tuple[R.Logic, R.ByCount, bool, Callable[[Any, int], int]]] = {
    "distinct": (R._distinct_logic, R._distinct_by_count, True, lambda _d, n: int(n > 0)),
    "threshold": (*R._threshold_functions(halve, "threshold(halve)"), False, halve),
}


class Switching(R.ReduceOperator):
    """Takes the kernel or not at each activation, in turn as ``modes`` says."""

    modes: ClassVar[list[str]] = ["always"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = 0

    def schedule(self, ctx: Any) -> None:
        kernels.set_mode(self.modes[self.turn % len(self.modes)])
        self.turn += 1
        super().schedule(ctx)


def switching(modes: list[str]) -> type[Switching]:
    """A :class:`Switching` operator taking the kernel or not as ``modes`` says, in turn."""
    return type("Switched", (Switching,), {"modes": modes})


@contextmanager
def kernel_mode(mode: str | None = None) -> Iterator[None]:
    """The kernels' mode set to ``mode`` (or left as it is) inside the block, and put back
    after it, whatever the block set.

    >>> with kernel_mode("never"):
    ...     kernels.mode()
    'never'
    """
    previous = kernels.mode() if mode is None else kernels.set_mode(mode)
    try:
        yield
    finally:
        kernels.set_mode(previous)


def drive_counting(
    name: str, updates: list[Any], frontiers: list[Antichain], *, counting: bool = True, **how: Any
) -> tuple[list[Any], FakeContext, R.ReduceOperator]:
    """:func:`drive` the reduction by self ``BY_COUNT[name]`` at ``Product`` times from
    ``Product(0, 0)``: accumulating ints (``counting``) or dicts; ``how`` goes to ``drive``."""
    logic, by_count, positive_only, _ = BY_COUNT[name]
    return drive(
        updates,
        frontiers,
        logic,
        Product(0, 0),
        positive_only=positive_only,
        key_only=True,
        by_count=by_count if counting else None,
        **how,
    )


Update = tuple[Any, Time, int]


Build = Callable[..., Any]


LOOP_TIMEOUT = 15


loop_settings = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def run(build: Build, workers: int, **inputs: Sequence[Update]) -> Any:
    """Run a bare build function over complete inputs, like ``df.run``; returns the
    consolidated output updates. A loop that keeps a stateful operator on its cycle but never
    converges fails the test after ``LOOP_TIMEOUT`` seconds instead of hanging."""
    pipeline = pipeline_of(build)

    async def main() -> dict[str, list[Update]]:
        with trio.fail_after(LOOP_TIMEOUT):
            async with df.open(pipeline, workers=workers) as job:
                for name, ups in inputs.items():
                    handle = job.inputs[name]
                    for d, t, r in ups:
                        handle.update_at(d, t, r)
                await job.close()
        return {name: out.updates() for name, out in job.outputs.items()}

    try:
        result = trio.run(main)
    except trio.TooSlowError:
        pytest.fail(f"the dataflow did not finish within {LOOP_TIMEOUT} s (a loop that never ends)")
    for ups in result.values():
        keys = [(d, t) for d, t, _ in ups]
        assert len(keys) == len(set(keys)), f"output not consolidated: {ups}"
        assert all(r for _, _, r in ups), f"zero diffs in output: {ups}"
        ups.sort(key=lambda u: (sort_key(u[1]), repr(u[0])))
    return result["output"] if list(result) == ["output"] else result


@st.composite
def histories(
    draw: st.DrawFn, data: st.SearchStrategy[Any], *, max_time: int = 4, max_size: int = 8
) -> list[Update]:
    """Updates at times ``0..max_time`` with signed counts, and retractions at later times."""
    base = draw(
        st.lists(
            st.tuples(data, st.integers(0, max_time), st.integers(-2, 3).filter(bool)),
            max_size=max_size,
        )
    )
    extra = [(d, draw(st.integers(t, max_time)), -r) for d, t, r in base if draw(st.booleans())]
    return nonnegative(draw(st.permutations(base + extra)))


def clean(c: Counter[Any]) -> Counter[Any]:
    """``c`` without zero counts."""
    return Counter({d: n for d, n in c.items() if n})


def lift(fn: Callable[[Any], Any], keep: Callable[[Any], bool] = lambda _d: True) -> Any:
    """The multiset model of ``filter(keep).map(fn)``: counts move with their data."""

    def apply(c: Counter[Any]) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for d, n in c.items():
            if keep(d):
                out[fn(d)] += n
        return clean(out)

    return apply


def fixed_point(
    step: Callable[[Counter[Any]], Counter[Any]], x: Counter[Any], limit: int | None = None
) -> Counter[Any]:
    """``step`` applied until nothing changes (or ``limit`` times): the value iterate leaves."""
    x = clean(x)
    rounds = 0
    while True:
        nxt = clean(step(x))
        rounds += 1
        if nxt == x or (limit is not None and rounds >= limit):
            return nxt
        assert rounds < 1000, "the model does not converge"
        x = nxt


def examples(n: int) -> settings:
    """Hypothesis settings for tests that also take the (constant) ``workers`` fixture."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def multiway_closure(e: df.Collection) -> df.Collection:
    """The transitive closure of the edges ``e`` by a loop whose step is a multiway join (a
    distinct on each side: both are strict, so a negative count at a complete time would
    stop the job)."""
    live = e.distinct()

    def step(reach: df.Collection) -> df.Collection:
        hop = df.multiway_join(("a", "c"), (reach, ("a", "b")), (live, ("b", "c")))
        return hop.concat(live).distinct()

    return live.iterate(step)


def join_operators(job: Job) -> list[JoinOperator]:
    """Every worker's join operators."""
    return [
        a.operator for w in job.workers for a in w.actors if isinstance(a.operator, JoinOperator)
    ]


KEYS = st.sampled_from(["a", "b"])


EVENT_TIMES = st.integers(min_value=-3, max_value=30)


def events(times: st.SearchStrategy[Any] = EVENT_TIMES, max_time: int = 6) -> Any:
    """``((key, event time), time, diff)`` with retractions (of events never inserted too)."""
    return st.lists(
        st.tuples(
            st.tuples(KEYS, times),
            st.integers(min_value=0, max_value=max_time),
            st.integers(min_value=-2, max_value=2).filter(bool),
        ),
        max_size=16,
    ).map(nonnegative)


def brute_windows(at: float, size: float, hop: float, origin: float) -> list[tuple[Any, Any]]:
    """Every ``[origin + k * hop, + size)`` holding ``at``, by trying every k near it."""
    out = []
    for k in range(-200, 200):
        start = origin + k * hop
        if start <= at < start + size:
            out.append((start, start + size))
    return out


def at_of(e: Any) -> Any:
    return e[1]


def key_of(e: Any) -> Any:
    return e[0]


def brute_sessions(c: Counter[Any], gap: float) -> Counter[Any]:
    """Per key: events (positive counts) sorted by time, chained while less than gap apart."""
    out: Counter[Any] = Counter()
    by_key: dict[Any, list[Any]] = {}
    for e, n in c.items():
        if n > 0:
            by_key.setdefault(e[0], []).append(e)
    for evs in by_key.values():
        evs.sort(key=lambda e: e[1])
        groups: list[list[Any]] = []
        for e in evs:
            if groups and e[1] - groups[-1][-1][1] < gap:
                groups[-1].append(e)
            else:
                groups.append([e])
        for g in groups:
            w = (g[0][1], g[-1][1] + gap)
            for e in g:
                out[(w, e)] += c[e]
    return out


async def feed_by_time(job: Job, ups: Sequence[tuple[Any, int, int]], name: str = "xs") -> None:
    """Feed ``ups`` into the input ``name`` time by time: advance to each of their times, then
    give it that time's updates."""
    for t in sorted({t for _, t, _ in ups}):
        await job.advance_to(t)
        for d, u, r in ups:
            if u == t:
                job.inputs[name].update(d, r)


def run_by_time(
    pipe: df.Pipeline, ups: Sequence[tuple[Any, int, int]], workers: int = 1, processes: int = 1
) -> tuple[list[Update], dict[str, int]]:
    """The output updates of a job fed ``ups`` time by time (:func:`feed_by_time`), and its
    late counts by operator (``statistics()["late"]``)."""

    async def main() -> tuple[list[Update], dict[str, int]]:
        async with df.open(pipe, workers=workers, processes=processes) as job:
            await feed_by_time(job, ups)
        return job.output.updates(), job.statistics()["late"]

    return trio.run(main)


class Windowed(df.Pipeline):
    def __init__(self, spec: Any, key: Any = None, **kw: Any) -> None:
        self.spec, self.key, self.kw = spec, key, kw

    def build(self, xs: df.Collection) -> df.Collection:
        return xs.window(self.spec, at=at_of, key=self.key, **self.kw)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def import_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as the module ``deltaflow_example_<name>``."""
    spec = importlib.util.spec_from_file_location(
        f"deltaflow_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


__all__ = [
    "BY_COUNT",
    "EVENT_TIMES",
    "EXAMPLES",
    "GENERAL",
    "KEYS",
    "LOOP_TIMEOUT",
    "Build",
    "FakeCapability",
    "FakeContext",
    "Switching",
    "Update",
    "Windowed",
    "accumulate",
    "at_of",
    "brute_sessions",
    "brute_windows",
    "by_self_query",
    "clean",
    "consolidated",
    "drive",
    "drive_counting",
    "events",
    "examples",
    "feed_by_time",
    "fixed_point",
    "frontier_chains",
    "frontier_join",
    "halve",
    "histories",
    "identical",
    "import_example",
    "join_operators",
    "kernel_mode",
    "key_of",
    "lift",
    "loop_settings",
    "multiway_closure",
    "run",
    "run_by_time",
    "switching",
]
