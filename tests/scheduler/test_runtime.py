"""The embedded runtime: run(), open(), inputs, outputs, errors, and never hanging."""

from __future__ import annotations

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
