"""A mesh admits only its own peers: strangers on its ports during start-up (a pickle that
would create a marker file, garbage, a huge length, an HTTP request, silence) are refused and
logged, never decoded, and hold nothing up; a peer with another secret, or a second
connection claiming a connected peer, is refused; a peer that never comes is named when the
deadline passes; with TLS the same holds over encrypted connections.

The strangers connect at a moment the test controls: every peer has bound and published its
port, and none has been told the others' yet (the rendezvous waits for the test), so each
stranger is in the listening queue before any peer dials."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.attacks import ATTACKS, Stranger, make_tls, payload, split_address, strangers

from deltaflow.errors import PeerLostError
from deltaflow.scheduler.net.door import MAX_PENDING
from deltaflow.scheduler.net.handshake import (
    HANDSHAKE_TIMEOUT_S,
    HELLO_SIZE,
    MAGIC,
    Hello,
    authenticate,
    new_secret,
)
from deltaflow.scheduler.net.mesh import connect_mesh
from deltaflow.scheduler.net.tcp import Link
from deltaflow.scheduler.net.tls import TLS

SECRET = new_secret()

Hook = Callable[[dict[int, str]], Any]


class Rendezvous:
    """Hands every peer all addresses once each has published its own and ``hook(addresses)``
    (the test's strangers) has run; ``hold`` peers are released only by :meth:`release`."""

    def __init__(self, peers: int, hook: Hook | None = None, hold: set[int] | None = None):
        self.peers = peers
        self.hook = hook
        self.addresses: dict[int, str] = {}
        self.bound = trio.Event()
        self.go = trio.Event()
        self.held = trio.Event()
        self.hold = hold or set()

    def of(self, i: int) -> Callable[[str], Any]:
        async def rendezvous(address: str) -> list[str]:
            self.addresses[i] = address
            if len(self.addresses) == self.peers:
                if self.hook is not None:
                    self.hook(self.addresses)
                self.go.set()
            await self.go.wait()
            if i in self.hold:
                await self.held.wait()
            return [self.addresses[j] for j in range(self.peers)]

        return rendezvous

    def release(self) -> None:
        self.held.set()


async def _check_links(meshes: dict[int, dict[int, Link]]) -> None:
    """Every pair of peers exchanges a frame both ways over its links."""
    for i, links in meshes.items():
        for j, link in links.items():
            await link.send_frame([("from", i, "to", j)])
    for i, links in meshes.items():
        for j, link in links.items():
            with trio.fail_after(5):
                assert await link.receive() == [("from", j, "to", i)]


async def _close(meshes: dict[int, dict[int, Link]]) -> None:
    for links in meshes.values():
        for link in links.values():
            await trio.aclose_forcefully(link.stream)


async def _mesh(
    n: int,
    rendezvous: Rendezvous,
    *,
    secrets: dict[int, bytes] | None = None,
    tls: dict[int, TLS] | None = None,
    connect_timeout: float = 20,
) -> dict[int, dict[int, Link] | BaseException]:
    """Every peer's links, or the error it raised."""
    out: dict[int, Any] = {}

    async def peer(i: int) -> None:
        try:
            out[i] = await connect_mesh(
                i,
                n,
                rendezvous.of(i),
                "plan-a",
                secret=(secrets or {}).get(i, SECRET),
                tls=(tls or {}).get(i),
                connect_timeout=connect_timeout,
            )
        except (PeerLostError, ValueError) as exc:
            out[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(peer, i)
    return out


async def _mesh_beside(
    n: int, rendezvous: Rendezvous, beside: Callable[[], Awaitable[None]], meshes: dict[int, Any]
) -> None:
    """A mesh of ``n`` peers formed while ``beside`` runs (until it releases the rendezvous
    it holds): every peer's links, or the error it raised, go into ``meshes``."""

    async def mesh() -> None:
        meshes.update(await _mesh(n, rendezvous))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(beside)
        nursery.start_soon(mesh)


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "deltaflow" and r.levelno == logging.WARNING and "refused" in r.getMessage()
    ]


@pytest.mark.parametrize("attack", ATTACKS)
async def test_strangers_during_start_up_are_refused_and_hold_nothing_up(
    attack: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "marker"
    crowd: list[Stranger] = []

    def attack_all(addresses: dict[int, str]) -> None:
        for i in sorted(addresses):
            crowd.append(Stranger(split_address(addresses[i]), payload(attack, marker, "mesh")))

    caplog.set_level(logging.WARNING, "deltaflow")
    start = time.monotonic()
    meshes = await _mesh(3, Rendezvous(3, attack_all))
    elapsed = time.monotonic() - start
    try:
        assert all(isinstance(m, dict) for m in meshes.values()), meshes
        assert {i: sorted(m) for i, m in meshes.items()} == {0: [1, 2], 1: [0, 2], 2: [0, 1]}
        await _check_links(meshes)  # type: ignore[arg-type]
    finally:
        await _close(meshes)  # type: ignore[arg-type]
        for s in crowd:
            s.close()
    assert not marker.exists(), "a stranger's pickle was loaded"
    # Peers 0 and 1 accept connections (peer 2 dials only): each refused its stranger,
    # naming it and the port, while a silent one held nothing up.
    refusals = _refusals(caplog)
    for stranger in crowd[:2]:
        assert any(f"from {stranger.name} to port" in r for r in refusals), (refusals, crowd)
    assert elapsed < HANDSHAKE_TIMEOUT_S / 2


async def test_a_peer_with_another_secret_is_refused_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "deltaflow")
    meshes = await _mesh(2, Rendezvous(2), secrets={1: new_secret()}, connect_timeout=1)
    dialer, listener = meshes[1], meshes[0]
    assert isinstance(dialer, PeerLostError)
    assert "peer 1 could not authenticate peer 0 at 127.0.0.1:" in str(dialer)
    assert "same secret" in str(dialer)
    assert isinstance(listener, PeerLostError)
    assert "peer(s) 1 at 127.0.0.1:" in str(listener)
    assert "did not connect within 1 s; refused meanwhile" in str(listener)
    assert any("does not hold the job's secret" in r for r in _refusals(caplog))


async def test_a_second_connection_claiming_a_connected_peer_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Peers 0 and 1 connect; then a connection holding the secret and claiming to be peer 1
    reaches peer 0, which refuses it; then peer 2 comes and the mesh completes."""
    caplog.set_level(logging.WARNING, "deltaflow")
    rendezvous = Rendezvous(3, hold={2})
    meshes: dict[int, Any] = {}

    async def impostor() -> None:
        await rendezvous.go.wait()
        await trio.sleep(0.3)  # peer 1 has dialed peer 0 by now (peer 2 is held back)
        stream = await trio.open_tcp_stream(*split_address(rendezvous.addresses[0]))
        with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError, Exception)):
            hello = await authenticate(stream, SECRET, Hello.fresh(1, b"plan-a"), dialer=True)
            await stream.send_all(b"x")
            await stream.receive_some(1)
            assert hello is None  # never reached: peer 0 closes this connection
        await trio.aclose_forcefully(stream)
        rendezvous.release()

    await _mesh_beside(3, rendezvous, impostor, meshes)
    try:
        assert all(isinstance(m, dict) for m in meshes.values()), meshes
        await _check_links(meshes)
    finally:
        await _close(meshes)
    assert any("claims to be peer 1, which is connected already" in r for r in _refusals(caplog))


async def test_a_peer_that_never_connects_is_named_at_the_deadline() -> None:
    async def alone(address: str) -> list[str]:
        return [address, "127.0.0.1:9"]

    start = time.monotonic()
    with pytest.raises(PeerLostError, match=r"peer 0: peer\(s\) 1 at 127.0.0.1:9 did not connect"):
        await connect_mesh(0, 2, alone, "plan", secret=SECRET, connect_timeout=0.5)
    assert time.monotonic() - start < 5


async def test_peers_running_different_pipelines_fail_naming_each_other() -> None:
    rendezvous = Rendezvous(2)
    errors: list[BaseException] = []

    async def peer(i: int, digest: str) -> None:
        try:
            links = await connect_mesh(i, 2, rendezvous.of(i), digest, secret=SECRET)
            await _close({i: links})
        except ValueError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer, 0, "plan-a")
        nursery.start_soon(peer, 1, "plan-b")
    assert errors
    assert all("runs dataflow" in str(e) for e in errors)


async def test_tls_meshes_refuse_plain_strangers_and_peers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With TLS every peer connects (and exchanges frames) over TLS; a stranger sending a
    pickle in the clear is refused, and so is a peer without TLS."""
    caplog.set_level(logging.WARNING, "deltaflow")
    tls = make_tls(tmp_path)
    marker = tmp_path / "marker"
    with_tls = dict.fromkeys(range(3), tls)
    crowd: list[Any] = []

    def attack_all(addresses: dict[int, str]) -> None:
        crowd.append(
            strangers(
                [split_address(a) for a in addresses.values()], "pickle", marker, "mesh"
            ).__enter__()
        )

    meshes = await _mesh(3, Rendezvous(3, attack_all), tls=with_tls)
    try:
        assert all(isinstance(m, dict) for m in meshes.values()), meshes
        assert all(
            isinstance(link.stream, trio.SSLStream) for m in meshes.values() for link in m.values()
        )
        await _check_links(meshes)  # type: ignore[arg-type]
    finally:
        await _close(meshes)  # type: ignore[arg-type]
        for c in crowd:
            for s in c:
                s.close()
    assert not marker.exists()
    assert len(_refusals(caplog)) >= 2

    plain = await _mesh(2, Rendezvous(2), tls={0: tls}, connect_timeout=1)
    assert isinstance(plain[0], PeerLostError) and isinstance(plain[1], PeerLostError)


async def test_tls_files_that_are_missing_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot load the certificate and key from .*nowhere"):
        TLS(tmp_path / "nowhere.pem").context(server=True)


def _closed_by_the_other_end(stranger: Stranger) -> bool:
    """Whether the listener has closed ``stranger``'s connection (read without waiting: the
    hello, then the end of the stream; a connection still waiting has nothing more)."""
    stranger.sock.setblocking(False)
    try:
        while True:
            if not stranger.sock.recv(4096):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


async def test_silent_strangers_over_the_cap_are_turned_away_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``MAX_PENDING + 16`` silent strangers wait on peer 0's port before peer 1 dials: the 16
    oldest are closed at once (the rest wait for their deadline), each turned-away one is
    logged, and peer 1, dialing into the full door, still connects at once (the oldest
    stranger left makes room for it)."""
    caplog.set_level(logging.WARNING, "deltaflow")
    excess = 16
    crowd: list[Stranger] = []

    def flood(addresses: dict[int, str]) -> None:
        crowd.extend(Stranger(split_address(addresses[0]), b"") for _ in range(MAX_PENDING))
        crowd.extend(Stranger(split_address(addresses[0]), b"") for _ in range(excess))

    rendezvous = Rendezvous(2, flood, hold={1})
    meshes: dict[int, Any] = {}
    closed: list[bool] = []

    async def watch() -> None:
        await rendezvous.go.wait()
        # Until peer 0 has accepted every stranger (well before the waiting ones' deadline).
        give_up = trio.current_time() + HANDSHAKE_TIMEOUT_S / 2
        while True:
            await trio.sleep(0.2)
            closed[:] = [_closed_by_the_other_end(s) for s in crowd]
            if sum(closed) >= excess or trio.current_time() > give_up:
                break
        await trio.sleep(0.2)
        closed[:] = [_closed_by_the_other_end(s) for s in crowd]  # and no more than that
        rendezvous.release()

    start = time.monotonic()
    try:
        await _mesh_beside(2, rendezvous, watch, meshes)
        elapsed = time.monotonic() - start
        assert all(isinstance(m, dict) for m in meshes.values()), meshes
        await _check_links(meshes)
    finally:
        await _close(meshes)
        for s in crowd:
            s.close()
    # The oldest made room: the first `excess` strangers were closed, the others waited.
    assert closed == [True] * excess + [False] * MAX_PENDING, closed
    turned = [r for r in caplog.messages if "peer 0 turned away a connection to port" in r]
    assert len(turned) == excess + 1, turned  # and peer 1 made room for itself
    assert elapsed < HANDSHAKE_TIMEOUT_S / 2


async def test_a_listeners_hello_tells_a_stranger_nothing_of_the_plan() -> None:
    """What a stranger reads from a mesh port before it proves anything: a random nonce, and
    neither the plan's digest nor the peer's index in any form."""
    heard: list[bytes] = []
    rendezvous = Rendezvous(2, hold={1})
    meshes: dict[int, Any] = {}

    async def listen() -> None:
        await rendezvous.go.wait()
        stream = await trio.open_tcp_stream(*split_address(rendezvous.addresses[0]))
        data = b""
        with trio.fail_after(5):
            while len(data) < HELLO_SIZE:
                data += await stream.receive_some(HELLO_SIZE - len(data))
        heard.append(data)
        await trio.aclose_forcefully(stream)
        rendezvous.release()

    await _mesh_beside(2, rendezvous, listen, meshes)
    await _close(meshes)
    (hello,) = heard
    assert hello.startswith(MAGIC)
    assert b"plan-a" not in hello and b"plan" not in hello
    # The index (peer 0) and the context (a digest and its padding) are sealed: no run of
    # zero bytes where they would stand in the clear.
    assert b"\0\0\0\0" not in hello[len(MAGIC) + 32 :]
