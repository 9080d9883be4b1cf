"""Rendezvous: processes that will run one dataflow find each other and connect a full mesh.

Each process (a *peer*) binds a listening port, publishes its ``host:port`` and learns every
peer's address, in peer order, from a rendezvous it is given: the parent job for local
worker processes, one ``allGather`` of a Spark barrier stage for the Spark adapter. Peer ``i``
then dials every peer ``j < i`` and accepts a connection from every ``j > i``.

Every connection is authenticated before anything on it is decoded
(:mod:`deltaflow.scheduler.net.handshake`): both ends prove they hold the job's secret, and say
which peer they are and which dataflow they run (a digest of the plan), so peers running
different pipelines fail at once, naming each other, instead of exchanging nonsense. A
connection that fails the exchange (a stranger, a port scanner, a peer of another job) is
closed and logged at ``WARNING``, and the mesh waits on for its own peers; each connection
is handled apart, with its own deadline, so none can hold up the others, and a connection
claiming a peer already connected is refused. The listening port closes once every peer is
in. With ``tls``, each connection runs TLS first (:mod:`deltaflow.scheduler.net.tls`).

    >>> import trio
    >>> from deltaflow.scheduler.net.handshake import new_secret
    >>> secret = new_secret()
    >>> async def two_peers():
    ...     addresses = {}
    ...     async def peer(i):
    ...         async def rendezvous(address):
    ...             addresses[i] = address
    ...             while len(addresses) < 2:
    ...                 await trio.sleep(0.01)
    ...             return [addresses[0], addresses[1]]
    ...         links = await connect_mesh(i, 2, rendezvous, "same-plan", secret=secret)
    ...         for link in links.values():
    ...             await link.aclose()
    ...         return sorted(links)
    ...     async with trio.open_nursery() as n:
    ...         n.start_soon(peer, 0)
    ...         n.start_soon(peer, 1)
    >>> trio.run(two_peers)
"""

from __future__ import annotations

import functools
import hashlib
import ssl
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from ...errors import PeerLostError
from .door import Door, accept_forever
from .handshake import (
    HANDSHAKE_TIMEOUT_S,
    REFUSED as _REFUSED,
    HandshakeError,
    Hello,
    TurnedAway as _TurnedAway,
    authenticate,
    check_secret,
    dial as _dial,
    reason as _reason,
    secured as _secured,
)
from .tcp import Link

if sys.version_info < (3, 11):  # pragma: no cover - trio brings the backport there
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from ..local.plan import Plan
    from .tls import TLS

__all__ = ["CONNECT_TIMEOUT_S", "connect_mesh", "first_error", "plan_digest"]

#: Seconds a peer waits, once the rendezvous has answered, for every other peer to connect.
CONNECT_TIMEOUT_S = 60.0

Rendezvous = Callable[[str], Awaitable[Sequence[str]]]


def plan_digest(plan: Plan, workers: int) -> str:
    """A digest of what every peer must agree on: the physical graph and the worker count.

    Operator names carry the user functions' ``module.qualname:line``, so two pipelines that
    differ in any operator or wiring differ here.
    """
    h = hashlib.sha256()
    h.update(f"workers={workers};".encode())
    for node in plan.nodes:
        edges = [[(e.node, e.port) for e in port] for port in node.inputs]
        h.update(repr((node.name, edges, node.outputs, node.depth)).encode())
    return h.hexdigest()[:16]


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error of a (nested) group: what one failed connection raised."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _address_of(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "an unknown address"
    return f"{host}:{port}"


async def connect_mesh(
    index: int,
    peers: int,
    rendezvous: Rendezvous,
    digest: str,
    *,
    secret: bytes,
    host: str = "127.0.0.1",
    tls: TLS | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    door: Door | None = None,
) -> dict[int, Link]:
    """Bind ``host:0``, rendezvous, and return an authenticated :class:`Link` to every other
    peer.

    ``connect_timeout`` bounds the wait for the other peers once the rendezvous has
    answered; each connection also has
    :data:`~deltaflow.scheduler.net.handshake.HANDSHAKE_TIMEOUT_S` to complete its exchange.
    ``door`` (:class:`~deltaflow.scheduler.net.door.Door`) counts what the listener refused and
    turned away; a fresh one by default.

    Raises:
        ValueError: a peer runs another dataflow (its digest differs).
        PeerLostError: a peer did not connect within ``connect_timeout`` (naming it and what
            was refused meanwhile), or the peer at an address the rendezvous gave could not
            be reached or failed the exchange.
    """
    secret = check_secret(secret)
    listener = await _listen(host)
    port = listener.socket.getsockname()[1]
    if door is None:
        door = Door(f"peer {index}", port)
    else:
        door.who, door.port = f"peer {index}", port
    server_tls = tls.context(server=True) if tls is not None else None
    client_tls = tls.context(server=False) if tls is not None else None
    mesh = _Mesh(index, peers, digest, secret, server_tls, client_tls, listener, door)
    try:
        addresses = list(await rendezvous(f"{host}:{port}"))
        if len(addresses) != peers:
            msg = f"rendezvous returned {len(addresses)} addresses for {peers} peers"
            raise ValueError(msg)
        await mesh.connect(addresses, connect_timeout)
    except BaseException:
        for link in mesh.links.values():
            await trio.aclose_forcefully(link.stream)
        raise
    finally:
        await listener.aclose()
    return mesh.links


async def _listen(host: str) -> trio.SocketListener:
    """A listener on a free port of ``host`` (one: the others opened are closed)."""
    listeners = await trio.open_tcp_listeners(0, host=host)
    for extra in listeners[1:]:
        await extra.aclose()
    return listeners[0]


@attrs.define(eq=False)
class _Mesh:
    """One peer's connections being made: it dials the peers below it and greets those
    above it on ``listener``; ``links`` holds those made so far, by peer."""

    index: int
    peers: int
    digest: str
    secret: bytes
    #: The TLS contexts of accepted and dialed connections (``None``: no TLS).
    server_tls: ssl.SSLContext | None
    client_tls: ssl.SSLContext | None
    listener: trio.SocketListener
    door: Door
    links: dict[int, Link] = attrs.field(factory=dict)
    #: What the listener refused, for the error when a peer does not connect in time.
    refused: list[str] = attrs.field(factory=list)
    #: Cancelled once every peer above this one is in: stop accepting, drop the strangers.
    done: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    addresses: list[str] = attrs.field(factory=list)

    @property
    def expected(self) -> set[int]:
        """The peers that dial this one."""
        return set(range(self.index + 1, self.peers))

    def hello(self) -> Hello:
        """What this peer says in each exchange: its index and its dataflow's digest."""
        return Hello.fresh(self.index, self.digest.encode())

    async def connect(self, addresses: list[str], connect_timeout: float) -> None:
        """Dial and greet every other peer at ``addresses`` (the rendezvous' answer).

        Raises:
            PeerLostError: a peer not connected within ``connect_timeout``, or one that failed.
        """
        self.addresses = addresses
        try:
            with trio.move_on_after(connect_timeout):
                async with trio.open_nursery() as nursery:
                    for j in range(self.index):
                        nursery.start_soon(self.dial, j)
                    if self.expected:
                        nursery.start_soon(self.accept)
        except BaseExceptionGroup as group:
            raise first_error(group) from None
        missing = sorted(set(range(self.peers)) - self.links.keys() - {self.index})
        if missing:
            names = ", ".join(f"{j} at {addresses[j]}" for j in missing)
            refused = self.refused
            what = f"; refused meanwhile: {self.door.summary(refused)}" if refused else ""
            late = f"did not connect within {connect_timeout} s{what}"
            msg = f"peer {self.index}: peer(s) {names} {late}"
            raise PeerLostError(msg)

    def check(self, other: int, hello: Hello) -> None:
        """Raise ``ValueError`` if peer ``other`` runs another dataflow."""
        other_digest = hello.context.rstrip(b"\0").decode(errors="replace")
        if other_digest != self.digest:
            msg = (
                f"peer {self.index} runs dataflow {self.digest} but peer {other} runs "
                f"{other_digest}: every peer must run the same pipeline and worker count"
            )
            raise ValueError(msg)

    async def dial(self, j: int) -> None:
        """Connect to peer ``j`` (below this one) and authenticate it."""
        index, address = self.index, self.addresses[j]
        host_j, port_j = _split_address(address)
        try:
            secure, hello = await _dial(host_j, port_j, self.secret, self.hello(), self.client_tls)
        except _TurnedAway as exc:
            msg = f"peer {index} could not authenticate peer {j} at {address}: {exc}"
            raise PeerLostError(msg) from exc
        except _REFUSED as exc:
            if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError):
                # dial() lets only a failure to connect out as a bare OSError
                msg = f"peer {index} could not reach peer {j} at {address}: {exc}"
                raise PeerLostError(msg) from exc
            msg = (
                f"peer {index} could not authenticate peer {j} at {address}: "
                f"{_reason(exc)} (do all peers hold the same secret?)"
            )
            raise PeerLostError(msg) from exc
        if hello.index != j:
            await trio.aclose_forcefully(secure)
            wrong = HandshakeError(f"it says it is peer {hello.index}")
            msg = f"peer {index} could not authenticate peer {j} at {address}: {wrong}"
            raise PeerLostError(msg) from wrong
        self.links[j] = Link(secure, j)
        self.check(j, hello)

    async def accept(self) -> None:
        """Greet every connection, each apart, until every peer above this one is in."""
        with self.done:
            async with trio.open_nursery() as greeting:
                await accept_forever(self.listener, self.door, self.greet, greeting)

    async def greet(self, stream: trio.SocketStream, scope: trio.CancelScope) -> None:
        """Authenticate one connection as a peer above this one, or refuse it."""
        door, who = self.door, _address_of(stream)
        try:
            hello, secure = await self._authenticate(stream, scope, who)
            if hello.index not in self.expected:
                msg = f"it claims to be peer {hello.index}, which does not dial peer {self.index}"
                raise HandshakeError(msg)
            if hello.index in self.links:
                msg = f"it claims to be peer {hello.index}, which is connected already"
                raise HandshakeError(msg)
        except _Evicted:
            door.forget(scope)
            await trio.aclose_forcefully(stream)
            return
        except _REFUSED as exc:
            if door.evicted(scope):  # closed by the door: counted and logged already
                door.forget(scope)
            else:
                self.refused.append(f"{who} ({_reason(exc)})")
                door.refuse(who, _reason(exc))
            await trio.aclose_forcefully(stream)
            return
        except BaseException:
            door.forget(scope)
            await trio.aclose_forcefully(stream)
            raise
        self.links[hello.index] = Link(secure, hello.index)
        self.check(hello.index, hello)
        if self.expected <= self.links.keys():
            self.done.cancel()  # every peer is in: stop accepting, drop the strangers

    async def _authenticate(
        self, stream: trio.SocketStream, scope: trio.CancelScope, who: str
    ) -> tuple[Hello, trio.abc.Stream]:
        """The handshake of one accepted connection, within its own deadline; raises
        ``_Evicted`` when its door turned it away meanwhile."""
        door = self.door
        try:
            with scope, trio.fail_after(HANDSHAKE_TIMEOUT_S):
                secure = await _secured(stream, self.server_tls, server=True)
                hello = await authenticate(
                    secure,
                    self.secret,
                    self.hello(),
                    dialer=False,
                    proved=functools.partial(door.leave, scope),
                )
        except trio.Cancelled:
            if self.done.cancel_called:
                door.refuse(who, "it had not authenticated when every peer was in")
            raise
        finally:
            door.leave(scope)
        if door.evicted(scope):
            raise _Evicted
        return hello, secure


class _Evicted(Exception):
    """The door turned the connection away (counted and logged already)."""
