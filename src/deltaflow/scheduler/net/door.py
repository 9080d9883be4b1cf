"""The door of a listening port: who may wait to authenticate, and what a server logs of those
it turns away.

Every server of a job (the mesh's listener, a Spark stream's driver and its workers' data
ports) admits connections that have not yet proved they hold the job's secret, and each such
connection costs a file descriptor (and, on the stream's driver, a thread) until it proves
itself, fails, or reaches its deadline. A :class:`Door` bounds that cost and keeps the server
serving whatever strangers do:

- **At most** :data:`MAX_PENDING` connections wait to authenticate at once. A connection over
  that makes room by closing the *oldest* waiting one at once (counted as turned away): a
  peer's exchange takes a round trip, so the oldest is nearly always a stranger holding the
  door (silent, or sending a byte a minute), and a flood of silent strangers can neither
  hold every place until its deadline nor keep a peer out. A connection leaves the door as
  soon as the dialer's proof holds, before the listener proves itself: one the door turns
  away has never been told it is in. It is turned away with a reset (:func:`reset`), which a
  dialer tells from a refusal and answers by dialing again
  (:func:`~deltaflow.scheduler.net.handshake.dial`).
- **Accepting never fails the server.** ``accept()`` failing (``EMFILE``/``ENFILE``: the
  process or the system is out of file descriptors; ``ENOBUFS``, ``ENOMEM``; anything the
  system says) is transient: the server logs it and accepts again, at once when the door
  could turn its oldest waiting connection away (a descriptor freed), else after a wait that
  doubles up to a second (:meth:`Door.accept_failed`).
- **Everything is counted and logged at WARNING**, at most :data:`BURST` records per
  :data:`WINDOW_S` seconds per door; what is held back is counted and said with the next
  record, so a flood cannot flood the log.

A door is shared by a trio task and the threads of a blocking server alike (its counts are
kept under a lock).

    >>> door = Door("peer 0", port=4000, limit=2)
    >>> first, second = door.enter(), door.enter()
    >>> third = door.enter()  # over the limit: the oldest makes room
    >>> first.cancel_called, door.turned_away
    (True, 1)
    >>> door.leave(second); door.leave(third); door.pending
    0
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import logging
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable

import attrs
import trio

__all__ = ["BURST", "MAX_PENDING", "WINDOW_S", "Door", "accept_forever", "reset"]

_log = logging.getLogger("deltaflow")

#: The most connections one port lets wait to authenticate at once.
MAX_PENDING = 64
#: The most WARNING records one door logs per :data:`WINDOW_S` seconds.
BURST = 20
WINDOW_S = 10.0
#: The first and the longest wait after ``accept()`` failed.
BACKOFF_S = (0.01, 1.0)
#: ``SO_LINGER`` on, zero seconds: ``close()`` resets the connection.
_RESET = struct.pack("ii", 1, 0)
#: What ``accept()`` fails with when the process or the system is short of a resource.
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@attrs.define(eq=False, repr=False)
class Door:
    """The door of one listening port: ``who`` serves it (``"peer 0"``, ``"the stream
    driver"``) and on which ``port``; at most ``limit`` connections waiting to authenticate.

    Each waiting connection holds a :class:`trio.CancelScope` from :meth:`enter` until
    :meth:`leave`; to turn the connection away, the door cancels the scope (a trio server
    runs the exchange under it), calls the ``on_evict`` it was given (which resets the
    socket: what a blocking server relies on), and says so in :meth:`evicted`.
    """

    who: str
    port: int
    limit: int = MAX_PENDING
    #: Connections that failed the exchange (a stranger, a peer of another job).
    refused: int = 0
    #: Connections closed at once because :attr:`limit` others were waiting.
    turned_away: int = 0
    #: ``accept()`` calls that failed (out of file descriptors...).
    accept_errors: int = 0
    _waiting: collections.OrderedDict[trio.CancelScope, Callable[[], None] | None] = attrs.field(
        factory=collections.OrderedDict
    )
    _evicted: set[trio.CancelScope] = attrs.field(factory=set)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _window: float = 0.0
    _logged: int = 0
    _held_back: int = 0
    _wait: float = BACKOFF_S[0]

    @property
    def pending(self) -> int:
        """Connections waiting to authenticate now."""
        return len(self._waiting)

    def statistics(self) -> dict[str, int]:
        """What the door counted: ``refused``, ``turned_away``, ``accept_errors``."""
        return {
            "refused": self.refused,
            "turned_away": self.turned_away,
            "accept_errors": self.accept_errors,
        }

    def summary(self, refusals: list[str], shown: int = 5) -> str:
        """The first ``shown`` of ``refusals`` (for an error message), then how many more
        and what the door turned away.

        >>> Door("peer 0", 4000).summary(["a", "b", "c"], shown=2)
        'a; b (and 1 more)'
        """
        text = "; ".join(refusals[:shown])
        more = len(refusals) - shown
        if more > 0:
            text += f" (and {more} more)"
        if self.turned_away:
            text += f"; {self.turned_away} turned away (too many waiting to authenticate)"
        return text

    # -- waiting to authenticate ---------------------------------------------------------
    def enter(self, on_evict: Callable[[], None] | None = None) -> trio.CancelScope:
        """Let a connection just accepted wait to authenticate: the scope its exchange runs
        under. At :attr:`limit`, the oldest waiting connection is turned away first."""
        scope = trio.CancelScope()
        oldest: tuple[trio.CancelScope, Callable[[], None] | None] | None = None
        with self._lock:
            self._accepted()
            if len(self._waiting) >= self.limit:
                oldest = self._waiting.popitem(last=False)
                self._evicted.add(oldest[0])
                self.turned_away += 1
            self._waiting[scope] = on_evict
        if oldest is not None:
            self._turn_away(*oldest, f"{self.limit} others were waiting to authenticate")
        return scope

    def make_room(self, why: str) -> bool:
        """Turn the oldest waiting connection away now (its descriptor is closed at once);
        False when none waits."""
        with self._lock:
            if not self._waiting:
                return False
            oldest = self._waiting.popitem(last=False)
            self._evicted.add(oldest[0])
            self.turned_away += 1
        self._turn_away(*oldest, why)
        return True

    def _turn_away(
        self, scope: trio.CancelScope, close: Callable[[], None] | None, why: str
    ) -> None:
        scope.cancel()
        if close is not None:
            with contextlib.suppress(OSError):
                close()
        self.warn(
            "%s turned away a connection to port %d waiting to authenticate: %s "
            "(%d turned away in all)",
            self.who,
            self.port,
            why,
            self.turned_away,
        )

    def leave(self, scope: trio.CancelScope) -> None:
        """The connection of ``scope`` authenticated, or was refused, or closed."""
        with self._lock:
            self._waiting.pop(scope, None)

    def evicted(self, scope: trio.CancelScope) -> bool:
        """Whether the door turned the connection of ``scope`` away (then it is counted and
        logged already)."""
        with self._lock:
            return scope in self._evicted

    def forget(self, scope: trio.CancelScope) -> None:
        """Done with ``scope`` (once its connection is closed)."""
        with self._lock:
            self._waiting.pop(scope, None)
            self._evicted.discard(scope)

    def refuse(self, address: str, reason: str) -> None:
        """Count and log a connection from ``address`` that failed the exchange."""
        with self._lock:
            self.refused += 1
        self.warn(
            "%s refused a connection from %s to port %d: %s", self.who, address, self.port, reason
        )

    # -- accepting -------------------------------------------------------------------------
    def accept_failed(self, exc: OSError) -> float:
        """Count and log a failed ``accept()``; the seconds to wait before the next one.

        Out of descriptors (or buffers), the oldest waiting connection is turned away to
        make room, and the next ``accept()`` comes at once; otherwise the wait doubles, up to
        a second, until an ``accept()`` succeeds.
        """
        with self._lock:
            self.accept_errors += 1
            wait = self._wait
            self._wait = min(wait * 2, BACKOFF_S[1])
        self.warn(
            "%s could not accept a connection on port %d (%s): serving on",
            self.who,
            self.port,
            exc.strerror or exc,
        )
        if exc.errno in CAPACITY_ERRNOS and self.make_room(f"{exc.strerror or exc}"):
            return 0.0
        return wait

    def _accepted(self) -> None:
        self._wait = BACKOFF_S[0]

    # -- logging ---------------------------------------------------------------------------
    def warn(self, message: str, *args: object) -> None:
        """Log at WARNING, at most :data:`BURST` records per :data:`WINDOW_S` seconds; the
        first record after some were held back says how many."""
        now = time.monotonic()
        with self._lock:
            if now - self._window >= WINDOW_S:
                self._window, self._logged = now, 0
            if self._logged >= BURST:
                self._held_back += 1
                return
            self._logged += 1
            held, self._held_back = self._held_back, 0
        if held:
            message += " (%d similar records of %s held back before this one)"
            args = (*args, held, self.who)
        _log.warning(message, *args)


async def accept_forever(
    listener: trio.SocketListener,
    door: Door,
    greet: Callable[[trio.SocketStream, trio.CancelScope], Awaitable[object]],
    nursery: trio.Nursery,
) -> None:
    """Accept on ``listener`` until cancelled: each connection :meth:`~Door.enter`\\ s the
    ``door`` and is greeted (``greet(stream, scope)``, started in ``nursery``), which runs
    its exchange under ``scope`` and :meth:`~Door.leave`\\ s when done. A failed
    ``accept()`` is logged and waited out (:meth:`Door.accept_failed`), never raised."""
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            await trio.sleep(door.accept_failed(exc))
            continue
        nursery.start_soon(greet, stream, door.enter(functools.partial(reset, stream.socket)))


def reset(sock: trio.socket.SocketType | socket.socket) -> None:
    """Close ``sock`` with a reset, not a plain close: how a dialer tells it was turned away
    (and dials again) from refused (a wrong secret). A blocking socket another thread is
    reading is shut for reading instead (its thread sees the end and closes it, with the
    reset)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    if isinstance(sock, socket.socket):
        sock.shutdown(socket.SHUT_RD)
    else:
        sock.close()
