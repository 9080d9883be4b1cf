"""The garbage collector's thresholds while jobs run (``scheduler/collector.py``)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
import trio

import deltaflow as df
from deltaflow.scheduler.collector import GC_THRESHOLD


class Double(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: 2 * x)


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    """Start from CPython's defaults and put back whatever the test found."""
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*found)


def test_thresholds_raised_while_a_job_runs_and_restored_after(
    default_thresholds: tuple[int, int, int],
) -> None:
    seen: list[tuple[int, int, int]] = []

    async def main() -> None:
        async with df.open(Double()) as job:
            seen.append(gc.get_threshold())
            job.inputs["xs"].insert(3)
            await job.advance_to(1)
            assert job.output.at(0) == {6: 1}

    trio.run(main)
    assert seen == [(GC_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == default_thresholds


def test_overlapping_jobs_restore_when_the_last_one_ends(
    default_thresholds: tuple[int, int, int],
) -> None:
    seen: list[tuple[int, int, int]] = []

    async def main() -> None:
        async with df.open(Double()):
            async with df.open(Double(), gc_threshold=2 * GC_THRESHOLD):
                seen.append(gc.get_threshold())
            seen.append(gc.get_threshold())
        seen.append(gc.get_threshold())

    trio.run(main)
    assert seen == [(2 * GC_THRESHOLD, 10, 10), (2 * GC_THRESHOLD, 10, 10), default_thresholds]


def test_a_higher_threshold_is_never_lowered(default_thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(10 * GC_THRESHOLD, 10, 10)
    seen: list[tuple[int, int, int]] = []

    async def main() -> None:
        async with df.open(Double()):
            seen.append(gc.get_threshold())

    trio.run(main)
    assert seen == [(10 * GC_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (10 * GC_THRESHOLD, 10, 10)


def test_none_leaves_the_collector_alone(default_thresholds: tuple[int, int, int]) -> None:
    seen: list[tuple[int, int, int]] = []

    async def main() -> None:
        async with df.open(Double(), gc_threshold=None):
            seen.append(gc.get_threshold())

    trio.run(main)
    assert seen == [default_thresholds]
    assert df.run(Double(), gc_threshold=None, xs=[(1, 0, 1)]) == [(2, 0, 1)]


def test_restored_when_the_job_body_fails(default_thresholds: tuple[int, int, int]) -> None:
    async def main() -> None:
        async with df.open(Double()):
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        trio.run(main)
    assert gc.get_threshold() == default_thresholds


@pytest.mark.parametrize("bad", [0, -5, 2.5, "many", True])
def test_bad_threshold_is_rejected_before_running(bad: object) -> None:
    expected = rf"gc_threshold must be a positive int or None, not {bad!r}"
    with pytest.raises(ValueError, match=expected):
        df.open(Double(), gc_threshold=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"gc_threshold must be a positive int or None"):
        df.run(Double(), gc_threshold=bad, xs=[(1, 0, 1)])  # type: ignore[arg-type]


def test_jobs_in_two_threads_restore_once_both_end(
    default_thresholds: tuple[int, int, int],
) -> None:
    """Two trio programs in two threads, each with a job open while the other's is."""
    both_open = threading.Barrier(2)
    seen: list[int] = []

    def program() -> None:
        async def main() -> None:
            async with df.open(Double()):
                both_open.wait()
                seen.append(gc.get_threshold()[0])
                both_open.wait()

        trio.run(main)

    threads = [threading.Thread(target=program) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [GC_THRESHOLD, GC_THRESHOLD]
    assert gc.get_threshold() == default_thresholds
