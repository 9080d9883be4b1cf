"""``processes=P``: workers in separate interpreters over real loopback sockets.

The oracle shapes (reductions, joins, iterate, nested loops, temporal filters) at
``processes=2`` with 2 and 4 workers must equal one worker in one process; the handles of
``df.open`` behave as with one process; a user error, a killed process and a cancelled
scope stop the job without hanging or leaving processes behind. The processes come from one
:class:`~deltaflow.scheduler.net.processes.ProcessPool` for the module (an interpreter costs
about half a second to start; a pooled job a few milliseconds).
"""

from __future__ import annotations

import logging
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.jobs import pipeline_of
from tests.loops import SHAPES, churning_graphs, run_shape
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.errors import OperatorTypeError, OperatorValueError, RemoteTraceback
from deltaflow.scheduler.net.processes import ProcessPool
from deltaflow.testing import collect

Update = tuple[Any, int, int]


@pytest.fixture(scope="module", autouse=True)
def pool() -> Iterator[ProcessPool]:
    """Worker processes kept for every test of this module."""
    with ProcessPool() as p:
        yield p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for good; only its parent's wait is missing.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def _worker_pids() -> list[int]:
    """The worker processes this test process started (children of ours)."""
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                pids.append(int(entry))
    return pids


# -- oracles ------------------------------------------------------------------------------
def count_values(xs: df.Collection) -> df.Collection:
    """Equal output data from different workers: every key's count, keys dropped."""
    return xs.map(lambda kv: (kv[0], kv[1])).count().map(lambda kn: kn[1])


def join_sum(xs: df.Collection) -> df.Collection:
    return xs.join_map(xs, lambda k, a, b: (k, a + b)).reduce(
        lambda k, vals: [(sum(v * n for v, n in vals), 1)]
    )


def temporal(xs: df.Collection) -> df.Collection:
    return xs.temporal_filter(lambda kv: kv[1] % 4, lambda kv: kv[1] % 4 + kv[0] % 3)


FLAT: dict[str, Callable[..., df.Collection]] = {
    "count-values": count_values,
    "join-reduce": join_sum,
    "temporal-filter": temporal,
    "distinct": lambda xs: xs.map(lambda kv: kv[0]).distinct(),
}

pairs = st.lists(
    st.tuples(
        st.tuples(st.integers(0, 5), st.integers(0, 9)),
        st.integers(0, 5),
        st.sampled_from([1, 1, -1]),
    ),
    max_size=40,
).map(nonnegative)  # reductions need collections (no negative counts)


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("shape", sorted(FLAT))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xs=pairs)
def test_flat_shapes_match_one_process(shape: str, workers: int, xs: list[Update]) -> None:
    pipe = pipeline_of(FLAT[shape])
    assert collect(pipe, workers, processes=2, xs=xs) == collect(pipe, 1, xs=xs)


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=churning_graphs(),
    how=st.sampled_from(["run", "open"]),
    stops=st.lists(st.integers(1, 10), max_size=2),
)
def test_loops_match_the_recompute(
    shape: str, workers: int, inputs: dict[str, list[Update]], how: str, stops: list[int]
) -> None:
    build, query = SHAPES[shape]
    out = run_shape(build, workers, inputs, how, stops, processes=2)
    assert_matches_oracle(out, inputs, query)


def test_equal_data_from_different_workers_are_consolidated() -> None:
    xs = [((k, v), 0, 1) for k in range(20) for v in range(3)]
    out = df.run(pipeline_of(count_values), workers=4, processes=2, xs=xs)
    assert out == [(3, 0, 20)]


# -- the handles ----------------------------------------------------------------------------
class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        self.probe = words.probe()
        return words.map(lambda w: (w, 1)).count()


async def test_open_behaves_as_one_process() -> None:
    pipe = Counts()
    async with df.open(pipe, workers=4, processes=2) as job:
        sub = job.output.subscribe()
        captured = job.output.capture()
        words = job.inputs["words"]
        for w in ["a", "b", "a"]:
            words.insert(w)
        await job.advance_to(1)
        assert job.output.at(0) == {("a", 2): 1, ("b", 1): 1}
        assert job.output.is_complete(0)
        words.remove("a")
        words.update_at("c", 3)
        await job.advance_to(2)
        assert job.output.at(1) == {("a", 1): 1, ("b", 1): 1}
        await pipe.probe.wait_past(1)
        assert not pipe.probe.less_equal(1)
        stats = job.statistics()
        assert len(stats["workers"]) == 4
        assert all(w["steps"] > 0 for w in stats["workers"])
    assert sorted(job.output.updates(), key=lambda u: (u[1], u[0])) == [
        (("a", 2), 0, 1),
        (("b", 1), 0, 1),
        (("a", 1), 1, 1),
        (("a", 2), 1, -1),
        (("c", 1), 3, 1),
    ]
    assert [t for t, _ in captured] == [0, 1, 3]
    got = [item async for item in sub]
    assert got == captured
    assert sorted(captured[0][1]) == [(("a", 2), 1), (("b", 1), 1)]


async def test_workers_default_to_processes() -> None:
    async with df.open(Counts(), processes=2) as job:
        job.inputs["words"].insert("x")
        await job.advance_to(1)
        assert len(job.statistics()["workers"]) == 2


async def test_profiled_operator_counts_are_summed_over_the_processes() -> None:
    """The counts stay in the worker processes; the caller's statistics add them up, as
    one process adds up its workers'."""
    words = ["a", "b", "a", "c", "d", "a", "e"]

    async def counted(processes: int) -> dict[str, dict[str, Any]]:
        async with df.open(Counts(), workers=2, processes=processes, profile=True) as job:
            job.inputs["words"].insert_many(words)
            await job.advance_to(1)
        return {op["name"]: op for op in job.statistics()["operators"]}

    two, one = await counted(2), await counted(1)
    assert two["count"]["records"] == one["count"]["records"] == len(words)
    assert two["count"]["activations"] >= 2 and two["input:words"]["activations"] >= 2
    assert sum(op["seconds"] for op in two.values()) > 0


def test_workers_must_be_a_multiple_of_processes() -> None:
    with pytest.raises(ValueError, match="multiple of processes"):
        df.run(Counts(), workers=3, processes=2, words=[])


def test_worker_logs_reach_the_callers_logger(caplog: pytest.LogCaptureFixture) -> None:
    def noisy(xs: df.Collection) -> df.Collection:
        return xs.inspect(lambda u: logging.getLogger("deltaflow.user").warning("saw %s", u[0]))

    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        df.run(pipeline_of(noisy), processes=2, xs=[(7, 0, 1)])
    assert "saw 7" in caplog.text


# -- failures -------------------------------------------------------------------------------
def test_user_error_in_a_process_names_the_operator() -> None:
    def bad(xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: 1 // x)

    with pytest.raises(df.OperatorError, match="ZeroDivisionError") as info:
        df.run(pipeline_of(bad), workers=4, processes=2, xs=[(x, 0, 1) for x in range(10)])
    assert "map" in info.value.operator


class Unlucky(Exception):
    """A user exception whose constructor takes other arguments than its ``args``: it does
    not unpickle."""

    def __init__(self, number: int, why: str) -> None:
        super().__init__(f"{number} is {why}")


def reciprocal(x: int) -> int:
    return 1 // x


def unlucky(x: int) -> int:
    if x == 13:
        raise Unlucky(x, "unlucky")
    return x


@pytest.mark.parametrize("processes", [1, 2])
def test_the_users_exception_is_the_cause_at_any_process_count(processes: int) -> None:
    """The OperatorError of a failing function says the same at any process count, and its
    ``__cause__`` is the user's exception (from another process: a copy, carrying the
    traceback text of where it was raised)."""

    def bad(xs: df.Collection) -> df.Collection:
        return xs.map(reciprocal)

    with pytest.raises(df.OperatorError) as info:
        df.run(pipeline_of(bad), workers=2, processes=processes, xs=[(0, 0, 1), (1, 0, 1)])
    exc = info.value
    assert str(exc).endswith("raised ZeroDivisionError: integer division or modulo by zero")
    assert type(exc.__cause__) is ZeroDivisionError
    assert exc.__cause__.args == ("integer division or modulo by zero",)
    if processes > 1:
        remote = exc.__cause__.__cause__
        assert isinstance(remote, RemoteTraceback)
        assert "return 1 // x" in str(remote) and "ZeroDivisionError" in str(remote)
        printed = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        assert "return 1 // x" in printed


def test_an_exception_that_does_not_unpickle_arrives_as_its_traceback_text() -> None:
    """A user exception that cannot be rebuilt here still arrives: the OperatorError names it
    and its ``__cause__`` is the traceback text, with its type and message."""

    class Pipe(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.map(unlucky)

    with pytest.raises(df.OperatorError, match="raised Unlucky: 13 is unlucky") as info:
        df.run(Pipe(), processes=2, xs=[(x, 0, 1) for x in range(20)])
    remote = info.value.__cause__
    assert isinstance(remote, RemoteTraceback)
    assert "Unlucky: 13 is unlucky" in str(remote) and "raise Unlucky" in str(remote)


@pytest.mark.parametrize("processes", [1, 2])
def test_operator_value_and_type_errors_arrive_as_themselves(processes: int) -> None:
    """A ``sum`` that comes to NaN is an OperatorValueError (so a ValueError) and values that
    ``min`` cannot compare an OperatorTypeError, at any process count."""

    def total(xs: df.Collection) -> df.Collection:
        return xs.sum()

    def lowest(xs: df.Collection) -> df.Collection:
        return xs.min()

    infinities = [(("s1", float("inf")), 0, 1), (("s1", -float("inf")), 0, 1)]
    with pytest.raises(ValueError, match="sum: key 's1' adds up to NaN") as info:
        df.run(pipeline_of(total), workers=2, processes=processes, xs=infinities)
    assert isinstance(info.value, OperatorValueError)
    assert info.value.operator == "sum"
    mixed = [(("k", 1), 0, 1), (("k", "x"), 0, 1)]
    with pytest.raises(TypeError, match="min: key 'k' has values") as type_info:
        df.run(pipeline_of(lowest), workers=2, processes=processes, xs=mixed)
    assert isinstance(type_info.value, OperatorTypeError)


def interrupt(x: int) -> int:
    if x == 3:
        raise KeyboardInterrupt
    return x


def test_keyboard_interrupt_in_user_code_stays_itself() -> None:
    """A KeyboardInterrupt raised by user code in a worker process leaves run() as a
    KeyboardInterrupt, whichever process raised it."""

    def interrupted(xs: df.Collection) -> df.Collection:
        return xs.map(interrupt)

    for workers in (2, 4):
        with pytest.raises(KeyboardInterrupt):
            df.run(pipeline_of(interrupted), workers=workers, processes=2,
                   xs=[(x, 0, 1) for x in range(8)])  # fmt: skip


async def test_keyboard_interrupt_leaves_open_as_itself() -> None:
    """The same while the job is open: ``advance_to`` raises the KeyboardInterrupt."""

    def interrupted(xs: df.Collection) -> df.Collection:
        return xs.map(interrupt)

    with pytest.raises(KeyboardInterrupt):
        async with df.open(pipeline_of(interrupted), processes=2) as job:
            job.inputs["xs"].insert_many(range(5))
            await job.advance_to(1)


async def test_user_error_while_open() -> None:
    def bad(xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: 1 // x)

    with pytest.raises(df.OperatorError, match="division"):
        async with df.open(pipeline_of(bad), processes=2) as job:
            job.inputs["xs"].insert(1)
            await job.advance_to(1)
            job.inputs["xs"].insert(0)
            await job.advance_to(2)


async def test_a_killed_worker_process_fails_the_job_naming_it() -> None:
    before = set(_worker_pids())
    with pytest.raises(df.PeerLostError, match="worker 1") as info:
        async with df.open(Counts(), processes=2) as job:
            job.inputs["words"].insert("a")
            await job.advance_to(1)
            control = job.transport
            victim = control.processes[1].popen.pid  # type: ignore[attr-defined]
            os.kill(victim, signal.SIGKILL)
            start = time.perf_counter()
            with trio.fail_after(10):
                while True:
                    job.inputs["words"].insert("b")
                    await job.advance_to(job.time + 1)
    assert time.perf_counter() - start < 10
    assert str(victim) in str(info.value)
    assert not _alive(victim)
    assert set(_worker_pids()) <= before


async def test_cancelling_the_scope_ends_every_process() -> None:
    with trio.CancelScope() as scope:
        async with df.open(Counts(), processes=2) as job:
            pids = [p.popen.pid for p in job.transport.processes]  # type: ignore[attr-defined]
            job.inputs["words"].insert("a")
            await job.advance_to(1)
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    for pid in pids:
        assert not _alive(pid)


async def test_leaving_with_an_exception_ends_every_process() -> None:
    with pytest.raises(KeyError):
        async with df.open(Counts(), processes=2) as job:
            pids = [p.popen.pid for p in job.transport.processes]  # type: ignore[attr-defined]
            raise KeyError("out")
    for pid in pids:
        assert not _alive(pid)


def test_without_a_pool_no_process_remains() -> None:
    before = set(_worker_pids())
    with ProcessPool() as inner:
        df.run(Counts(), processes=2, words=[("a", 0, 1)])
        assert inner.idle == 2
    assert set(_worker_pids()) <= before
