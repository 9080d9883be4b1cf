"""Event-time windows against a from-scratch recompute: tumbling and sliding windows (hop
below, equal to and above the size), sessions splitting and merging, windowed counts, and
retention closing windows with late updates counted and reported."""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import (
    Windowed,
    at_of,
    brute_sessions,
    brute_windows,
    events,
    key_of,
    run_by_time,
)
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.testing import accumulate


def fixed_query(size: float, hop: float, origin: float) -> Any:
    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for e, n in c["xs"].items():
            for w in brute_windows(e[1], size, hop, origin):
                out[(w, e)] += n
        return out

    return query


def session_query(gap: float) -> Any:
    return lambda c: brute_sessions(c["xs"], gap)


SPECS = [
    pytest.param((4, 2, 0), id="hop<size"),
    pytest.param((5, 5, 1), id="tumbling"),
    pytest.param((2, 5, -1), id="hop>size"),
    pytest.param((3.5, 1.25, 0.5), id="floats"),
]


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("shape", SPECS)
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_fixed_windows_match_a_recompute(ups: list[Any], shape: Any, workers: int) -> None:
    """Every window holding each event time, with the event's count, at every time."""
    size, hop, origin = shape
    spec = df.sliding(size, hop, origin) if hop != size else df.tumbling(size, origin)
    out = df.run(Windowed(spec), workers=workers, xs=ups)
    assert_matches_oracle(out, {"xs": ups}, fixed_query(size, hop, origin))


@settings(max_examples=25)
@given(ups=events(st.floats(min_value=-5, max_value=30, allow_nan=False)))
def test_fixed_windows_of_float_event_times(ups: list[Any]) -> None:
    """Float event times land in the windows whose exact bounds hold them."""
    out = df.run(Windowed(df.sliding(2.5, 0.75, 0.1)), workers=2, xs=ups)
    assert_matches_oracle(out, {"xs": ups}, fixed_query(2.5, 0.75, 0.1))


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("gap", [1, 3, 7])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_sessions_match_a_recompute(ups: list[Any], gap: int, workers: int) -> None:
    """Sessions per key, splitting when an event leaves and merging when one arrives."""
    out = df.run(Windowed(df.session(gap), key=key_of), workers=workers, xs=ups)
    assert_matches_oracle(out, {"xs": ups}, session_query(gap))


def test_sessions_split_and_merge() -> None:
    """The cases by hand: a bridge event merges two sessions, removing it splits them."""
    ups = [(("a", 1), 0, 1), (("a", 6), 0, 1), (("a", 3), 1, 1), (("a", 3), 2, -1)]
    out = df.run(Windowed(df.session(4), key=key_of), xs=ups)
    assert accumulate(out, 0) == {((1, 5), ("a", 1)): 1, ((6, 10), ("a", 6)): 1}
    assert accumulate(out, 1) == {((1, 10), e): 1 for e in [("a", 1), ("a", 3), ("a", 6)]}
    assert accumulate(out, 2) == accumulate(out, 0)


@settings(max_examples=15, deadline=None)
@given(ups=events())
def test_sessions_inside_a_loop_match_a_recompute(ups: list[Any]) -> None:
    """Inside a loop (product times) sessions are a reduction; same answer."""

    class Looped(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.iterate(lambda _v: xs.window(df.session(3), at=at_of, key=key_of))

    assert_matches_oracle(df.run(Looped(), xs=ups), {"xs": ups}, session_query(3))


class Counts(df.Pipeline):
    def __init__(self, spec: Any, **kw: Any) -> None:
        self.spec, self.kw = spec, kw

    def build(self, xs: df.Collection) -> df.Collection:
        per_key = xs.window(self.spec, at=at_of, **self.kw).map(lambda we: ((we[0], we[1][0]), 1))
        return per_key.count()


@pytest.mark.parametrize("workers", [1, 2])
@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events())
def test_windowed_counts_match_a_recompute(ups: list[Any], workers: int) -> None:
    """``count`` over ``((start, end), key)``: events per window and key."""

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        per: Counter[Any] = Counter()
        for (w, e), n in fixed_query(6, 2, 0)(c).items():
            per[(w, e[0])] += n
        return Counter({(k, n): 1 for k, n in per.items() if n > 0})

    out = df.run(Counts(df.sliding(6, 2)), workers=workers, xs=ups)
    assert_matches_oracle(out, {"xs": ups}, query)


# -- retention ----------------------------------------------------------------------------


def late_warnings(records: list[logging.LogRecord]) -> list[str]:
    """The messages of the late-update WARNINGs among ``records``."""
    return [r.getMessage() for r in records if re.search(r": \d+ late update", r.getMessage())]


def check_late(
    late: dict[str, int], expected: int, records: list[logging.LogRecord], processes: int = 1
) -> None:
    """One window operator's late count is ``expected``, and it logged one WARNING (per
    process that met some) naming the operator and its count then, none if nothing was
    late."""
    ((name, count),) = late.items()
    assert name.startswith("window(")
    assert count == expected
    warnings = late_warnings(records)
    if not expected:
        assert warnings == []
        return
    assert 1 <= len(warnings) <= processes
    for message in warnings:
        assert message.startswith(f"{name}: ")
        assert "not logged" in message


def check_retained(
    out: list[Any], ups: list[Any], expected_at: Any, horizon: int, label: str
) -> None:
    for t in range(horizon):
        want = {k: n for k, n in expected_at(t).items() if n}
        assert accumulate(out, t) == want, f"{label}: time {t}"


@pytest.mark.parametrize("workers", [1, 2, 3])
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ups=events(st.integers(min_value=0, max_value=12), max_time=14), retention=st.integers(0, 3))
def test_fixed_windows_with_retention(
    ups: list[Any], retention: int, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    """At time t the output holds the windows of the collection at t that have not closed
    (end + retention > t); updates to closed windows are reported, never applied."""
    size, hop = 4, 2
    close = lambda w: w[1] + retention  # noqa: E731
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        pipe = Windowed(df.sliding(size, hop), retention=retention)
        out, counted = run_by_time(pipe, ups, workers)

    def expected_at(t: int) -> dict[Any, int]:
        now = accumulate(ups, t)
        return {
            (w, e): n
            for e, n in now.items()
            for w in brute_windows(e[1], size, hop, 0)
            if close(w) > t
        }

    check_retained(out, ups, expected_at, 20, "sliding")
    late = sum(1 for e, t, _ in ups if any(close(w) <= t for w in brute_windows(e[1], 4, 2, 0)))
    check_late(counted, late, caplog.records)
    # Memory: every window is retracted by the time it closes.
    assert accumulate(out, 10**6) == {}


@pytest.mark.parametrize("workers", [1, 2, 3])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ups=events(st.integers(min_value=0, max_value=12), max_time=16),
    gap=st.integers(1, 4),
    retention=st.integers(0, 3),
)
def test_sessions_with_retention(
    ups: list[Any], gap: int, retention: int, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    """An update whose event time a has a + retention <= its time is late (reported, not
    applied); the others make sessions, each gone once last + gap + retention <= t."""
    on_time = [(e, t, r) for e, t, r in ups if e[1] + retention > t]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        pipe = Windowed(df.session(gap), key=key_of, retention=retention)
        out, counted = run_by_time(pipe, ups, workers)

    def expected_at(t: int) -> dict[Any, int]:
        sessions = brute_sessions(Counter(accumulate(on_time, t)), gap)
        return {(w, e): n for (w, e), n in sessions.items() if w[1] + retention > t}

    check_retained(out, ups, expected_at, 24, "session")
    check_late(counted, len(ups) - len(on_time), caplog.records)
    assert accumulate(out, 10**6) == {}


def test_retention_keeps_a_stream_bounded() -> None:
    """A long stream through sessions with a retention: the operator's state holds only the
    sessions still open, whatever the length of the stream."""

    async def main() -> int:
        async with df.open(Windowed(df.session(2), key=key_of, retention=1), workers=1) as job:
            feed = job.inputs["xs"]
            for t in range(400):
                feed.insert(("a" if t % 2 else "b", t))
                await job.advance_to(t + 1)
            ops = [a.operator for w in job.workers for a in w.actors]
            from deltaflow.operators.windows.sessions import SessionOperator

            (op,) = [o for o in ops if isinstance(o, SessionOperator)]
            return sum(len(k.counts) for k in op.keys.values())

    assert trio.run(main) <= 4


def test_float_clock_and_user_clock() -> None:
    """A float end closes at its ceiling by default; ``clock`` maps event time to logical."""
    ups = [(("a", 0.5), 0, 1)]
    out = df.run(Windowed(df.tumbling(1.5), retention=0), xs=ups)
    assert out == [(((0.0, 1.5), ("a", 0.5)), 0, 1), (((0.0, 1.5), ("a", 0.5)), 2, -1)]
    ups = [(("a", 30), 0, 1)]
    out = df.run(Windowed(df.tumbling(60), retention=0, clock=lambda s: s // 60), xs=ups)
    assert out == [(((0, 60), ("a", 30)), 0, 1), (((0, 60), ("a", 30)), 1, -1)]


@pytest.mark.slow
def test_windows_at_two_processes(caplog: pytest.LogCaptureFixture) -> None:
    """The same answers with the workers in two processes (sessions, sliding, retention);
    late updates are reported from the worker processes too."""
    ups = [(("a", t % 11), t % 5, 1 if t % 3 else -1) for t in range(40)]
    for pipe, query in [
        (Windowed(df.session(2), key=key_of), session_query(2)),
        (Windowed(df.sliding(4, 3)), fixed_query(4, 3, 0)),
    ]:
        out = df.run(pipe, workers=2, processes=2, xs=ups)
        assert_matches_oracle(out, {"xs": ups}, query)
    pipe = Windowed(df.session(2), key=key_of, retention=1)
    assert df.run(pipe, workers=2, processes=2, xs=ups) == df.run(pipe, workers=1, xs=ups)
    caplog.clear()
    for pipe, late in [
        (Windowed(df.tumbling(5), retention=0), sum(e[1] - e[1] % 5 + 5 <= t for e, t, _ in ups)),
        (Windowed(df.session(2), retention=0), sum(e[1] <= t for e, t, _ in ups)),
    ]:
        with caplog.at_level(logging.WARNING, logger="deltaflow"):
            _out, counted = run_by_time(pipe, ups, 2, processes=2)
        check_late(counted, late, caplog.records, processes=2)
        caplog.clear()


def test_bad_specs_and_event_times() -> None:
    """Specs are checked when made; a bad event time stops the job naming the datum."""
    with pytest.raises(ValueError, match="size must be > 0"):
        df.tumbling(0)
    with pytest.raises(TypeError, match="hop must be a finite"):
        df.sliding(5, float("nan"))
    with pytest.raises(ValueError, match="retention must be >= 0"):
        df.run(Windowed(df.tumbling(5), retention=-1), xs=[])
    with pytest.raises(ValueError, match="key= groups sessions"):
        df.run(Windowed(df.tumbling(5), key=key_of), xs=[])
    with pytest.raises(df.OperatorError, match=r"at\(\('a', 'x'\)\) gave 'x'"):
        df.run(Windowed(df.tumbling(5)), xs=[(("a", "x"), 0, 1)])
    with pytest.raises(df.OperatorError, match="event times are finite"):
        df.run(Windowed(df.session(5), key=key_of), xs=[(("a", float("inf")), 0, 1)])
