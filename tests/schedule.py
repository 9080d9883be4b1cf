"""A randomized delivery schedule: the interleavings workers in separate processes would see.

In one process the in-process transport delivers every message and progress batch the moment
it is sent, and trio steps the workers in a fixed order, so many interleavings that workers in
separate processes (or Spark tasks) meet never happen in a test. :class:`ScheduledTransport`
makes them happen on purpose, reproducibly from a seed:

* every (sending worker, receiving worker) pair, a worker and itself included, is one FIFO
  carrying data messages and progress batches in send order (what a TCP stream between two
  processes guarantees, and all the progress protocol may rely on);
* the FIFOs are delayed independently: a pump task delivers the head of a randomly chosen
  FIFO (or a few of them), and between deliveries lets the workers run a random number of
  scheduling rounds, each worker yielding after every step;
* so progress from one worker may reach a second before or after the data and progress of a
  third, and a worker may drain a message before the batch that counts it reached anyone;
* a message of updates at many times (a ``RunsBatch``) is sometimes split into pieces at its
  time, its runs dealt between them at random and a run cut in two, as a transport may cut a
  long message: each non-empty piece is a message of its own, announced (``+1`` each past the first,
  broadcast before the pieces on the sender's FIFOs, so that no tracker ever sees a piece
  drained before it is counted) and drained on its own.

Use :func:`scheduled` around code that runs jobs (``df.run``, ``df.open``)::

    with scheduled(seed):
        out = df.run(pipeline, workers=3, ...)

Hypothesis draws the seed (``st.integers(0, 2**32 - 1)``), so a failing interleaving shrinks
and replays like any other example.
"""

from __future__ import annotations

import contextlib
import random
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from deltaflow.operators.base import RunsBatch
from deltaflow.scheduler.local.transport import InProcessTransport, ProgressChange
from deltaflow.scheduler.placement import InProcess

if TYPE_CHECKING:
    from deltaflow.scheduler.local.transport import Transport
    from deltaflow.scheduler.local.worker import Worker

__all__ = ["ScheduledTransport", "scheduled"]

#: How long the pump sleeps when nothing is in flight before it looks again (the workers may
#: all have finished without waking it).
IDLE_POLL_S = 0.005


class ScheduledTransport(InProcessTransport):
    """Per-pair FIFOs delivered in a random interleaving drawn from ``seed`` (module doc);
    a worker rests as in one process."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.workers: list[Worker] = []
        self.fifos: dict[tuple[int, int], deque[tuple[Any, ...]]] = {}
        self._wake = trio.Event()
        self.delivered = 0

    def attach(self, workers: list[Worker]) -> None:
        self.workers = workers
        for w in workers:
            w.SLICE_S = 0.0  # yield to trio after every step: the pump interleaves steps
        n = len(workers)
        self.fifos = {(s, r): deque() for s in range(n) for r in range(n)}

    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        pieces = self._pieces(payload) if payload.__class__ is RunsBatch else [payload]
        if len(pieces) > 1:
            extra: list[ProgressChange] = [(False, node, port, time, len(pieces) - 1)]
            for r in range(len(self.workers)):
                self.fifos[sender, r].append(("progress", extra))
            # The sender's counts of what it sent (a checkpoint's quiescence test compares
            # them with what was received) include the extra pieces and progress batches.
            self.workers[sender].sent += len(pieces) - 1 + len(self.workers)
        for piece in pieces:
            self.fifos[sender, worker].append(("data", node, port, time, piece))
        self._wake.set()

    def _pieces(self, runs: RunsBatch) -> list[RunsBatch]:
        """``runs`` as it is, or (half the time) cut in two or three pieces: a random deal
        of its updates, each keeping its run's time (pieces left empty dropped)."""
        rng = self.rng
        if len(runs) < 2 or rng.random() < 0.5:
            return [runs]
        k = rng.choice((2, 2, 3))
        owner = [rng.randrange(k) for _ in range(len(runs))]
        pieces = [runs.take([o == i for o in owner]) for i in range(k)]
        return [p for p in pieces if len(p)]

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        for r in range(len(self.workers)):
            self.fifos[sender, r].append(("progress", changes))
        self._wake.set()

    def _deliver(self, pair: tuple[int, int]) -> None:
        item = self.fifos[pair].popleft()
        target = self.workers[pair[1]]
        if item[0] == "data":
            _, node, port, time, payload = item
            target.receive(node, port, time, payload)
        else:
            target.receive_progress(item[1])
        self.delivered += 1

    async def run(self) -> None:
        rng = self.rng
        while not all(w.finished for w in self.workers):
            busy = [pair for pair, fifo in self.fifos.items() if fifo]
            if not busy:
                self._wake = trio.Event()
                with trio.move_on_after(IDLE_POLL_S):
                    await self._wake.wait()
                continue
            # Let the workers step a random number of rounds (often none, sometimes many)
            # before the next delivery: messages stay in flight for a random while.
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3, 5, 8))):
                await trio.lowlevel.checkpoint()
            pair = rng.choice(busy)
            for _ in range(rng.choice((1, 1, 1, 2, 4))):
                if not self.fifos[pair]:
                    break
                self._deliver(pair)


@contextlib.contextmanager
def scheduled(seed: int) -> Iterator[None]:
    """Run every job started inside the block through a :class:`ScheduledTransport` whose
    randomness comes from ``seed`` (each job a fresh one, seeded in turn)."""
    seeds = random.Random(seed)
    original = InProcess.__dict__["make_transport"]

    def make_transport() -> Transport:
        return ScheduledTransport(seeds.randrange(2**32))

    InProcess.make_transport = staticmethod(make_transport)  # type: ignore[method-assign]
    try:
        yield
    finally:
        InProcess.make_transport = original  # type: ignore[method-assign]
