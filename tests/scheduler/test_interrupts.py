"""KeyboardInterrupt and trio.Cancelled leave run() and open() as themselves."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import deltaflow as df


def interrupt(_x: Any) -> Any:
    raise KeyboardInterrupt


class Interrupted(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(interrupt)


def test_keyboard_interrupt_in_user_code_leaves_run_unwrapped(workers: int) -> None:
    with pytest.raises(KeyboardInterrupt):
        df.run(Interrupted(), workers=workers, xs=[(1, 0, 1), (2, 0, 1), (3, 1, 1)])


async def test_keyboard_interrupt_leaves_open_unwrapped(workers: int) -> None:
    with pytest.raises(KeyboardInterrupt):
        async with df.open(Interrupted(), workers) as job:
            job.inputs["xs"].insert_many(range(4))
            await job.advance_to(1)


async def test_keyboard_interrupt_in_the_body_leaves_open_as_itself() -> None:
    class Same(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    with pytest.raises(KeyboardInterrupt):
        async with df.open(Same(), 2) as job:
            job.inputs["xs"].insert(1)
            await job.advance_to(1)
            raise KeyboardInterrupt


async def test_cancellation_passes_through_open(workers: int) -> None:
    class Same(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    caught: list[BaseException] = []
    with trio.CancelScope() as scope:
        try:
            async with df.open(Same(), workers) as job:
                job.inputs["xs"].insert(1)
                await job.advance_to(1)
                scope.cancel()
                await trio.sleep_forever()
        except BaseException as exc:
            caught.append(exc)
            raise
    assert scope.cancelled_caught
    assert [type(e) for e in caught] == [trio.Cancelled]
