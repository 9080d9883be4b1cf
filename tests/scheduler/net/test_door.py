"""A port's door: dialers turned away dial again and get in; a flood of refusals is counted
exactly but logged at a bounded rate; the oldest waiting connection makes room."""

from __future__ import annotations

import logging
import socket
import struct

import pytest
import trio

from deltaflow.scheduler.net.door import BURST, Door
from deltaflow.scheduler.net.handshake import (
    HELLO_SIZE,
    PROOF_SIZE,
    Hello,
    TurnedAway,
    accept,
    dial,
    new_secret,
)

SECRET = new_secret()


def _reset(stream: trio.SocketStream) -> None:
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    stream.socket.close()


@pytest.mark.parametrize("when", ["before the hello", "before the proof"])
async def test_a_dialer_turned_away_dials_again_and_gets_in(when: str) -> None:
    """A listener resets the first two connections (before its hello, or after reading the
    dialer's proof and before its own), as a door making room does; the dialer dials again
    and authenticates on the third."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    port = listener.socket.getsockname()[1]
    seen: list[int] = []

    async def serve() -> None:
        for attempt in range(3):
            stream = await listener.accept()
            seen.append(attempt)
            if attempt < 2:
                if when == "before the proof":
                    await stream.send_all(Hello.fresh(0, b"plan").seal(SECRET))
                    got = b""
                    while len(got) < HELLO_SIZE + PROOF_SIZE:
                        got += await stream.receive_some()
                _reset(stream)
                continue
            secure, hello = await accept(stream, SECRET, Hello.fresh(0, b"plan"))
            assert hello.index == 1
            await secure.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        with trio.fail_after(10):
            secure, hello = await dial("127.0.0.1", port, SECRET, Hello.fresh(1, b"plan"))
        await secure.aclose()
    await listener.aclose()
    assert seen == [0, 1, 2]
    assert (hello.index, hello.context.rstrip(b"\0")) == (0, b"plan")


async def test_a_listener_that_turns_every_connection_away_is_named_in_time() -> None:
    """Turned away for all of its patience, the dialer fails saying so, not blaming the
    secret."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    port = listener.socket.getsockname()[1]

    async def serve() -> None:
        while True:
            _reset(await listener.accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        with trio.fail_after(10), pytest.raises(TurnedAway) as info:
            await dial("127.0.0.1", port, SECRET, Hello.fresh(1, b"plan"), patience=1.0)
        nursery.cancel_scope.cancel()
    await listener.aclose()
    assert "it turned the connection away" in str(info.value)
    assert "flooded" in str(info.value)
    assert "secret" not in str(info.value)


def test_a_flood_of_refusals_is_counted_exactly_and_logged_at_a_bounded_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "deltaflow")
    door = Door("peer 0", 4000)
    for i in range(10 * BURST):
        door.refuse(f"127.0.0.1:{i}", "not a deltaflow handshake")
    assert door.refused == 10 * BURST
    records = [r for r in caplog.records if r.name == "deltaflow"]
    assert len(records) == BURST
    assert records[0].getMessage() == (
        "peer 0 refused a connection from 127.0.0.1:0 to port 4000: not a deltaflow handshake"
    )


def test_the_oldest_waiting_connection_makes_room_and_is_closed() -> None:
    closed: list[int] = []
    door = Door("the stream driver", 4000, limit=3)
    scopes = [door.enter(lambda i=i: closed.append(i)) for i in range(5)]
    assert closed == [0, 1]
    assert [door.evicted(s) for s in scopes] == [True, True, False, False, False]
    assert door.pending == 3 and door.turned_away == 2
    door.leave(scopes[2])  # authenticated: it no longer counts, nor can it be turned away
    door.enter()
    assert closed == [0, 1] and door.pending == 3
    door.enter()
    assert closed == [0, 1, 3] and not door.evicted(scopes[2]) and door.evicted(scopes[3])
