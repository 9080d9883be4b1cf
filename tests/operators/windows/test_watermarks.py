"""Watermarks and event times that are instants, against from-scratch recomputes.

* Watermarks: a recompute that, time by time, takes the watermark as the largest event time
  of every update before that time minus the delay, drops exactly the updates below it, and
  keeps the windows of the rest whose ends are above it: the job's output must equal it at
  every time, its late count must be the number dropped, at 1-3 workers and 2 processes, and
  across a checkpoint.
* Instants: windows of ``datetime``, ``pandas.Timestamp`` and ``numpy.datetime64`` event
  times (spans as timedeltas or ``"N minutes"``) are the int windows of the same instants.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import Windowed, brute_sessions, brute_windows, events, key_of, run_by_time

import deltaflow as df
from deltaflow.testing import accumulate

SHAPES = [
    pytest.param((5, 5, 0, 0), id="tumbling,delay0"),
    pytest.param((4, 2, 1, 3), id="sliding,delay3"),
    pytest.param((2, 5, 0, 7), id="gaps,delay7"),
]


def watermark_steps(
    ups: list[Any], delay: int
) -> tuple[list[tuple[int, int | None, Counter[Any]]], int]:
    """At every time ``t`` up to the last + 2: the watermark, by the definition max(event
    times before t) - delay (None before any), and the updates applied by then (those not
    below the watermark when they came); and how many updates were late."""
    times = sorted({t for _, t, _ in ups})
    last = times[-1] + 2 if times else 1
    high: int | None = None
    applied: Counter[Any] = Counter()
    late = 0
    steps = []
    for t in range(last + 1):
        mark = None if high is None else high - delay
        here = [(d, r) for d, u, r in ups if u == t]
        for d, r in here:
            if mark is not None and d[1] < mark:
                late += 1
            else:
                applied[d] += r
        for d, _ in here:
            high = d[1] if high is None else max(high, d[1])
        steps.append((t, mark, Counter(applied)))
    return steps, late


def watermark_oracle(
    ups: list[Any], size: int, hop: int, origin: int, delay: int
) -> tuple[dict[int, Counter[Any]], int]:
    """The output collection at every time up to the last + 2 (the windows of the applied
    updates whose ends are above the watermark), and how many updates were late."""
    steps, late = watermark_steps(ups, delay)
    out: dict[int, Counter[Any]] = {}
    for t, mark, applied in steps:
        coll: Counter[Any] = Counter()
        for d, n in applied.items():
            for w in brute_windows(d[1], size, hop, origin):
                if mark is None or w[1] > mark:
                    coll[(w, d)] += n
        out[t] = Counter({k: n for k, n in coll.items() if n})
    return out, late


def watermarked(size: int, hop: int, origin: int, delay: Any) -> Windowed:
    spec = df.tumbling(size, origin) if size == hop else df.sliding(size, hop, origin)
    return Windowed(spec, watermark=delay)


def run_counting(
    pipe: df.Pipeline, ups: list[Any], workers: int, processes: int = 1
) -> tuple[Any, int]:
    """The output updates and the late count of a job fed ``ups`` time by time."""
    out, late = run_by_time(pipe, ups, workers, processes)
    return out, sum(late.values())


def check(out: list[Any], ups: list[Any], shape: tuple[int, int, int, int]) -> None:
    expected, _ = watermark_oracle(ups, *shape)
    for t, coll in expected.items():
        assert accumulate(out, t) == dict(coll), f"time {t}"


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_watermarks_match_a_recompute(ups: list[Any], shape: Any, workers: int) -> None:
    """Exactly the updates below the watermark at their arrival are dropped and counted;
    the windows it passes leave the output at the first time it passes them."""
    out, late = run_counting(watermarked(*shape), ups, workers)
    check(out, ups, shape)
    assert late == watermark_oracle(ups, *shape)[1]


def session_oracle(ups: list[Any], gap: int, delay: int) -> tuple[dict[int, Counter[Any]], int]:
    """As :func:`watermark_oracle`, for sessions: the sessions of the applied updates whose
    ends are above the watermark."""
    steps, late = watermark_steps(ups, delay)
    out: dict[int, Counter[Any]] = {}
    for t, mark, applied in steps:
        coll = brute_sessions(Counter({d: n for d, n in applied.items() if n}), gap)
        out[t] = Counter({k: n for k, n in coll.items() if n and (mark is None or k[0][1] > mark)})
    return out, late


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(("gap", "delay"), [(1, 0), (3, 2), (5, 8)])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_session_watermarks_match_a_recompute(
    ups: list[Any], gap: int, delay: int, workers: int
) -> None:
    """Sessions with a watermark: late updates dropped and counted, final sessions out."""
    pipe = Windowed(df.session(gap), key=key_of, watermark=delay)
    out, late = run_counting(pipe, ups, workers)
    expected, dropped = session_oracle(ups, gap, delay)
    for t, coll in expected.items():
        assert accumulate(out, t) == dict(coll), f"time {t}"
    assert late == dropped


@settings(max_examples=5, deadline=None)
@given(ups=events())
def test_watermarks_across_processes(ups: list[Any]) -> None:
    """Two processes: the same output and late count as the recompute."""
    shape = (4, 2, 1, 3)
    out, late = run_counting(watermarked(*shape), ups, 2, 2)
    check(out, ups, shape)
    assert late == watermark_oracle(ups, *shape)[1]


def test_late_updates_are_logged_once_per_operator(caplog: pytest.LogCaptureFixture) -> None:
    """One WARNING for the operator's first late update, whatever the number after."""
    ups = [(("a", 20), 0, 1), *[(("a", i), 1 + i, 1) for i in range(5)]]
    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        out, late = run_counting(watermarked(5, 5, 0, 2), ups, 2)
    warnings = [r for r in caplog.records if "late update" in r.getMessage()]
    assert late == 5 and len(warnings) == 1
    assert "older than the watermark 18" in warnings[0].getMessage()
    assert out == [(((20, 25), ("a", 20)), 0, 1)]


def held(op: Any) -> int:
    """What a watermark operator holds: the events of windows or sessions still open."""
    if hasattr(op, "events") and hasattr(op, "open"):
        return sum(len(here) for here in op.events.values())
    if hasattr(op, "keys") and hasattr(op, "late"):
        return sum(len(state.counts) for state in op.keys.values())
    return 0


@pytest.mark.parametrize("sessions", [False, True], ids=["sliding", "sessions"])
def test_window_state_stays_bounded_on_a_long_stream(sessions: bool) -> None:
    """Event times rising with the stream: the operator keeps the open windows only."""
    pipe = (
        Windowed(df.session(4), key=key_of, watermark=20) if sessions else watermarked(10, 5, 0, 20)
    )

    async def main() -> list[int]:
        sizes = []
        async with df.open(pipe, workers=2) as job:
            for t in range(400):
                job.inputs["xs"].insert(("a" if t % 2 else "b", t * 3))
                await job.advance_to(t + 1)
                sizes.append(sum(held(a.operator) for w in job.workers for a in w.actors))
        return sizes

    sizes = trio.run(main)
    # An event 3 apart each time, kept until its last window (10 long) is 20 behind the
    # largest: about (20 + 10) / 3 events, whatever the stream's length.
    assert max(sizes) <= 12 and max(sizes[200:]) <= max(sizes[:50]), sizes


async def part(
    pipe: df.Pipeline, ups: list[Any], ts: list[int], workers: int, end: int, location: Path
) -> tuple[list[Any], int]:
    """Feed ``ups`` at times ``ts`` into a job on ``location`` (resuming it if it holds a
    checkpoint) and advance to ``end``; the updates it published, and its late count."""
    captured: list[Any] = []
    async with df.open(pipe, workers=workers, checkpoint=location) as job:

        async def take(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            subscription = job.output.subscribe()
            task_status.started()
            async for t, upds in subscription:
                captured.extend((d, t, r) for d, r in upds)

        async with trio.open_nursery() as nursery:
            await nursery.start(take)
            for t in ts:
                await job.advance_to(t)
                for d, u, r in ups:
                    if u == t:
                        job.inputs["xs"].update(d, r)
            await job.advance_to(end)
            await trio.testing.wait_all_tasks_blocked()  # take() has read what came
            nursery.cancel_scope.cancel()
        late = sum(job.statistics()["late"].values())
    return captured, late


@pytest.mark.parametrize("sessions", [False, True], ids=["sliding", "sessions"])
@pytest.mark.parametrize("workers", [1, 2])
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events(), cut=st.integers(0, 7))
def test_watermarks_resume_from_a_checkpoint(
    ups: list[Any],
    cut: int,
    workers: int,
    sessions: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Stopped at any time and resumed on its checkpoint (at another worker count), the job
    goes on as an uninterrupted one: the watermark, open windows and late count survive."""
    shape = (4, 2, 1, 3)
    if sessions:
        pipe: df.Pipeline = Windowed(df.session(3), key=key_of, watermark=2)
        expected, dropped = session_oracle(ups, 3, 2)
    else:
        pipe = watermarked(*shape)
        expected, dropped = watermark_oracle(ups, *shape)
    location = tmp_path_factory.mktemp("state")
    times = sorted({t for _, t, _ in ups} | {cut})
    before = [t for t in times if t < cut]
    first, _ = trio.run(part, pipe, ups, before, workers, cut, location)
    after = [t for t in times if t >= cut]
    second, late = trio.run(part, pipe, ups, after, 3 - workers, times[-1] + 3, location)
    assert all(t < cut for _, t, _ in first) and all(t >= cut for _, t, _ in second)
    for t, coll in expected.items():
        assert accumulate(first + second, t) == dict(coll), f"time {t}"
    assert late == dropped


# -- instants ----------------------------------------------------------------------------
EPOCH = dt.datetime(1970, 1, 1)
AS_INSTANT = {
    "datetime": lambda m: EPOCH + dt.timedelta(minutes=m),
    "aware": lambda m: dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=m),
    "pandas": lambda m: pd.Timestamp(EPOCH) + pd.Timedelta(minutes=m),
    "numpy": lambda m: np.datetime64(0, "m") + np.timedelta64(m, "m"),
}


def minutes(t: Any) -> int:
    """An instant back as whole minutes from the epoch."""
    if isinstance(t, np.datetime64):
        return int((t - np.datetime64(0, "m")) // np.timedelta64(1, "m"))
    base = EPOCH if t.tzinfo is None else dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (t - base) // dt.timedelta(minutes=1)


def as_ints(out: list[Any]) -> list[Any]:
    return sorted((((minutes(w[0]), minutes(w[1])), d), t, r) for (w, d), t, r in out)


SPANS = [
    pytest.param((df.tumbling(5), df.tumbling("5 minutes")), id="tumbling"),
    pytest.param(
        (df.sliding(4, 2), df.sliding(dt.timedelta(minutes=4), np.timedelta64(2, "m"))),
        id="sliding",
    ),
    pytest.param((df.session(3), df.session(pd.Timedelta(minutes=3))), id="session"),
]


@pytest.mark.parametrize("kind", sorted(AS_INSTANT))
@pytest.mark.parametrize("specs", SPANS)
@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_instant_windows_are_the_int_windows_of_the_same_instants(
    ups: list[Any], specs: Any, kind: str
) -> None:
    """Minutes as ints and the same minutes as instants give the same windows."""
    int_spec, time_spec = specs
    convert = AS_INSTANT[kind]
    key = key_of if isinstance(int_spec, df.operators.windows.Session) else None
    ints = df.run(Windowed(int_spec, key=key), workers=2, xs=ups)
    timed_ups = [((k, convert(m)), t, r) for (k, m), t, r in ups]
    timed = df.run(Windowed(time_spec, key=key), workers=2, xs=timed_ups)
    back = {(k, convert(m)): (k, m) for (k, m), _, _ in ups}
    assert as_ints([((w, back[d]), t, r) for (w, d), t, r in timed]) == sorted(ints)


@settings(max_examples=20)
@given(ups=events())
def test_instant_watermarks_are_the_int_watermarks(ups: list[Any]) -> None:
    """A watermark of ``"3 minutes"`` over datetimes drops what 3 drops over minutes."""
    ints, late = run_counting(watermarked(4, 2, 0, 3), ups, 2)
    timed_ups = [((k, AS_INSTANT["pandas"](m)), t, r) for (k, m), t, r in ups]
    pipe = Windowed(df.sliding("4 minutes", "2 minutes"), watermark="3 minutes")
    timed, timed_late = run_counting(pipe, timed_ups, 2)
    back = {(k, AS_INSTANT["pandas"](m)): (k, m) for (k, m), _, _ in ups}
    assert as_ints([((w, back[d]), t, r) for (w, d), t, r in timed]) == sorted(ints)
    assert timed_late == late


def test_huge_int_event_times_stay_exact() -> None:
    """10**30 in tumbling(600): one window, exactly placed, at once."""
    big = 10**30 + 123
    out = df.run(Windowed(df.tumbling(600)), xs=[(("a", big), 0, 1)])
    start = big - big % 600
    assert out == [(((start, start + 600), ("a", big)), 0, 1)]
    assert len(df.sliding(10**20, 10**19).windows(-(10**40) + 1)) == 10


def test_bad_event_times_and_spans_are_named() -> None:
    """Mixing numbers and instants, NaT, a bad interval, both watermark and retention."""
    with pytest.raises(ValueError, match="'10 moons' is not an interval"):
        df.tumbling("10 moons")
    with pytest.raises(TypeError, match="both be numbers or both timedeltas"):
        df.sliding("10 minutes", 5)
    with pytest.raises(df.OperatorError, match="gave the number 5, but the spans are timedeltas"):
        df.run(Windowed(df.tumbling("1 hour")), xs=[(("a", 5), 0, 1)])
    with pytest.raises(df.OperatorError, match="gave the instant"):
        df.run(Windowed(df.tumbling(5)), xs=[(("a", EPOCH), 0, 1)])
    with pytest.raises(df.OperatorError, match="not NaT"):
        df.run(Windowed(df.tumbling("1 hour")), xs=[(("a", pd.NaT), 0, 1)])
    with pytest.raises(ValueError, match="not both"):
        df.run(Windowed(df.tumbling(5), watermark=1, retention=1), xs=[])
    with pytest.raises(TypeError, match="must be of one kind"):
        df.run(Windowed(df.tumbling(5), watermark="1 minute"), xs=[])
    with pytest.raises(ValueError, match="key= groups sessions"):
        df.run(Windowed(df.tumbling(5), key=key_of, watermark=1), xs=[])


def test_example_in_the_guide(tmp_path: Path) -> None:
    """Hourly counts over datetimes with a watermark (the guide's example)."""

    class Hourly(df.Pipeline):
        def build(self, clicks: df.Collection) -> df.Collection:
            return (
                clicks.window(df.tumbling("1 hour"), at=lambda c: c[1], watermark="10 minutes")
                .map(lambda wc: (wc[0], wc[1][0]))  # (window, user)
                .count()
            )

    t0 = dt.datetime(2024, 5, 1, 9, 0)
    ups = [
        (("ann", t0 + dt.timedelta(minutes=5)), 0, 1),
        (("bob", t0 + dt.timedelta(minutes=50)), 0, 1),
        (("cy", t0 + dt.timedelta(minutes=75)), 1, 1),  # watermark 10:05 at time 2
        (("dan", t0 + dt.timedelta(minutes=30)), 2, 1),  # late: 09:30 < 10:05
    ]
    out = df.run(Hourly(), clicks=ups)
    nine = (t0, t0 + dt.timedelta(hours=1))
    assert accumulate(out, 1) == {(nine, 2): 1, ((nine[1], nine[1] + dt.timedelta(hours=1)), 1): 1}
    assert (nine, 2) not in accumulate(out, 2)
