"""Workers in several processes: framed messages over TCP, and the transport built on them.

A :class:`Link` is one trio stream to another process, carrying *frames*: each is one
pickle (protocol 5) of a list of messages, with the contiguous buffers pickle hands out of
band (numpy columns, :class:`pickle.PickleBuffer`) sent raw after it, never copied into the
pickle. A frame is ``<pickle length: u64> <buffer count: u32> <buffer lengths: u64 each>``,
then the pickle, then the buffers. A link refuses a frame whose header announces more than
:data:`MAX_FRAME` bytes or :data:`MAX_BUFFERS` buffers (:class:`FrameError`): a broken or
hostile peer, whose connection is then closed, never an allocation of what it claims. Senders
keep their frames well below that (:data:`SPLIT_FRAME`).

A link carries frames only once its connection is authenticated
(:mod:`deltaflow.scheduler.net.handshake`): a link of a mesh is made by
:func:`~deltaflow.scheduler.net.mesh.connect_mesh` after the exchange, and a control link is one
end of a socket pair the caller made for its own child.

:class:`TcpTransport` hosts a contiguous block of a job's workers in this process. Between
them it delivers directly, as :class:`~deltaflow.scheduler.local.transport.InProcessTransport`
does; to a worker in another process it queues the message on the one link to that process,
and a step's progress batch goes to the local workers at once and on every link after the
data it accounts for. One stream per pair of processes is one FIFO per pair of workers,
which is all the progress protocol asks of a transport (see
:mod:`deltaflow.scheduler.local.transport`).

    >>> frame = encode([("d", 1, 2, 0, 0, "payload")])
    >>> decode(frame[1], [])
    [('d', 1, 2, 0, 0, 'payload')]
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ...errors import PeerLostError
from ...framework.tuning import PART, SPLIT_FRAME, TCP_READ_CHUNK as _CHUNK
from ...operators.base import RunsBatch, UpdateBatch
from .remote_errors import ErrorReport

if TYPE_CHECKING:
    from ..local.transport import ProgressChange
    from ..local.worker import Worker

__all__ = [
    "MAX_FRAME",
    "FrameError",
    "Link",
    "TcpTransport",
    "decode",
    "describe_workers",
    "encode",
]

_HEAD = struct.Struct("<QI")
#: Most byte views one ``writev`` takes (the system's ``IOV_MAX`` is at least this).
_IOV_MAX = 1024
#: The most bytes one :meth:`Link.poll` reads before it hands back what it has (a peer that
#: sends without pause still lets the reading worker step).
_POLL_BYTES = 1 << 24
#: What ``Link._take`` returns while no whole frame is buffered.
_PARTIAL = object()
#: The most bytes (pickle and raw buffers) a link accepts in one frame.
MAX_FRAME = 1 << 30
#: The most raw buffers a link accepts in one frame.
MAX_BUFFERS = 1 << 16


def encode(messages: Any) -> list[Any]:
    """``messages`` as a frame: ``[header, pickle, *raw buffers]``."""
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(messages, 5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    head = _HEAD.pack(len(body), len(raws))
    if raws:
        head += struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws))
    return [head, body, *raws]


def decode(body: Any, buffers: list[Any]) -> Any:
    """The messages of a frame from its pickle and raw buffers."""
    return pickle.loads(body, buffers=buffers)


class FrameError(Exception):
    """A frame's header announces more than a link accepts (:data:`MAX_FRAME`,
    :data:`MAX_BUFFERS`), or its pickle cannot be read: the connection is closed."""


class Link:
    """One stream to another process, sending and receiving whole frames.

    Sends go through :meth:`queue` and a task of the link's own (:meth:`send_loop`), so a
    worker never waits on a socket: what queues up while a frame is being written leaves as
    the next frame, in order. Writes go straight to the socket as far as it takes them (one
    ``writev`` per frame), and only what it does not take waits for the socket in trio.

    Receiving reads whatever has arrived in one go: :meth:`receive_many` hands back the
    messages of every whole frame read, so a burst of small frames costs one wake-up.

    Over a plain socket, writes and reads go straight to it; over any other stream (TLS),
    through the stream's own ``send_all`` and ``receive_some``. ``max_frame`` bounds what the
    link accepts (``None``: no bound, for a control link of a socket pair).
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        peer: int,
        *,
        max_frame: int | None = MAX_FRAME,
        unread: bytearray | None = None,
    ) -> None:
        self.stream = stream
        self.peer = peer
        self.max_frame = max_frame
        #: The socket written and read directly; ``None`` for a stream that must do its own
        #: reads and writes (TLS).
        self._sock = stream.socket if isinstance(stream, trio.SocketStream) else None
        #: Bytes read and not yet taken as frames: at first ``unread``, what an earlier link
        #: on the same stream read ahead (a worker process hands them to its next job).
        self._buf = bytearray() if unread is None else unread
        #: A frame longer than a read, being read straight into memory of its size (the
        #: buffer's bytes first), and how much of it has arrived.
        self._long: bytearray | None = None
        self._have = 0
        #: The stream ended after the frames taken so far (reported by the next read).
        self._ended = False
        self._out: list[Any] = []
        self._ready = trio.Event()
        self._closing = False
        #: What :meth:`flush_now` could not write at once (sent first by :meth:`send_loop`).
        self._unsent: list[memoryview] = []
        self._sending = False
        #: Whether the last :meth:`receive_many` waited for the socket (a trio checkpoint).
        self._waited = True

    # -- sending ---------------------------------------------------------------------------
    def queue(self, message: Any) -> None:
        """Send ``message`` after everything queued before it (:meth:`send_loop` writes it
        at its next turn)."""
        self._out.append(message)
        self._ready.set()

    def put(self, message: Any) -> None:
        """Queue ``message`` as :meth:`queue` does, for the next :meth:`flush_now` to write
        (a worker's step: its data and progress leave together when the worker yields)."""
        self._out.append(message)

    def _write(self, pieces: list[memoryview]) -> list[memoryview]:
        """Write ``pieces`` as far as the socket takes them now; what is left.

        Raises:
            OSError: the stream broke or was closed (``send_loop`` reports it).
        """
        if self._sock is None:
            return pieces  # the stream writes for itself, in send_loop
        fd = self._sock.fileno()  # -1 once closed: never write to a reused descriptor
        if fd < 0:
            raise trio.ClosedResourceError
        try:
            while pieces:
                n = os.writev(fd, pieces[:_IOV_MAX])
                while pieces and n >= len(pieces[0]):
                    n -= len(pieces[0])
                    pieces.pop(0)
                if n:
                    pieces[0] = pieces[0][n:]
        except BlockingIOError:
            pass
        return pieces

    def flush_now(self) -> None:
        """Write what is queued without waiting for :meth:`send_loop`'s turn, as far as the
        socket takes it at once; the rest is left to :meth:`send_loop`.

        A worker calls this at the end of each step: the other process then hears of the
        step as soon as it is over, not when trio next schedules the sending task (which
        waits until the worker yields).
        """
        if not self._out:
            return
        if self._sending or self._unsent:
            self._ready.set()  # send_loop writes it after what it is writing
            return
        out, self._out = self._out, []
        try:
            unsent = self._write(_pieces(out))
        except (OSError, trio.ClosedResourceError):
            return  # the stream broke: send_loop finds out and reports it
        if unsent:
            self._unsent = unsent
            self._ready.set()

    def close_after_queued(self) -> None:
        """End :meth:`send_loop` once what is queued has been sent."""
        self._closing = True
        self._ready.set()

    async def send_frame(self, messages: Any) -> None:
        """Write one frame of ``messages`` now (nothing else may be sending)."""
        for piece in _pieces(messages):
            await self.stream.send_all(piece)

    async def send_loop(self) -> None:
        """Write queued messages, a frame per batch that built up, until closed."""
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            await self.drain()
            if self._closing and not self._out:
                return

    async def drain(self) -> None:
        """Write everything queued, unless a write was interrupted (the stream is then in no
        state to take more: ``_sending`` stays set)."""
        if self._sending:
            return
        self._sending = True
        unsent, self._unsent = self._unsent, []
        out, self._out = self._out, []
        if out:
            unsent += _pieces(out)
        unsent = self._write(unsent)
        if self._sock is None and len(unsent) > 1:
            unsent = [memoryview(b"".join(unsent))]  # one write: fewer TLS records
        for piece in unsent:
            await self.stream.send_all(piece)
        self._sending = False

    # -- receiving -------------------------------------------------------------------------
    async def receive(self) -> Any:
        """The next frame's messages; :class:`EOFError` if the other process went away."""
        while True:
            frame = self._take()
            if frame is not _PARTIAL:
                return frame
            await self._fill()

    async def receive_many(self) -> list[Any]:
        """The messages of every whole frame that has arrived, in order (waiting for one if
        none has); :class:`EOFError` if the other process went away.

        Frames are lists of messages (what :meth:`queue` sends).
        """
        if not self._waited:
            # Data kept arriving without a wait: let the other tasks run (a checkpoint
            # before anything is taken, so a cancellation here loses nothing).
            await trio.lowlevel.checkpoint()
        self._waited = False
        messages: list[Any] = []
        while True:
            frame = self._take()
            while frame is not _PARTIAL:
                messages += frame
                frame = self._take()
            if messages:
                return messages
            await self._fill()

    def _take(self) -> Any:
        """The first whole frame in the buffer, decoded and removed; ``_PARTIAL`` if the
        buffer holds none."""
        buf = self._buf
        head = _frame_head(buf, self.max_frame)
        if head is None:
            return _PARTIAL
        start, size, lengths = head
        end = start + size
        total = end + sum(lengths)
        if len(buf) < total:
            return _PARTIAL
        if total == len(buf):
            # The buffer is this frame (always so for one read whole): views, no copies.
            self._buf = bytearray()
            whole: Any = memoryview(buf)
        else:
            whole = buf
        body = whole[start:end]
        buffers = []
        for n in lengths:
            buffers.append(whole[end : end + n])
            end += n
        if whole is buf:
            del buf[:end]
        try:
            return decode(body, buffers)
        except Exception as exc:  # an authenticated peer sent what no peer of ours sends
            msg = f"a frame from process {self.peer} cannot be read: {exc!r}"
            raise FrameError(msg) from exc

    def poll(self) -> list[Any]:
        """The messages of every whole frame that has arrived, without waiting (over a plain
        socket): reads until the socket holds nothing more (or :data:`_POLL_BYTES` were
        read), taking frames as they complete.

        Raises:
            EOFError: the stream ended (after the frames it carried were returned).
            FrameError: a frame's header announces more than the link accepts, or its
                pickle cannot be read.
        """
        messages: list[Any] = []
        budget = _POLL_BYTES
        while True:
            frame = self._take()
            while frame is not _PARTIAL:
                messages += frame
                frame = self._take()
            if budget <= 0:
                return messages
            try:
                got, more = self._read_now()
            except EOFError:
                if messages:
                    self._ended = True  # the next read reports it
                    return messages
                raise
            budget -= got
            if not more:
                frame = self._take()
                while frame is not _PARTIAL:
                    messages += frame
                    frame = self._take()
                return messages

    def _read_now(self) -> tuple[int, bool]:
        """One read of what the socket holds, without waiting: into the buffer, or (a frame
        longer than :data:`_CHUNK` at its head) straight into that frame's own memory. The
        bytes read, and whether the socket may hold more (the read filled what it asked).

        Raises:
            EOFError: the stream ended.
            FrameError: the head frame is longer than the link accepts.
        """
        sock = self._sock
        assert sock is not None
        if self._ended:
            raise EOFError
        fd = sock.fileno()  # -1 once closed: never read a reused descriptor
        if fd < 0:
            raise trio.ClosedResourceError
        whole = self._long
        if whole is None:
            want = self._wanted()
            if want <= _CHUNK:
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    return 0, False
                if not chunk:
                    raise EOFError
                self._buf += chunk
                return len(chunk), len(chunk) == _CHUNK
            have = len(self._buf)
            whole = bytearray(have + want)
            whole[:have] = self._buf
            self._long, self._have, self._buf = whole, have, bytearray()
        view = memoryview(whole)
        try:
            asked = len(whole) - self._have
            got = os.readv(fd, [view[self._have :]])
        except BlockingIOError:
            return 0, False
        finally:
            view.release()
        if not got:
            raise EOFError
        self._have += got
        if self._have == len(whole):
            # Whole: it becomes the buffer (one frame: _take hands out views, no copies).
            self._buf, self._long = whole, None
        return got, got == asked

    @property
    def sock(self) -> Any:
        """The socket written and read directly (``None`` for a stream that does its own
        reads and writes: TLS); a transport's workers wait on it."""
        return self._sock

    def unread(self) -> bytearray:
        """The bytes read and not taken as frames (``_serve`` hands them to the next job's
        link)."""
        if self._long is not None:
            return self._long[: self._have]
        return self._buf

    async def _fill(self) -> None:
        """Read what has arrived, waiting for something if nothing has.

        Raises:
            EOFError: the stream ended.
            FrameError: the head frame is longer than the link accepts.
        """
        sock = self._sock
        if sock is None:
            self._waited = True  # receive_some is a checkpoint
            chunk = await self.stream.receive_some(max(self._wanted(), _CHUNK))
            if not chunk:
                raise EOFError
            self._buf += chunk
            return
        while True:
            got, _ = self._read_now()
            if got:
                return
            self._waited = True
            await trio.lowlevel.wait_readable(sock)

    def _wanted(self) -> int:
        """Bytes still missing from the frame at the head of the buffer (0 if unknown)."""
        head = _frame_head(self._buf, self.max_frame)
        if head is None:
            return 0
        start, size, lengths = head
        return start + size + sum(lengths) - len(self._buf)

    async def aclose(self) -> None:
        """Close the stream."""
        await self.stream.aclose()


def _frame_head(
    buf: bytearray, limit: int | None = MAX_FRAME
) -> tuple[int, int, tuple[int, ...]] | None:
    """Where the pickle of the frame at the start of ``buf`` begins, its length, and the
    lengths of its raw buffers; ``None`` while ``buf`` holds less than the header.

    Raises:
        FrameError: the header announces more than ``limit`` bytes or :data:`MAX_BUFFERS`
            buffers (checked before anything is allocated or waited for).

    >>> _frame_head(bytearray(b"GET / HTTP/1.1\\r\\n"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deltaflow.scheduler.net.tcp.FrameError: a frame header announces 6073139484287059271 bytes...
    """
    if len(buf) < _HEAD.size:
        return None
    size, count = _HEAD.unpack_from(buf)
    if limit is not None and (count > MAX_BUFFERS or size > limit):
        raise _too_long(size, count, limit)
    start = _HEAD.size + 8 * count
    if len(buf) < start:
        return None
    lengths = struct.unpack_from(f"<{count}Q", buf, _HEAD.size) if count else ()
    if limit is not None and size + sum(lengths) > limit:
        raise _too_long(size + sum(lengths), count, limit)
    return start, size, lengths


def _too_long(size: int, count: int, limit: int) -> FrameError:
    msg = (
        f"a frame header announces {size} bytes in {count} buffers (a link accepts {limit} "
        f"bytes in {MAX_BUFFERS} buffers)"
    )
    return FrameError(msg)


def _pieces(messages: Any) -> list[memoryview]:
    """``messages`` as frames of byte views, ready for ``writev``: one frame, or several when
    one would be longer than :data:`SPLIT_FRAME` (so that no frame nears :data:`MAX_FRAME`)."""
    frame = encode(messages)
    if len(messages) > 1 and len(frame[1]) + sum(r.nbytes for r in frame[2:]) > SPLIT_FRAME:
        half = len(messages) // 2
        return _pieces(messages[:half]) + _pieces(messages[half:])
    return [memoryview(piece).cast("B") for piece in frame]


class TcpTransport:
    """Workers ``[first, first + local)`` of ``peers`` in this process; the rest behind links.

    ``links`` maps a process's index to its :class:`Link`; process ``p`` hosts workers
    ``[p * local, (p + 1) * local)``. The job calls :meth:`finish` once its local workers
    have stopped; :meth:`run` then says goodbye on every link and returns when every other
    process has said goodbye too. ``on_error`` is told when another process reports a failure
    or goes away.

    The workers do the socket work themselves, where they yield (:meth:`turn`,
    :meth:`rest`): what their steps queued (data, and each step's progress batch after the
    data it accounts for) leaves in one write per link, and what has arrived is read and
    delivered at once, so the worker that read a frame applies its progress in its next
    step. A worker with nothing to do waits on its bell *or* the process's sockets (the one
    link's socket, or an epoll of them all), so a frame wakes the task that reads it. Links
    a worker cannot read without waiting (TLS; several links where the system has no epoll)
    are read by a task of their own, which rings the workers' bells; so are the links still
    open once every local worker has stopped (until their goodbye).
    """

    #: Seconds a cancelled transport may spend sending what is queued (a failure report).
    GRACE_S = 1.0

    def __init__(
        self,
        index: int,
        local: int,
        links: dict[int, Link],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.index = index
        self.local = local
        self.first = index * local
        self.links = links
        self.on_error = on_error
        self.workers: list[Worker] = []
        self._finished = trio.Event()
        self._reported = False
        self._parts: dict[tuple[int, int], list[UpdateBatch]] = {}
        #: The links the workers read (``None`` until the links are known: see _setup), and
        #: those read by tasks.
        self._polled: list[Link] | None = None
        self._tasked: list[Link] = []
        #: What a resting worker waits on besides its bell: the one polled link's socket, an
        #: epoll of them all, or ``None`` (nothing to watch).
        self._watch: Any = None
        self._epoll: Any = None
        #: Whether a worker is waiting on :attr:`_watch` (one at a time).
        self._watching = False

    def attach(self, workers: list[Worker]) -> None:
        """Deliver to this process's ``workers`` (in index order)."""
        self.workers = workers

    def _setup(self) -> list[Link]:
        """Sort the links (connected by now) into those the workers read and those a task
        reads; the links the workers read."""
        if self._polled is not None:
            return self._polled
        plain = [link for link in self.links.values() if link.sock is not None]
        if len(plain) > 1 and not hasattr(select, "epoll"):
            plain = []
        self._polled = plain
        self._tasked = [link for link in self.links.values() if link not in plain]
        if len(plain) == 1:
            self._watch = plain[0].sock
        elif plain:
            self._epoll = select.epoll()
            for link in plain:
                assert link.sock is not None
                self._epoll.register(link.sock.fileno(), select.EPOLLIN)
            self._watch = self._epoll
        return plain

    def _unwatch(self, link: Link) -> None:
        """Stop reading ``link`` in the workers (it said goodbye, ended or failed)."""
        assert self._polled is not None
        self._polled.remove(link)
        if self._epoll is not None:
            with contextlib.suppress(OSError, ValueError):
                assert link.sock is not None
                self._epoll.unregister(link.sock.fileno())
        if not self._polled:
            self._watch = None

    # -- sending ---------------------------------------------------------------------------
    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        """Deliver to a local worker now, or queue on the link to the worker's process."""
        process, offset = divmod(worker, self.local)
        if process == self.index:
            self.workers[offset].receive(node, port, time, payload)
            return
        link = self.links[process]
        cls = payload.__class__
        if (cls is UpdateBatch or cls is RunsBatch) and len(payload.data) > PART:
            data, diffs = payload.data, payload.diffs
            for lo in range(0, len(data) - PART, PART):
                hi = lo + PART
                link.put(("part", sender, offset, data[lo:hi], diffs[lo:hi]))
            lo = (len(data) - 1) // PART * PART
            # The last part carries the rest: a RunsBatch's runs go with it whole.
            if cls is RunsBatch:
                payload = RunsBatch(payload.times, payload.lengths, data[lo:], diffs[lo:])
            else:
                payload = UpdateBatch(data[lo:], diffs[lo:])
        link.put(("d", sender, offset, node, port, time, payload))

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        """Every local worker now; every other process after the data sent before it, in
        the same write as that data, when the sender next yields (:meth:`turn`,
        :meth:`rest`).

        A worker yields when it has nothing left to do or has stepped for a slice: the
        batches of the steps in between travel together, so another process wakes once for
        the whole of what this worker could do without it, not once per step.
        """
        for w in self.workers:
            w.receive_progress(changes)
        message = ("p", changes)
        for link in self.links.values():
            link.put(message)

    def report_error(self, exc: BaseException) -> None:
        """Tell every other process that this one failed (once)."""
        if self._reported:
            return
        self._reported = True
        message = ("error", ErrorReport.of(exc))
        for link in self.links.values():
            link.queue(message)

    def finish(self) -> None:
        """The local workers have stopped: say goodbye once what is queued has gone."""
        if not self._finished.is_set():
            for link in self.links.values():
                link.queue(("bye",))
                link.close_after_queued()
            self._finished.set()

    # -- the workers' side -----------------------------------------------------------------
    def turn(self, worker: Worker) -> None:
        """Write what the steps queued; read and deliver what has arrived (no waiting)."""
        for link in self.links.values():
            link.flush_now()
        self._read()

    async def rest(self, worker: Worker) -> bool:
        """As :meth:`turn`; then, unless that gave ``worker`` work, wait for its bell or (one
        resting worker at a time) for a frame, which it reads at once. Whether it waited."""
        for link in self.links.values():
            link.flush_now()
        self._read()
        bell = worker.bell
        if bell.rung:
            return False
        watch = self._watch
        if watch is None or self._watching or self._finished.is_set():
            await bell.wait()
            return True
        self._watching = True
        try:
            await bell.wait(watch)
        except (trio.ClosedResourceError, OSError):
            pass  # closed under the wait: the read below (or the job's end) tells
        finally:
            self._watching = False
        if not bell.rung:
            self._read()
        return True

    def _read(self) -> None:
        """Read every polled link and deliver what whole frames it holds."""
        polled = self._polled if self._polled is not None else self._setup()
        for link in polled[:] if len(polled) > 1 else polled:
            try:
                messages = link.poll()
            except FrameError as exc:
                self._unwatch(link)
                msg = f"refused what {describe_workers(link.peer, self.local)} sent: {exc}"
                self.on_error(PeerLostError(msg))
                continue
            except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self._unwatch(link)
                if not self._finished.is_set():
                    msg = f"lost the process of {describe_workers(link.peer, self.local)}"
                    self.on_error(PeerLostError(msg))
                continue
            if messages and self._deliver(link, messages):
                self._unwatch(link)
                continue

    def _deliver(self, link: Link, messages: list[Any]) -> bool:
        """Hand a frame's messages to the local workers; True once the peer said goodbye."""
        workers = self.workers
        for m in messages:
            kind = m[0]
            if kind == "d":
                _, sender, offset, node, port, time, payload = m
                parts = self._parts.pop((sender, offset), None)
                if parts is not None:
                    parts.append(payload)
                    data = [d for p in parts for d in p.data]
                    diffs = [r for p in parts for r in p.diffs]
                    if payload.__class__ is RunsBatch:
                        payload = RunsBatch(payload.times, payload.lengths, data, diffs)
                    else:
                        payload = UpdateBatch(data, diffs)
                workers[offset].receive(node, port, time, payload)
            elif kind == "p":
                changes = m[1]
                for w in workers:
                    w.receive_progress(changes)
            elif kind == "part":
                _, sender, offset, data, diffs = m
                self._parts.setdefault((sender, offset), []).append(UpdateBatch(data, diffs))
            elif kind == "error":
                self.on_error(_remote_error(link.peer, m[1]))
            else:  # "bye"
                return True
        return False

    # -- the tasks -------------------------------------------------------------------------
    async def _receive_loop(self, link: Link) -> None:
        while True:
            try:
                messages = await link.receive_many()
            except FrameError as exc:
                msg = f"refused what {describe_workers(link.peer, self.local)} sent: {exc}"
                self.on_error(PeerLostError(msg))
                return
            except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                if not self._finished.is_set():
                    msg = f"lost the process of {describe_workers(link.peer, self.local)}"
                    self.on_error(PeerLostError(msg))
                return
            if self._deliver(link, messages):
                return

    async def _send_loop(self, link: Link) -> None:
        try:
            await link.send_loop()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            if not self._finished.is_set():
                msg = f"lost the connection to process {link.peer}"
                self.on_error(PeerLostError(msg))

    async def run(self) -> None:
        """Send and receive on every link until every process has said goodbye: the links
        the workers cannot read, from the start; the others once the local workers have
        stopped.

        Cancelled (the job failed here, or was abandoned), it still tries for a moment to
        send what is queued, so the other processes hear of the failure rather than only
        see the connection drop.
        """
        polled = self._setup()
        try:
            async with trio.open_nursery() as nursery:
                for link in self.links.values():
                    nursery.start_soon(self._send_loop, link)
                for link in self._tasked:
                    nursery.start_soon(self._receive_loop, link)
                if polled:
                    await self._finished.wait()
                    # No worker reads any more (a frame of the goodbye may have been read
                    # by a worker before it stopped: then the link is not polled).
                    for link in polled[:]:
                        self._unwatch(link)
                        nursery.start_soon(self._receive_loop, link)
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(self.GRACE_S):
                    for link in self.links.values():
                        with contextlib.suppress(trio.BrokenResourceError, OSError):
                            await link.drain()
                for link in self.links.values():
                    await trio.aclose_forcefully(link.stream)
                if self._epoll is not None:
                    trio.lowlevel.notify_closing(self._epoll.fileno())
                    self._epoll.close()


def describe_workers(process: int, local: int) -> str:
    """``"worker 3 (process 3)"``, ``"workers 2-3 (process 1)"``: who a process hosts.

    >>> describe_workers(1, 2)
    'workers 2-3 (process 1)'
    """
    first = process * local
    workers = f"worker {first}" if local == 1 else f"workers {first}-{first + local - 1}"
    return f"{workers} (process {process})"


def _remote_error(peer: int, report: ErrorReport) -> BaseException:
    """The local copy of an error another process reported: deltaflow's errors and built-in
    exceptions as themselves, anything else as that process's failure."""
    return report.rebuild(lambda text: PeerLostError(f"process {peer} failed: {text}"))
