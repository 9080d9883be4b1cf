"""Placements: what the job asks of where its workers run (see
:mod:`deltaflow.scheduler.placement`).

With ``processes=P`` the caller's placement forwards what is fed over the control streams;
activating the inputs (``flush``, ``advance_to``, ``close``) writes it out at once rather than
when the sending tasks next get their turn.
"""

from __future__ import annotations

from typing import Any

import trio

import deltaflow as df
from deltaflow.scheduler.net.processes import Processes, ProcessPool
from deltaflow.scheduler.placement import InProcess


class Counts(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: (x % 3, x)).count()


def test_processes_send_what_was_fed_at_once() -> None:
    async def main() -> list[Any]:
        async with df.open(Counts(), workers=2, processes=2) as job:
            assert isinstance(job.placement, Processes)
            links = job.transport.links  # type: ignore[attr-defined]
            xs = job.inputs["xs"]
            queued = []
            for t in range(3):
                xs.insert_many(range(t * 10, t * 10 + 10))
                job.flush()  # no await since: only the activation could have sent it
                queued.append([len(link._out) for link in links])
                await job.advance_to(t + 1)
        assert queued == [[0, 0]] * 3, queued
        return job.output.updates()

    with ProcessPool():
        got = trio.run(main)
    expected = df.run(Counts(), xs=[(x, x // 10, 1) for x in range(30)])
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_a_job_is_in_process_by_default() -> None:
    async def main() -> list[Any]:
        async with df.open(Counts(), workers=2) as job:
            assert isinstance(job.placement, InProcess)
            assert job.placement.describe(job) == "2 workers, 1 process"
            job.inputs["xs"].insert_many(range(10))
        return job.output.updates()

    assert sorted(trio.run(main), key=repr) == sorted(
        df.run(Counts(), xs=[(x, 0, 1) for x in range(10)]), key=repr
    )
