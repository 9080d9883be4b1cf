"""The stream driver's server for its workers: who may connect, and their rendezvous.

Each worker of a :func:`~deltaflow.adapters.spark.stream` connects back to a small TCP server
on the driver. :class:`WorkerServer` admits only connections that prove they hold the
secret the driver made for the stream (:mod:`deltaflow.scheduler.net.handshake`), each
authenticated in a thread of its own with its own deadline, so a stranger (silent, or
sending anything) holds up nothing: it is refused and logged by its door, and those still
pending when every worker is in are closed with the server, which then stops listening.

It is also the workers' rendezvous: each says where its mesh listens and is told where
every other's does (Spark's ``allGather`` would cost them a second: its JVM side polls each
second), then says where its own port for the micro-batches' tasks is, the time it resumed
at and when it started.

    server = WorkerServer(socket.create_server((host, 0)), peers, security, door)
    workers = server.admit(timeout, job_over)   # job_over() raises once the job has ended
    workers.links[0]                           # worker 0's connection
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
import time
from collections.abc import Callable

import attrs
import trio

from ...scheduler.net.door import Door, reset
from ...scheduler.net.handshake import (
    HANDSHAKE_TIMEOUT_S,
    HandshakeError,
    Hello,
    authenticate_socket,
)
from ...scheduler.net.tcp import FrameError
from ._batch import Security
from ._stream_tasks import DRIVER, receive, send

__all__ = ["Connected", "RendezvousError", "WorkerServer", "shut"]


def shut(sock: socket.socket) -> None:
    """End a connection still authenticating (its thread then closes the socket)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


@attrs.frozen
class Connected:
    """Every worker in, by index: its connection, the ``host:port`` where the micro-batches'
    tasks reach it, the time it resumed at (``None``: afresh), and the wall-clock times its
    task began and its mesh was up."""

    links: list[socket.socket]
    addresses: list[str]
    resumed: list[int | None]
    started: list[tuple[float, float]]


class RendezvousError(Exception):
    """The workers, all connected, did not open their mesh (a connection failed); ``links``
    are their connections, for the stream to close."""

    def __init__(self, message: str, links: list[socket.socket]) -> None:
        super().__init__(message)
        self.links = links


@attrs.define(eq=False)
class WorkerServer:
    """The driver's server for ``peers`` workers: admits them (:meth:`admit`), then closes.

    ``door`` counts and logs what it refuses and turns away (its ``port`` is set here).
    """

    server: socket.socket
    peers: int
    security: Security
    door: Door
    _links: dict[int, socket.socket] = attrs.field(factory=dict)
    _meshes: dict[int, str] = attrs.field(factory=dict)
    #: Connections still authenticating (closed once every worker is in).
    _pending: set[socket.socket] = attrs.field(factory=set)
    _arrived: threading.Condition = attrs.field(factory=threading.Condition)
    _refused: list[str] = attrs.field(factory=list)

    def admit(self, timeout: float, job_over: Callable[[], None]) -> Connected:
        """Wait for every worker to connect and authenticate, be their rendezvous, and wait
        for each to say its port and resumed time; ``job_over()`` raises once the workers'
        job has ended (checked while waiting).

        Raises:
            TimeoutError: not every worker connected within ``timeout`` (naming them).
            RendezvousError: the workers did not open their mesh.
        """
        deadline = time.monotonic() + timeout
        self.door.port = self.server.getsockname()[1]
        try:
            self._serve(deadline, timeout, job_over)
        finally:
            # Every worker is in (or the start failed): nobody else may connect, and the
            # connections still authenticating are strangers.
            self.server.close()
            with self._arrived:
                strangers = list(self._pending)
            for sock in strangers:
                shut(sock)
        return self._rendezvous(deadline)

    def _serve(self, deadline: float, timeout: float, job_over: Callable[[], None]) -> None:
        """Accept connections, each greeted in a thread of its own, until every worker is
        in; raise ``TimeoutError`` past ``deadline``."""
        tls = self.security.tls
        context = tls.context(server=True) if tls is not None else None
        self.server.settimeout(0.2)
        while True:
            with self._arrived:
                if len(self._links) == self.peers:
                    return
            job_over()
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.peers)) - self._links.keys())
                refused = self._refused
                what = f"; refused meanwhile: {self.door.summary(refused)}" if refused else ""
                msg = f"workers {missing} did not connect within {timeout} s{what}"
                raise TimeoutError(msg)
            try:
                sock, address = self.server.accept()
            except TimeoutError:
                continue
            except OSError as exc:  # out of file descriptors...: serve on
                # (at least a moment: a socket turned away closes in its own thread)
                time.sleep(max(self.door.accept_failed(exc), 0.01))
                continue
            with self._arrived:
                self._pending.add(sock)
            who = f"{address[0]}:{address[1]}"
            scope = self.door.enter(functools.partial(reset, sock))
            args = (sock, who, scope, context, timeout)
            threading.Thread(target=self._greet, args=args, daemon=True).start()

    def _greet(
        self,
        sock: socket.socket,
        who: str,
        scope: trio.CancelScope,
        context: ssl.SSLContext | None,
        timeout: float,
    ) -> None:
        """Authenticate one connection and take its mesh's address, or refuse it."""
        door = self.door
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            if context is not None:
                sock = context.wrap_socket(sock, server_side=True)
                with self._arrived:
                    self._pending.add(sock)
            hello = authenticate_socket(
                sock,
                self.security.secret,
                Hello.fresh(0, DRIVER),
                dialer=False,
                proved=functools.partial(door.leave, scope),
            )
            if hello.context.rstrip(b"\0") != DRIVER:
                msg = "it is not a worker of a deltaflow stream"
                raise HandshakeError(msg)
            # Authenticated: what it says may be decoded.
            door.leave(scope)
            # A worker says where its mesh listens once its pipeline is built (its state
            # loaded from a checkpoint): it has proved the secret, so it gets the time the
            # workers have to start, not a handshake's.
            sock.settimeout(timeout)
            _, mesh = receive(sock)
            with self._arrived:
                if not 0 <= hello.index < self.peers or hello.index in self._links:
                    msg = f"it claims to be worker {hello.index}, which is connected already"
                    raise HandshakeError(msg)
                self._links[hello.index] = sock
                self._meshes[hello.index] = str(mesh)
                self._pending.discard(sock)
                self._arrived.notify_all()
        except (HandshakeError, OSError, ValueError, EOFError, FrameError) as exc:
            door.leave(scope)
            reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
            with self._arrived:
                self._pending.discard(sock)
            if door.evicted(scope):
                door.forget(scope)  # turned away: counted and logged already
            else:
                with self._arrived:
                    self._refused.append(f"{who} ({reason})")
                door.refuse(who, reason)
            sock.close()
            return
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _rendezvous(self, deadline: float) -> Connected:
        """Tell every worker where each mesh listens (in index order); take what each says
        once its mesh is up."""
        links = [self._links[i] for i in range(self.peers)]
        everyone = [self._meshes[i] for i in range(self.peers)]
        addresses: list[str] = []
        resumed: list[int | None] = []
        started: list[tuple[float, float]] = []
        try:
            for link in links:
                send(link, ("peers", everyone))
            for link in links:
                link.settimeout(max(deadline - time.monotonic(), 1.0))
                _, address, resumed_at, (began, meshed) = receive(link)
                link.settimeout(None)
                addresses.append(str(address))
                resumed.append(None if resumed_at is None else int(resumed_at))
                started.append((float(began), float(meshed)))
        except (OSError, EOFError, FrameError) as exc:
            msg = f"the workers did not open their mesh ({exc})"
            raise RendezvousError(msg, links) from exc
        return Connected(links, addresses, resumed, started)
