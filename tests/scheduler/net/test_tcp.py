"""Frames over a :class:`~deltaflow.scheduler.net.tcp.Link`: whatever way the bytes arrive (many
frames in one read, one frame over many reads, a frame too big for the read buffer, raw
numpy buffers out of band), over a plain socket or TLS, the receiver gets every frame whole,
in order, once. A header announcing more than a link accepts, or bytes that are no frame,
end the connection with a :class:`~deltaflow.scheduler.net.tcp.FrameError` at once: never an
allocation of what they claim, never a wait for it."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import given, settings, strategies as st
from tests.attacks import make_tls

from deltaflow.operators.base import RunsBatch, UpdateBatch
from deltaflow.scheduler.net import tcp
from deltaflow.scheduler.net.tcp import (
    MAX_BUFFERS,
    MAX_FRAME,
    PART,
    FrameError,
    Link,
    TcpTransport,
    _frame_head,
    encode,
)
from deltaflow.scheduler.net.tls import TLS


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLS:
    return make_tls(tmp_path_factory.mktemp("tls"))


@contextlib.asynccontextmanager
async def linked(tls: TLS | None = None) -> AsyncIterator[tuple[Link, Link]]:
    """Two ends of one stream (over TLS with ``tls``), closed on leaving."""
    a, b = socket.socketpair()
    streams: list[Any] = [trio.SocketStream(trio.socket.from_stdlib_socket(s)) for s in (a, b)]
    if tls is not None:
        streams = [
            trio.SSLStream(streams[0], tls.context(server=False)),
            trio.SSLStream(streams[1], tls.context(server=True), server_side=True),
        ]
        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(stream.do_handshake)
    ends = (Link(streams[0], 1), Link(streams[1], 0))
    try:
        yield ends
    finally:
        for end in ends:
            await trio.aclose_forcefully(end.stream)


secure = pytest.mark.parametrize("over_tls", [False, True], ids=["plain", "tls"])


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


@secure
async def test_single_frames_and_queued_messages_keep_their_order(over_tls: bool, tls: TLS) -> None:
    async with (
        linked(tls if over_tls else None) as (sender, receiver),
        trio.open_nursery() as nursery,
    ):
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


@secure
async def test_raw_buffers_cross_out_of_band_and_stay_usable(over_tls: bool, tls: TLS) -> None:
    column = np.arange(1_000_000, dtype=np.int64)
    async with (
        linked(tls if over_tls else None) as (sender, receiver),
        trio.open_nursery() as nursery,
    ):
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


@secure
async def test_a_closed_stream_ends_receiving_with_eof(over_tls: bool, tls: TLS) -> None:
    async with linked(tls if over_tls else None) as (sender, receiver):
        sender.queue(("last",))
        sender.flush_now()  # writes a plain socket at once; TLS writes in drain
        await sender.drain()
        await sender.aclose()
        assert await receiver.receive_many() == [("last",)]
        with pytest.raises(EOFError):
            await receiver.receive_many()


class _Sink:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        self.got.append((node, port, time, payload))


def _runs_of(n: int) -> RunsBatch:
    """``n`` updates in runs at three times, the last run long enough to span parts."""
    return RunsBatch([4, 2, 9], [3, 5, n - 8], [(i, -i) for i in range(n)], [1] * n)


@secure
@pytest.mark.parametrize("runs", [False, True], ids=["updates", "runs"])
async def test_a_batch_longer_than_a_part_crosses_whole(
    over_tls: bool, tls: TLS, runs: bool
) -> None:
    """The transport cuts a long batch (or a multi-time one) into parts; the receiving
    worker gets it whole, each run at its time."""
    sink = _Sink()
    n = 2 * PART + 5
    batch: Any = _runs_of(n) if runs else UpdateBatch([(i, -i) for i in range(n)], [1] * n)
    ends = linked(tls if over_tls else None)
    async with ends as (a, b), trio.open_nursery() as nursery:
        one = TcpTransport(0, 1, {1: a}, lambda exc: None)
        two = TcpTransport(1, 1, {0: b}, lambda exc: None)
        two.attach([sink])  # type: ignore[list-item]
        put, kinds = a.put, []

        def spy(message: Any) -> None:
            kinds.append(message[0])
            put(message)

        a.put = spy  # type: ignore[method-assign]
        one.send_data(0, 1, 3, 0, 7, batch)
        assert kinds == ["part", "part", "d"]
        a.close_after_queued()
        nursery.start_soon(a.send_loop)
        while not sink.got:
            two._deliver(b, await b.receive_many())
    assert sink.got == [(3, 0, 7, batch)]


@settings(max_examples=300, deadline=None)
@given(head=st.binary(min_size=12, max_size=64))
def test_any_header_is_refused_or_bounded(head: bytes) -> None:
    """Whatever the first bytes on a link, its reading of them never announces more than a
    link accepts: a header is incomplete, within the bounds, or a FrameError."""
    try:
        parsed = _frame_head(bytearray(head))
    except FrameError:
        return
    if parsed is not None:
        _, size, lengths = parsed
        assert size + sum(lengths) <= MAX_FRAME and len(lengths) <= MAX_BUFFERS


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=2000))
def test_random_bytes_end_a_link_with_an_error_not_a_hang(data: bytes) -> None:
    """Random bytes, then the end of the stream: the receiver raises FrameError or EOFError."""

    async def main() -> None:
        async with linked() as (sender, receiver):
            await sender.stream.send_all(data)
            await sender.aclose()
            with trio.fail_after(5), pytest.raises((FrameError, EOFError)):
                while True:
                    await receiver.receive_many()

    trio.run(main)


@pytest.mark.parametrize(
    "head",
    [b"GET / HTTP/1.1\r\n", struct.pack("<QI", 1 << 62, 0), struct.pack("<QI", 10, 1 << 20)],
    ids=["http", "length", "buffers"],
)
async def test_an_absurd_header_fails_at_once_with_the_connection_open(head: bytes) -> None:
    """No wait for the bytes announced: the header alone is refused."""
    async with linked() as (sender, receiver):
        await sender.stream.send_all(head)
        with trio.fail_after(2), pytest.raises(FrameError, match="frame header announces"):
            await receiver.receive_many()


async def test_buffers_announcing_too_much_are_refused() -> None:
    """A small pickle whose raw buffers together exceed the bound."""
    head = struct.pack("<QI", 10, 2) + struct.pack("<2Q", MAX_FRAME, 1)
    async with linked() as (sender, receiver):
        await sender.stream.send_all(head)
        with trio.fail_after(2), pytest.raises(FrameError):
            await receiver.receive_many()


async def test_a_long_queue_leaves_as_several_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages queued together that would make one frame longer than SPLIT_FRAME leave as
    several frames, each under it, and arrive whole and in order."""
    monkeypatch.setattr(tcp, "SPLIT_FRAME", 2000)
    messages = [("m", i, bytes(300)) for i in range(20)]
    pieces = tcp._pieces(messages)
    wire = bytearray(b"".join(bytes(p) for p in pieces))
    frames = 0
    while wire:
        head = _frame_head(wire)
        assert head is not None
        start, size, lengths = head
        assert size + sum(lengths) <= 2000
        del wire[: start + size + sum(lengths)]
        frames += 1
    assert frames > 1
    async with linked() as (sender, receiver), trio.open_nursery() as nursery:
        for m in messages:
            sender.queue(m)
        sender.close_after_queued()
        nursery.start_soon(sender.send_loop)
        got: list[Any] = []
        while len(got) < len(messages):
            got += await receiver.receive_many()
    assert got == messages


async def test_a_frame_that_is_no_pickle_is_a_frame_error() -> None:
    body = b"\x80\x05not a pickle at all"
    async with linked() as (sender, receiver):
        await sender.stream.send_all(struct.pack("<QI", len(body), 0) + body)
        with pytest.raises(FrameError, match="cannot be read"):
            await receiver.receive_many()
