"""The handshake every connection opens with: two ends holding one secret authenticate each
other; nothing else does, whatever bytes it sends and wherever they are cut; a recorded
exchange replays nothing; the blocking and the trio versions speak the same protocol."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from deltaflow.scheduler.net.handshake import (
    DIAL,
    HELLO_SIZE,
    LISTEN,
    MAGIC,
    PROOF_SIZE,
    HandshakeError,
    Hello,
    authenticate,
    authenticate_socket,
    check_secret,
    new_secret,
    proof,
)

SECRET = new_secret()


async def _pair(
    dialer_secret: bytes, listener_secret: bytes
) -> tuple[Hello | BaseException, Hello | BaseException]:
    """Run both ends over an in-memory stream pair; each end's result or error."""
    d_stream, l_stream = trio.testing.memory_stream_pair()
    results: list[Any] = [None, None]

    async def end(i: int, stream: Any, secret: bytes, hello: Hello, dialer: bool) -> None:
        try:
            with trio.fail_after(5):
                results[i] = await authenticate(stream, secret, hello, dialer=dialer)
        except (HandshakeError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            results[i] = exc
            await stream.aclose()  # as a refusing end does: the other sees the end

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end, 0, d_stream, dialer_secret, Hello.fresh(1, b"plan"), True)
        nursery.start_soon(end, 1, l_stream, listener_secret, Hello.fresh(0, b"plan"), False)
    return results[0], results[1]


async def test_ends_holding_one_secret_learn_each_other() -> None:
    dialed, listened = await _pair(SECRET, SECRET)
    assert isinstance(dialed, Hello) and isinstance(listened, Hello)
    assert (dialed.index, listened.index) == (0, 1)
    assert dialed.context.rstrip(b"\0") == b"plan"


async def test_a_wrong_secret_is_refused_by_the_listener_before_it_proves_itself() -> None:
    dialed, listened = await _pair(new_secret(), SECRET)
    assert isinstance(listened, HandshakeError)
    assert "does not hold the job's secret" in str(listened)
    # The dialer never received the listener's proof: it saw the connection end.
    assert isinstance(dialed, HandshakeError)
    assert "closed after 0 of" in str(dialed)


async def test_a_listener_with_a_wrong_secret_is_refused_by_the_dialer() -> None:
    """A dialer that reached the wrong process (a stranger listening where a peer was) does
    not accept it: the listener's proof is checked too."""
    wrong = new_secret()
    d_stream, l_stream = trio.testing.memory_stream_pair()
    mine = Hello.fresh(1, b"plan")
    got: list[BaseException] = []

    async def fake_listener() -> None:
        # A listener that accepts any dialer and proves itself with another secret.
        hello = Hello.fresh(0, b"plan")
        await l_stream.send_all(hello.pack())
        data = b""
        while len(data) < HELLO_SIZE + PROOF_SIZE:
            data += await l_stream.receive_some()
        theirs = Hello.unpack(data[:HELLO_SIZE])
        await l_stream.send_all(proof(wrong, LISTEN, hello, theirs))

    async def dialer() -> None:
        with pytest.raises(HandshakeError) as info:
            await authenticate(d_stream, SECRET, mine, dialer=True)
        got.append(info.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake_listener)
        nursery.start_soon(dialer)
    assert "does not hold the job's secret" in str(got[0])


async def test_a_recorded_dialer_replays_nothing() -> None:
    """What a real dialer sent to one listener, replayed to another (a fresh nonce), fails."""
    recorded = bytearray()
    d_stream, l_stream = trio.testing.memory_stream_pair()

    async def listener() -> None:
        await authenticate(l_stream, SECRET, Hello.fresh(0, b"plan"), dialer=False)

    async def dialer() -> None:
        await authenticate(d_stream, SECRET, Hello.fresh(1, b"plan"), dialer=True)

    original = l_stream.receive_some

    async def record(max_bytes: int | None = None) -> bytes:
        chunk = await original(max_bytes)
        recorded.extend(chunk)
        return chunk

    l_stream.receive_some = record  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(listener)
        nursery.start_soon(dialer)
    assert len(recorded) == HELLO_SIZE + PROOF_SIZE

    replay, target = trio.testing.memory_stream_pair()
    await replay.send_all(bytes(recorded))
    with pytest.raises(HandshakeError, match="does not hold"):
        await authenticate(target, SECRET, Hello.fresh(0, b"plan"), dialer=False)


def test_a_proof_is_bound_to_its_role() -> None:
    """A listener's proof, reflected back as a dialer's, is refused (and the converse)."""
    a, b = Hello.fresh(0, b"x"), Hello.fresh(1, b"x")
    assert proof(SECRET, DIAL, a, b) != proof(SECRET, LISTEN, a, b)
    assert proof(SECRET, DIAL, a, b) != proof(SECRET, DIAL, b, a)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), start_with_magic=st.booleans())
def test_random_bytes_never_authenticate(data: bytes, start_with_magic: bool) -> None:
    """Whatever a stranger sends (then closing), the listener refuses it with a
    :class:`HandshakeError`, reading no more than the exchange's own bytes."""
    if start_with_magic:
        data = MAGIC + data

    async def main() -> None:
        stranger, listener = trio.testing.memory_stream_pair()
        await stranger.send_all(data)
        await stranger.send_eof()
        with pytest.raises(HandshakeError):
            await authenticate(listener, SECRET, Hello.fresh(0, b"p"), dialer=False)

    trio.run(main)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, HELLO_SIZE + PROOF_SIZE - 1))
def test_a_real_exchange_cut_at_any_byte_is_refused(cut: int) -> None:
    """A real dialer's bytes, cut after ``cut`` bytes (the connection then closed), never
    authenticate, and the listener does not wait past the end."""

    async def main() -> None:
        d_stream, relay_in = trio.testing.memory_stream_pair()
        relay_out, l_stream = trio.testing.memory_stream_pair()

        async def dialer() -> None:
            with pytest.raises((HandshakeError, trio.BrokenResourceError)):
                await authenticate(d_stream, SECRET, Hello.fresh(1, b"p"), dialer=True)

        async def relay() -> None:
            # The listener's hello to the dialer, then the dialer's first ``cut`` bytes.
            await relay_in.send_all(await relay_out.receive_some(HELLO_SIZE))
            sent = b""
            while len(sent) < cut:
                sent += await relay_in.receive_some(cut - len(sent))
            await relay_out.send_all(sent)
            await relay_out.aclose()
            await relay_in.aclose()

        async def listener() -> None:
            with pytest.raises(HandshakeError):
                with trio.fail_after(5):
                    await authenticate(l_stream, SECRET, Hello.fresh(0, b"p"), dialer=False)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listener)
            nursery.start_soon(relay)
            nursery.start_soon(dialer)

    trio.run(main)


def test_the_blocking_listener_speaks_the_same_protocol() -> None:
    """A trio dialer authenticates with the blocking listener the stream driver uses, and a
    trio dialer with another secret is refused by it."""
    for dialer_secret, ok in [(SECRET, True), (new_secret(), False)]:
        a, b = socket.socketpair()
        b.settimeout(5)
        outcome: list[Any] = []

        def listen(b: socket.socket = b, outcome: list[Any] = outcome) -> None:
            try:
                outcome.append(authenticate_socket(b, SECRET, Hello.fresh(0, b"s"), dialer=False))
            except HandshakeError as exc:
                outcome.append(exc)
            b.close()

        thread = threading.Thread(target=listen)
        thread.start()

        async def dial(a: socket.socket = a, secret: bytes = dialer_secret) -> Any:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
            try:
                return await authenticate(stream, secret, Hello.fresh(3, b"s"), dialer=True)
            except HandshakeError as exc:
                return exc
            finally:
                await stream.aclose()

        dialed = trio.run(dial)
        thread.join(10)
        assert isinstance(outcome[0], Hello) is ok and isinstance(dialed, Hello) is ok
        if ok:
            assert outcome[0].index == 3


def test_secrets_are_checked() -> None:
    with pytest.raises(TypeError, match="bytes or str, not int"):
        check_secret(1234)
    with pytest.raises(ValueError, match="at least 16 bytes, not 3"):
        check_secret("abc")
    assert check_secret("sixteen bytes ok") == b"sixteen bytes ok"
    assert new_secret() != new_secret()
