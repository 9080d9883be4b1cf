"""The worker's step protocol: lazy message announcements and lazily fetched frontiers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

import deltaflow as df
from deltaflow.operators.base import Interest, UpdateBatch
from deltaflow.scheduler.local.transport import ProgressChange
from deltaflow.scheduler.runtime import Job


class Maps(df.Pipeline):
    """Five maps and an exchange: a chain of actors when not fused."""

    def build(self, xs: df.Collection) -> df.Collection:
        for _ in range(5):
            xs = xs.map(lambda x: x + 1)
        return xs.exchange().map(lambda x: x * 2)


def record_progress(job: Job) -> list[list[ProgressChange]]:
    """Make the job's transport keep a copy of every progress batch it broadcasts."""
    batches: list[list[ProgressChange]] = []
    broadcast = job.transport.broadcast_progress

    def recording(sender: int, changes: list[ProgressChange]) -> None:
        batches.append(list(changes))
        broadcast(sender, changes)

    job.transport.broadcast_progress = recording  # type: ignore[method-assign]
    return batches


def message_counts(batches: list[list[ProgressChange]]) -> Counter[tuple[int, int, Any]]:
    """Net message counts per (node, port, time) over all batches."""
    net: Counter[tuple[int, int, Any]] = Counter()
    for batch in batches:
        for is_source, node, port, time, delta in batch:
            if not is_source:
                net[(node, port, time)] += delta
    return net


async def run_rounds(job: Job, rounds: int) -> dict[Any, int]:
    xs = job.inputs["xs"]
    for t in range(rounds):
        xs.insert(t)
        xs.insert(t + 100)
        await job.advance_to(t + 1)
    return job.output.at(rounds - 1)


EXPECTED = {2 * (x + 5): 1 for t in range(3) for x in (t, t + 100)}


async def test_messages_sent_and_drained_in_one_step_are_never_reported() -> None:
    """On one worker every message is drained in the step that sent it: no message changes."""
    async with df.open(Maps(), fuse=False) as job:
        batches = record_progress(job)
        assert await run_rounds(job, 3) == EXPECTED
    assert batches
    assert [c for batch in batches for c in batch if not c[0]] == []


async def test_messages_left_in_a_mailbox_are_announced_at_the_end_of_the_step(
    workers: int,
) -> None:
    """With one activation per step every message waits a step: reported sent, then drained."""
    async with df.open(Maps(), workers=workers, fuse=False) as job:
        for w in job.workers:
            w.ACTIVATIONS_PER_STEP = 1
        batches = record_progress(job)
        assert await run_rounds(job, 3) == EXPECTED
    reported = [c for batch in batches for c in batch if not c[0]]
    assert any(c[4] == 1 for c in reported) and any(c[4] == -1 for c in reported)
    assert all(n == 0 for n in message_counts(batches).values())


async def test_frontiers_are_fetched_when_asked_for(workers: int) -> None:
    """An actor's frontier, once asked for, is its worker's tracker's frontier; an operator
    that declares it never reads them (``reads_frontiers = False``) gets one made on each
    request, right all the same, and kept by nobody."""
    async with df.open(Maps(), workers=workers, fuse=False) as job:
        assert await run_rounds(job, 2) == {2 * (x + 5): 1 for t in range(2) for x in (t, t + 100)}
        await trio.testing.wait_all_tasks_blocked()
        unwatched = 0
        for w in job.workers:
            for actor in w.actors:
                watched = actor.operator.reads_frontiers or actor.interest
                assert actor.watches_frontiers == watched
                for port in range(len(actor.mailboxes)):
                    assert w.tracker.is_watched(actor.index, port) == watched
                    frontier = actor.frontier(port)
                    assert frontier == w.tracker.frontier(actor.index, port)
                    if watched:
                        assert frontier is w.tracker.frontier(actor.index, port)
                        assert actor.frontiers[port] is not None
                    else:
                        assert actor.frontiers[port] is None
                        unwatched += 1
                        with pytest.raises(ValueError, match="reads_frontiers = False"):
                            actor.set_interest(Interest.ALWAYS)
        assert unwatched  # the maps


def test_fresh_and_announced_messages_in_one_mailbox_stay_exact() -> None:
    """Mixing lazily announced deliveries with deliver() and receive() nets to zero."""
    job = Job(Maps(), workers=1, fuse=False)
    worker = job.workers[0]
    node = worker.plan.routes[0][0][0][0]  # the first actor after the input
    actor = worker.actors[node]
    batch = UpdateBatch([1], [1])
    worker.deliver_fresh(node, 0, 1, batch)
    assert worker.pending == [] and actor.fresh[0] == 0
    # deliver() to ourselves: the caller reports the message; the fresh one is announced first.
    worker.pending.append((False, node, 0, 2, 1))
    worker.deliver(worker.index, node, 0, 2, batch)
    assert worker.pending == [(False, node, 0, 2, 1), (False, node, 0, 1, 1)]
    assert actor.fresh[0] == -1
    worker.deliver_fresh(node, 0, 3, batch)
    worker.receive(node, 0, 4, batch)  # as if sent (and reported) by another worker
    worker.pending.append((False, node, 0, 4, 1))
    worker.deliver_fresh(node, 0, 5, batch)
    assert [t for t, _ in actor.messages(0)] == [1, 2, 3, 4, 5]
    worker.deliver_fresh(node, 0, 6, batch)  # drained in this step: never reported
    assert [t for t, _ in actor.messages(0)] == [6]
    worker.deliver_fresh(node, 0, 7, batch)  # still in the mailbox when the step ends
    net = message_counts([worker.pending])
    assert {k: n for k, n in net.items() if n} == {}
    batches = record_progress(job)
    worker.active.clear()  # end the step without running the actor
    worker._is_active[node] = False
    worker.step()
    assert [t for t, _ in actor.mailboxes[0]] == [7]
    assert actor.fresh[0] == -1 and not worker._fresh_ports
    # Everything reported before the step ends nets to zero; the step adds only the 7.
    final = message_counts(batches)
    assert {k: n for k, n in final.items() if n} == {(node, 0, 7): 1}
    assert worker.pending == []
