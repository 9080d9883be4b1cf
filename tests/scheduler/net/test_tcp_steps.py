"""A worker's socket work over a :class:`~deltaflow.scheduler.net.tcp.TcpTransport`: what its
steps queue leaves in one write per peer when it yields (:meth:`TcpTransport.turn`,
:meth:`TcpTransport.rest`), data and progress batches together and in order; a resting worker
wakes on a frame and reads it itself; a frame is taken whole however its bytes are cut
across reads; and a peer that ends, mid-frame or after its last frames, is reported (its
frames first), never waited for."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from deltaflow.errors import PeerLostError
from deltaflow.operators.base import UpdateBatch
from deltaflow.scheduler.local.bell import Bell
from deltaflow.scheduler.net.tcp import Link, TcpTransport, _frame_head, decode, encode


class _Worker:
    """What a transport delivers to: mailboxes and inbox as lists, and the bell."""

    def __init__(self) -> None:
        self.bell = Bell()
        self.got: list[Any] = []

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        self.got.append(("d", node, port, time, list(payload.data)))
        self.bell.ring()

    def receive_progress(self, changes: list[Any]) -> None:
        self.got.append(("p", changes))
        self.bell.ring()


@contextlib.asynccontextmanager
async def pair() -> AsyncIterator[tuple[TcpTransport, TcpTransport, list[BaseException]]]:
    """Two processes of one worker each, over one plain stream: (process 0, process 1,
    the errors either was told of)."""
    a, b = socket.socketpair()
    links = [Link(trio.SocketStream(trio.socket.from_stdlib_socket(s)), 1 - i) for i, s in
             enumerate((a, b))]  # fmt: skip
    errors: list[BaseException] = []
    ends = (
        TcpTransport(0, 1, {1: links[0]}, errors.append),
        TcpTransport(1, 1, {0: links[1]}, errors.append),
    )
    for end in ends:
        end.attach([_Worker()])  # type: ignore[list-item]
    try:
        yield ends[0], ends[1], errors
    finally:
        for link in links:
            await trio.aclose_forcefully(link.stream)


def _raw(link: Link) -> bytes:
    """What has arrived on ``link``'s socket, read without waiting and left unparsed."""
    fd = link.stream.socket.fileno()  # type: ignore[attr-defined]  # non-blocking
    out = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 1 << 20):
            out += chunk
    return out


def _frames(wire: bytes) -> list[list[Any]]:
    """The frames ``wire`` holds, each decoded."""
    buf, frames = bytearray(wire), []
    while buf:
        head = _frame_head(buf)
        assert head is not None
        start, size, lengths = head
        end = start + size
        buffers = []
        for n in lengths:
            buffers.append(bytes(buf[end : end + n]))
            end += n
        frames.append(decode(bytes(buf[start : start + size]), buffers))
        del buf[:end]
    return frames


def _step(transport: TcpTransport, tag: int) -> None:
    """What one step of worker 0 sends: a message to worker 1, then its progress batch."""
    transport.send_data(0, 1, 3, 0, tag, UpdateBatch([tag], [1]))
    transport.broadcast_progress(0, [(False, 3, 0, tag, 1)])


async def test_a_slice_of_steps_leaves_in_one_write_per_peer() -> None:
    """Three steps' data and progress: nothing written until the worker yields, then one
    frame holding all of it in send order (each progress batch after the data it counts)."""
    async with pair() as (one, two, errors):
        for tag in range(3):
            _step(one, tag)
        other = two.links[0]
        assert _raw(other) == b""  # the peer is not woken step by step
        # The sender's own worker had each batch at once.
        assert [m[0] for m in one.workers[0].got] == ["p", "p", "p"]  # type: ignore[attr-defined]
        one.turn(one.workers[0])
        frames = _frames(_raw(other))
    assert len(frames) == 1
    assert [m[0] for m in frames[0]] == ["d", "p", "d", "p", "d", "p"]
    assert [m[5] for m in frames[0] if m[0] == "d"] == [0, 1, 2]
    assert not errors


async def test_a_resting_worker_wakes_on_a_frame_and_reads_it_itself() -> None:
    """No reading task: the worker resting on the socket is woken by the frame, delivers
    its data and progress, and returns; a ring wakes it too."""
    async with pair() as (one, two, errors):
        worker: Any = two.workers[0]
        woke: list[bool] = []

        async def rest() -> None:
            worker.bell.clear()
            woke.append(await two.rest(worker))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rest)
                await trio.testing.wait_all_tasks_blocked()
                assert not woke
                _step(one, 7)
                one.turn(one.workers[0])
        assert woke == [True]
        assert worker.got == [("d", 3, 0, 7, [7]), ("p", [(False, 3, 0, 7, 1)])]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(rest)
            await trio.testing.wait_all_tasks_blocked()
            worker.bell.ring()
        assert woke == [True, True]
    assert not errors


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 10, 1001, 70_003, 200_001]), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 60_000), min_size=1, max_size=40),
)
def test_a_poll_takes_whole_frames_however_the_bytes_are_cut(
    sizes: list[int], cuts: list[int]
) -> None:
    """The bytes of several frames (short ones and ones longer than a read) arrive in
    random pieces, a poll after each: every frame comes out once, whole, in order, and a
    poll never waits."""
    messages = [[("m", tag, bytes(size)), ("n", tag)] for tag, size in enumerate(sizes)]
    wire = b"".join(bytes(p) for m in messages for p in encode(m))

    async def main() -> list[Any]:
        a, b = socket.socketpair()
        receiver = Link(trio.SocketStream(trio.socket.from_stdlib_socket(b)), 0)
        got: list[Any] = []
        with a:
            lo, i = 0, 0
            while lo < len(wire):
                piece = wire[lo : lo + cuts[i % len(cuts)]]
                a.sendall(piece)
                lo += len(piece)
                i += 1
                got += receiver.poll()
            got += receiver.poll()
        await trio.aclose_forcefully(receiver.stream)
        return got

    assert trio.run(main) == [m for frame in messages for m in frame]


async def test_the_frames_before_the_end_come_first_then_the_end() -> None:
    """A peer's last frames and the end of its stream arrive in one read: the frames are
    delivered, the end is reported by the next read."""
    a, b = socket.socketpair()
    receiver = Link(trio.SocketStream(trio.socket.from_stdlib_socket(b)), 0)
    with a:
        a.sendall(b"".join(bytes(p) for p in encode([("d", 1)])))
        a.sendall(b"".join(bytes(p) for p in encode([("bye",)])))
    assert receiver.poll() == [("d", 1), ("bye",)]
    with pytest.raises(EOFError):
        receiver.poll()
    await trio.aclose_forcefully(receiver.stream)


async def test_a_peer_dying_mid_frame_is_reported_once_and_never_waited_for() -> None:
    """Half a frame, then the peer's process is gone: the resting worker is told at once
    (the job fails naming the peer's workers) and rests on its bell from then on."""
    async with pair() as (one, two, errors):
        worker: Any = two.workers[0]
        wire = b"".join(bytes(p) for p in encode([("d", 0, 0, 3, 0, 1, UpdateBatch([1], [1]))]))
        sock = one.links[1].stream.socket  # type: ignore[attr-defined]
        await sock.send(wire[: len(wire) // 2])
        sock.close()
        worker.bell.clear()
        with trio.fail_after(5):
            assert await two.rest(worker) is True
        assert len(errors) == 1 and isinstance(errors[0], PeerLostError)
        assert "lost the process of worker 0 (process 0)" in str(errors[0])
        assert worker.got == []
        two.turn(worker)  # the lost link is read no more: no second report
        with trio.move_on_after(0.05) as scope:
            await two.rest(worker)
        assert scope.cancelled_caught
    assert len(errors) == 1
