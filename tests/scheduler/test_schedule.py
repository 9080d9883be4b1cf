"""The randomized delivery schedule (tests/schedule.py) does what the suite relies on."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from tests.schedule import ScheduledTransport, scheduled

import deltaflow as df
from deltaflow.scheduler.local.transport import InProcessTransport
from deltaflow.scheduler.placement import InProcess


class Spread(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: (x % 5, x)).count()


def deliveries(seed: int) -> tuple[list[tuple[int, int, str, int]], Any]:
    """Run a 3-worker job under the schedule; every delivery as (sender, receiver, kind,
    sequence number within its pair), and the job's output."""
    log: list[tuple[int, int, str, int]] = []
    sent: dict[tuple[int, int], int] = {}

    class Recording(ScheduledTransport):
        # What each call puts on the FIFOs (a message cut in pieces puts several items).
        def send_data(self, sender: int, worker: int, *rest: Any) -> None:
            before = self._lengths()
            super().send_data(sender, worker, *rest)
            self._count(before)

        def broadcast_progress(self, sender: int, changes: Any) -> None:
            before = self._lengths()
            super().broadcast_progress(sender, changes)
            self._count(before)

        def _lengths(self) -> dict[tuple[int, int], int]:
            return {pair: len(fifo) for pair, fifo in self.fifos.items()}

        def _count(self, before: dict[tuple[int, int], int]) -> None:
            for pair, n in self._lengths().items():
                sent[pair] = sent.get(pair, 0) + n - before[pair]

        def _deliver(self, pair: tuple[int, int]) -> None:
            n = sum(1 for e in log if (e[0], e[1]) == pair)
            log.append((pair[0], pair[1], self.fifos[pair][0][0], n))
            super()._deliver(pair)

    original = InProcess.__dict__["make_transport"]
    InProcess.make_transport = staticmethod(lambda: Recording(seed))  # type: ignore[method-assign]
    try:
        out = df.run(Spread(), workers=3, xs=[(x, x % 4, 1) for x in range(40)])
    finally:
        InProcess.make_transport = original  # type: ignore[method-assign]
    assert sum(sent.values()) == len(log), "every message sent was delivered"
    return log, out


def test_each_pair_is_a_fifo_and_seeds_change_the_interleaving() -> None:
    expected = df.run(Spread(), workers=1, xs=[(x, x % 4, 1) for x in range(40)])
    orders = []
    for seed in range(4):
        log, out = deliveries(seed)
        assert out == expected
        assert {kind for _, _, kind, _ in log} == {"data", "progress"}
        for pair in {(s, r) for s, r, _, _ in log}:
            numbers = [n for s, r, _, n in log if (s, r) == pair]
            assert numbers == sorted(numbers)
        orders.append([(s, r) for s, r, _, _ in log])
    assert len({tuple(o) for o in orders}) > 1, "different seeds give different interleavings"


def test_scheduled_replaces_the_transport_only_inside_the_block(
    request: pytest.FixtureRequest,
) -> None:
    async def transport_of_a_job() -> type:
        async with df.open(Spread(), workers=2) as job:
            kind = type(job.transport)
        return kind

    before = trio.run(transport_of_a_job)
    if not request.config.getoption("--schedule"):  # (else the whole test runs under one)
        assert before is InProcessTransport
    with scheduled(7):
        assert trio.run(transport_of_a_job) is ScheduledTransport
    assert trio.run(transport_of_a_job) is before
