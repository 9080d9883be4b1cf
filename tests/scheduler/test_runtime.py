"""The embedded runtime: run(), open(), inputs, outputs, errors, and never hanging."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import deltaflow as df


class Double(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: 2 * x)


class Chain(df.Pipeline):
    """Ten maps, an exchange and a filter: exercises fusion and routing."""

    def build(self, xs: df.Collection) -> df.Collection:
        for _ in range(10):
            xs = xs.map(lambda x: x + 1)
        return xs.exchange().filter(lambda x: x % 3 != 0)


class TwoOutputs(df.Pipeline):
    def build(self, xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
        return {"both": xs.concat(ys), "neg": xs.negate()}


class Boom(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: 1 // x)


def test_run_returns_consolidated_updates(workers: int) -> None:
    """run() gives consolidated updates sorted by time, no zero diffs."""
    out = df.run(
        Double(),
        workers=workers,
        xs=[(1, 0, 1), (1, 0, 1), (2, 1, 1), (2, 1, -1), (3, 2, 1), (1, 3, -2)],
    )
    assert out == [(2, 0, 2), (6, 2, 1), (2, 3, -2)]


def test_run_chain_matches_plain_python(workers: int) -> None:
    """A fused chain with an exchange computes what plain Python computes."""
    xs = [(i, i % 5, 1) for i in range(200)] + [(i, 7, -1) for i in range(0, 200, 7)]
    out = df.run(Chain(), workers=workers, xs=xs)
    expected: dict[tuple[int, int], int] = {}
    for d, t, r in xs:
        v = d + 10
        if v % 3:
            expected[(v, t)] = expected.get((v, t), 0) + r
    assert sorted(out) == sorted((d, t, r) for (d, t), r in expected.items() if r)


def test_run_several_outputs(workers: int) -> None:
    """A build() returning a dict gives a dict of update lists."""
    out = df.run(TwoOutputs(), workers=workers, xs=[("a", 0, 1)], ys=[("b", 1, 1)])
    assert out == {"both": [("a", 0, 1), ("b", 1, 1)], "neg": [("a", 0, -1)]}


@pytest.mark.parametrize(
    ("bad", "exc", "fragment"),
    [
        ([(["unhashable"], 0, 1)], TypeError, "not hashable"),
        ([("a", 0, 1.5)], TypeError, "must be an int"),
        ([("a", -1, 1)], ValueError, ">= 0"),
        ([("a", "0", 1)], TypeError, "must be an int"),
        ([("a", 0)], ValueError, "triple"),
    ],
)
def test_run_rejects_bad_input(bad: list[object], exc: type[Exception], fragment: str) -> None:
    """Malformed triples raise, naming the input and the value."""
    with pytest.raises(exc, match=fragment) as info:
        df.run(Double(), xs=bad)
    assert "'xs'" in str(info.value)


def test_run_unknown_input() -> None:
    """An input name build() does not take is rejected."""
    with pytest.raises(TypeError, match="unknown input"):
        df.run(Double(), ys=[])


def test_user_error_names_operator(workers: int) -> None:
    """An exception in user code stops the job with the operator's name and the cause."""
    with pytest.raises(df.OperatorError, match="map") as info:
        df.run(Boom(), workers=workers, xs=[(1, 0, 1), (0, 1, 1)])
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert "test_runtime" in info.value.operator


async def test_open_interactive_rounds(workers: int) -> None:
    """Feeding, advancing, reading at(t) and the consolidated history."""
    async with df.open(Double(), workers=workers) as job:
        xs = job.inputs["xs"]
        xs.insert(1)
        xs.insert(2)
        await job.advance_to(1)
        assert job.output.at(0) == {2: 1, 4: 1}
        xs.remove(1)
        xs.update(5, 3)
        await job.advance_to(2)
        assert job.output.at(1) == {4: 1, 10: 3}
        assert job.output.at(0) == {2: 1, 4: 1}
        with pytest.raises(ValueError, match="not complete"):
            job.output.at(2)
    assert sorted(job.output.updates()) == [(2, 0, 1), (2, 1, -1), (4, 0, 1), (10, 1, 3)]


async def test_advance_backwards_is_rejected_and_job_stays_usable() -> None:
    """advance_to a lower time raises ValueError; what was fed before is kept."""
    async with df.open(Double()) as job:
        job.inputs["xs"].insert(3)
        await job.advance_to(5)
        with pytest.raises(ValueError, match="already at time 5"):
            await job.advance_to(4)
        with pytest.raises(ValueError, match="before the input's current time"):
            job.inputs["xs"].update_at(1, 2)
        with pytest.raises(TypeError, match="'xs'"):
            job.inputs["xs"].insert([1])
        with pytest.raises(TypeError, match="must be an int"):
            job.inputs["xs"].update(1, "2")
        job.inputs["xs"].insert(4)
        await job.advance_to(6)
        assert job.output.at(5) == {6: 1, 8: 1}


async def test_subscribe_delivers_each_completed_time() -> None:
    """subscribe() yields (time, consolidated updates) as times complete, then ends."""
    got: list[tuple[int, list[tuple[int, int]]]] = []
    async with df.open(Double()) as job:

        async def reader() -> None:
            async for time, updates in job.output.subscribe():
                got.append((time, sorted(updates)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            xs = job.inputs["xs"]
            xs.insert(1)
            xs.insert(1)
            await job.advance_to(1)
            xs.remove(1)
            xs.insert(7)
            await job.advance_to(3)
            xs.insert(1)
            xs.remove(1)
            await job.advance_to(4)
            await job.close()
    assert got == [(0, [(2, 2)]), (1, [(2, -1), (14, 1)])]


async def test_user_error_in_open_does_not_hang(workers: int) -> None:
    """A failing operator makes advance_to raise instead of waiting for ever."""
    with trio.fail_after(10):
        with pytest.raises(df.OperatorError, match="ZeroDivisionError"):
            async with df.open(Boom(), workers=workers) as job:
                job.inputs["xs"].insert(0)
                await job.advance_to(1)
        with pytest.raises(df.JobClosedError):
            job.inputs["xs"].insert(1)


async def test_body_exception_propagates_unwrapped() -> None:
    """An exception raised by the application inside open() comes out as itself."""
    with trio.fail_after(10), pytest.raises(KeyError):
        async with df.open(Double()) as job:
            job.inputs["xs"].insert(1)
            raise KeyError("mine")


async def test_probe_waits_past_time() -> None:
    """A probe observes its collection's frontier and can be awaited."""

    class Probed(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            self.handle = xs.map(str).probe()
            return xs

    pipeline = Probed()
    async with df.open(pipeline) as job:
        handle = pipeline.handle
        assert handle.less_equal(0)
        job.inputs["xs"].insert(1)
        job.flush()
        await job.advance_to(3)
        await handle.wait_past(2)
        assert not handle.less_equal(2)
        assert handle.less_equal(3)
    assert handle.done()


def test_multiple_inputs_workers_concat(workers: int) -> None:
    """concat adds counts across inputs and workers."""
    xs = [(i % 7, i % 4, 1) for i in range(100)]
    ys = [(i % 7, i % 3, -1) for i in range(50)]
    out = df.run(TwoOutputs(), workers=workers, xs=xs, ys=ys)["both"]
    expected: dict[tuple[int, int], int] = {}
    for d, t, r in xs + ys:
        expected[(d, t)] = expected.get((d, t), 0) + r
    assert sorted(out) == sorted((d, t, r) for (d, t), r in expected.items() if r)


async def test_capture_collects_completed_times(workers: int) -> None:
    """capture() fills a list with (time, consolidated updates) as times complete."""
    async with df.open(Double(), workers=workers) as job:
        captured = job.output.capture()
        xs = job.inputs["xs"]
        xs.insert(1)
        xs.insert(3)
        await job.advance_to(1)
        assert [(t, sorted(u)) for t, u in captured] == [(0, [(2, 1), (6, 1)])]
        xs.remove(3)
        await job.advance_to(2)
    assert [(t, sorted(u)) for t, u in captured] == [(0, [(2, 1), (6, 1)]), (1, [(6, -1)])]


# -- subscriptions and stopped jobs ------------------------------------------------------------


async def test_a_subscription_counts_from_the_call_not_the_first_iteration() -> None:
    """Times completing between subscribe() and the first __anext__ are delivered."""
    async with df.open(Double()) as job:
        sub = job.output.subscribe()
        job.inputs["xs"].insert(1)
        await job.advance_to(1)
        job.inputs["xs"].insert(2)
        await job.advance_to(2)
        got = [await sub.__anext__(), await sub.__anext__()]
        await sub.aclose()
    assert got == [(0, [(2, 1)]), (1, [(4, 1)])]


async def test_a_subscription_raises_when_the_job_fails(workers: int) -> None:
    """The iteration does not end as if the job had finished: it raises the OperatorError
    (reported there, it is not raised a second time when the block exits)."""
    seen: list[int] = []
    errors: list[BaseException] = []
    async with df.open(Boom(), workers=workers) as job:

        async def reader() -> None:
            try:
                async for time, _ in job.output.subscribe():
                    seen.append(time)
            except df.OperatorError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            job.inputs["xs"].insert(1)
            await job.advance_to(1)
            job.inputs["xs"].insert(0)
            job.flush()
    assert seen == [0]
    assert len(errors) == 1 and isinstance(errors[0].__cause__, ZeroDivisionError)


async def test_subscribing_to_a_stopped_job_does_not_hang() -> None:
    """A finished job's subscription ends at once; a failed job's raises JobClosedError."""
    async with df.open(Double()) as job:
        job.inputs["xs"].insert(1)
    with trio.fail_after(5):
        assert [item async for item in job.output.subscribe()] == []
    failed = df.open(Boom())
    with pytest.raises(df.OperatorError):
        async with failed as job2:
            job2.inputs["xs"].insert(0)
    with pytest.raises(df.JobClosedError):
        job2.output.subscribe()


async def test_an_abandoned_job_takes_no_more_input() -> None:
    """A job whose block was cancelled (or raised) is stopped: feeding it raises and its
    subscriptions end, instead of silently dropping what is fed."""
    with trio.move_on_after(0.2):
        async with df.open(Double()) as job:
            sub = job.output.subscribe()
            job.inputs["xs"].insert(1)
            await job.advance_to(1)
            await trio.sleep(10)
    with trio.fail_after(5):
        assert [item async for item in sub] == [(0, [(2, 1)])]
    with pytest.raises(df.JobClosedError):
        job.inputs["xs"].insert(1)


async def test_a_dropped_subscription_is_forgotten() -> None:
    """A loop left by break stops the deliveries (a long job keeps no dead subscriptions)."""
    import gc

    async with df.open(Double()) as job:
        for i in range(20):
            sub = job.output.subscribe()
            job.inputs["xs"].insert(i)
            await job.advance_to(i + 1)
            async for _ in sub:
                break
            del sub
        # One collection for the twenty: a full collection of the test process's heap costs
        # a second or more, and what is checked is that every dropped one is forgotten.
        gc.collect()
        job.inputs["xs"].insert(99)
        await job.advance_to(100)
        assert job.output._subscribers == []


# -- misuse of the job's handles ----------------------------------------------------------------


async def test_handles_reject_misuse_clearly_and_lose_nothing() -> None:
    """Unknown names list the real ones; a string is not many data; extend() validates;
    at() takes int times; a df.open(...) is entered once. Nothing fed before is lost."""
    opened = df.open(Double())
    async with opened as job:
        xs = job.inputs["xs"]
        xs.insert(1)
        with pytest.raises(KeyError, match=r"no input named 'ys'; this pipeline has \['xs'\]"):
            job.inputs["ys"]
        with pytest.raises(KeyError, match="no output named 'out'"):
            job.outputs["out"]
        with pytest.raises(TypeError, match="expected an iterable of data, not 'abc'"):
            xs.insert_many("abc")
        with pytest.raises(TypeError, match="diff '1' for 2 must be an int"):
            xs.extend([2], ["1"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="before the input's current time"):
            xs.extend([2], [1], time=-3)
        xs.extend([3], [1], time=2)
        with pytest.raises(TypeError, match=r"at\('1'\): times are ints"):
            job.output.at("1")  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="already entered"):
            async with opened:
                pass
        await job.advance_to(3)
        assert job.output.at(0) == {2: 1}
        assert job.output.at(2) == {2: 1, 6: 1}


def test_a_dict_of_outputs_stays_a_dict_and_is_checked() -> None:
    """build() returning {"output": c} gives a dict like any dict of outputs; an empty dict
    or names that are not strings are rejected when the pipeline is built."""

    class One(df.Pipeline):
        def build(self, xs: df.Collection) -> dict[str, df.Collection]:
            return {"output": xs}

    class Empty(df.Pipeline):
        def build(self, xs: df.Collection) -> dict[str, df.Collection]:
            return {}

    class IntNamed(df.Pipeline):
        def build(self, xs: df.Collection) -> dict[Any, df.Collection]:
            return {1: xs}

    assert df.run(One(), xs=[(1, 0, 1)]) == {"output": [(1, 0, 1)]}
    for bad in (Empty(), IntNamed()):
        with pytest.raises(TypeError, match="at least one output, named by non-empty strings"):
            df.run(bad, xs=[(1, 0, 1)])


def test_join_errors_name_the_join_function(workers: int) -> None:
    """A join_map whose function fails is named with the function, like every operator."""

    class J(df.Pipeline):
        def build(self, a: df.Collection, b: df.Collection) -> df.Collection:
            return a.join_map(b, lambda k, x, y: x // y)

    with pytest.raises(df.OperatorError) as info:
        df.run(J(), workers=workers, a=[((1, 1), 0, 1)], b=[((1, 0), 0, 1)])
    assert info.value.operator.startswith("join_map(") and "test_runtime" in info.value.operator


def test_numpy_integers_are_integers_for_diffs_and_times(workers: int) -> None:
    """Diffs and times are integers: numpy's are taken (as ints), bools and floats are not."""
    import numpy as np

    out = df.run(Double(), workers=workers, xs=[(1, np.int64(0), np.int64(2)), (2, 1, np.int32(1))])
    assert out == [(2, 0, 2), (4, 1, 1)]
    for bad in [(1, 0, True), (1, 0.0, 1), (1, np.float64(0), 1)]:
        with pytest.raises(TypeError, match="must be an int"):
            df.run(Double(), xs=[bad])


async def test_numpy_integers_feed_a_running_job() -> None:
    import numpy as np

    async with df.open(Double()) as job:
        xs = job.inputs["xs"]
        xs.update(1, np.int64(2))
        xs.update_at(2, np.int32(1), np.int8(1))
        xs.insert_many([3], np.array([1]))
        await job.advance_to(np.int64(2))
        assert job.output.at(np.int64(1)) == {2: 2, 4: 1, 6: 1}
        assert all(type(r) is int for _, _, r in job.output.updates())


def test_input_names_that_run_takes_itself_are_explained() -> None:
    """An input called "pipeline" works with run(); "workers", "fuse" and "gc_threshold" are
    run()'s own keywords, which it says instead of misreading the data."""

    class Named(df.Pipeline):
        def build(self, pipeline: df.Collection) -> df.Collection:
            return pipeline

    class Clash(df.Pipeline):
        def build(self, workers: df.Collection, fuse: df.Collection) -> df.Collection:
            return workers.concat(fuse)

    assert df.run(Named(), pipeline=[(1, 0, 1)]) == [(1, 0, 1)]
    with pytest.raises(TypeError, match=r"inputs named \['fuse', 'workers'\], which are run"):
        df.run(Clash(), fuse=[(2, 0, 1)])
