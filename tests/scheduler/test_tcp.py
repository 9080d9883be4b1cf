"""Frames over a :class:`~deltaflow.scheduler.tcp.Link`: whatever way the bytes arrive (many
frames in one read, one frame over many reads, a frame too big for the read buffer, raw
numpy buffers out of band), the receiver gets every frame whole, in order, once."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import given, settings, strategies as st

from deltaflow.operators.base import UpdateBatch
from deltaflow.scheduler.tcp import PART, Link, TcpTransport, encode


@contextlib.asynccontextmanager
async def linked() -> AsyncIterator[tuple[Link, Link]]:
    """Two ends of one stream, closed on leaving."""
    a, b = socket.socketpair()
    ends = (
        Link(trio.SocketStream(trio.socket.from_stdlib_socket(a)), 1),
        Link(trio.SocketStream(trio.socket.from_stdlib_socket(b)), 0),
    )
    try:
        yield ends
    finally:
        for end in ends:
            await trio.aclose_forcefully(end.stream)


def _frame(size: int, tag: int) -> list[Any]:
    return [("m", tag, bytes(size)), ("n", tag)]


frame_sizes = st.lists(st.sampled_from([0, 10, 1001, 70_003, 300_007]), min_size=1, max_size=8)


@settings(max_examples=20, deadline=None)
@given(sizes=frame_sizes, chunk=st.sampled_from([5, 997, 65_537, 1 << 20]))
def test_frames_arrive_whole_and_in_order_however_the_bytes_are_cut(
    sizes: list[int], chunk: int
) -> None:
    """The sender's bytes go out in pieces of ``chunk`` with pauses between them."""

    async def main() -> list[Any]:
        wire = b"".join(
            bytes(p) for tag, size in enumerate(sizes) for p in encode(_frame(size, tag))
        )
        got: list[Any] = []
        async with linked() as (sender, receiver), trio.open_nursery() as nursery:

            async def send() -> None:
                # Small pieces only at first (a header cut anywhere), then bigger ones.
                lo = 0
                while lo < len(wire):
                    step = chunk if lo < 20_000 else max(chunk, 65_536)
                    await sender.stream.send_all(wire[lo : lo + step])
                    lo += step
                    if lo // step % 3 == 0:
                        await trio.lowlevel.checkpoint()

            nursery.start_soon(send)
            while len(got) < 2 * len(sizes):
                got += await receiver.receive_many()
        return got

    got = trio.run(main)
    assert got == [m for tag, size in enumerate(sizes) for m in _frame(size, tag)]


async def test_single_frames_and_queued_messages_keep_their_order() -> None:
    async with linked() as (sender, receiver), trio.open_nursery() as nursery:
        await sender.send_frame(("hello", 0, "digest"))
        for i in range(50):
            sender.queue(("x", i))
            if i % 7 == 0:
                sender.flush_now()
        sender.close_after_queued()
        nursery.start_soon(sender.send_loop)
        assert await receiver.receive() == ("hello", 0, "digest")
        got: list[Any] = []
        while len(got) < 50:
            got += await receiver.receive_many()
    assert got == [("x", i) for i in range(50)]


async def test_raw_buffers_cross_out_of_band_and_stay_usable() -> None:
    column = np.arange(1_000_000, dtype=np.int64)
    async with linked() as (sender, receiver), trio.open_nursery() as nursery:
        sender.queue(("a", column, np.ones(3)))
        sender.queue(("b", column[:5].copy()))
        sender.flush_now()
        sender.close_after_queued()
        nursery.start_soon(sender.send_loop)
        got: list[Any] = []
        while len(got) < 2:
            got += await receiver.receive_many()
    assert np.array_equal(got[0][1], column) and np.array_equal(got[0][2], np.ones(3))
    assert got[1][1].tolist() == [0, 1, 2, 3, 4]


async def test_a_closed_stream_ends_receiving_with_eof() -> None:
    async with linked() as (sender, receiver):
        sender.queue(("last",))
        sender.flush_now()
        await sender.aclose()
        assert await receiver.receive_many() == [("last",)]
        with pytest.raises(EOFError):
            await receiver.receive_many()


class _Sink:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        self.got.append((node, port, time, payload))


async def test_a_batch_longer_than_a_part_crosses_whole() -> None:
    """The transport cuts a long batch into parts; the receiving worker gets it whole."""
    sink = _Sink()
    n = 2 * PART + 5
    batch = UpdateBatch([(i, -i) for i in range(n)], [1] * n)
    async with linked() as (a, b), trio.open_nursery() as nursery:
        one = TcpTransport(0, 1, {1: a}, lambda exc: None)
        two = TcpTransport(1, 1, {0: b}, lambda exc: None)
        two.attach([sink])  # type: ignore[list-item]
        one.send_data(0, 1, 3, 0, 7, batch)
        a.close_after_queued()
        nursery.start_soon(a.send_loop)
        while not sink.got:
            two._deliver(b, await b.receive_many())
    assert sink.got == [(3, 0, 7, batch)]
