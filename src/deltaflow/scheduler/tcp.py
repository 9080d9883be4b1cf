"""Workers in several processes: framed messages over TCP, and the transport built on them.

A :class:`Link` is one trio stream to another process, carrying *frames*: each is one
pickle (protocol 5) of a list of messages, with the contiguous buffers pickle hands out of
band (numpy columns, :class:`pickle.PickleBuffer`) sent raw after it, never copied into the
pickle. A frame is ``<pickle length: u64> <buffer count: u32> <buffer lengths: u64 each>``,
then the pickle, then the buffers.

:class:`TcpTransport` hosts a contiguous block of a job's workers in this process. Between
them it delivers directly, as :class:`~deltaflow.scheduler.transport.InProcessTransport`
does; to a worker in another process it queues the message on the one link to that process,
and a step's progress batch goes to the local workers at once and on every link after the
data it accounts for. One stream per pair of processes is one FIFO per pair of workers,
which is all the progress protocol asks of a transport (see
:mod:`deltaflow.scheduler.transport`).

    >>> frame = encode([("d", 1, 2, 0, 0, "payload")])
    >>> decode(frame[1], [])
    [('d', 1, 2, 0, 0, 'payload')]
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..errors import OperatorError, PeerLostError
from ..operators.base import UpdateBatch

if TYPE_CHECKING:
    from .transport import ProgressChange
    from .worker import Worker

__all__ = ["Link", "TcpTransport", "decode", "describe_workers", "encode"]

_HEAD = struct.Struct("<QI")
#: Reads smaller than this go through the link's buffer (many small frames per syscall);
#: larger ones are received straight into the frame's own memory.
_CHUNK = 1 << 16
#: An update batch longer than this crosses in parts of this size, so the receiver unpickles
#: one part while the sender pickles the next (the receiver joins them before delivery).
PART = 1 << 17


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


class Link:
    """One stream to another process, sending and receiving whole frames.

    Sends go through :meth:`queue` and a task of the link's own (:meth:`send_loop`), so a
    worker never waits on a socket: what queues up while a frame is being written leaves as
    the next frame, in order.
    """

    def __init__(self, stream: trio.SocketStream, peer: int) -> None:
        self.stream = stream
        self.peer = peer
        self._sock = stream.socket
        self._buf = bytearray()
        self._out: list[Any] = []
        self._ready = trio.Event()
        self._closing = False
        self._fd = self._sock.fileno()
        #: What :meth:`flush_now` could not write at once (sent first by :meth:`send_loop`).
        self._unsent: list[memoryview] = []
        self._sending = False

    # -- sending ---------------------------------------------------------------------------
    def queue(self, message: Any) -> None:
        """Send ``message`` after everything queued before it."""
        self._out.append(message)
        self._ready.set()

    def flush_now(self) -> None:
        """Write what is queued without waiting for :meth:`send_loop`'s turn, as far as the
        socket takes it at once; the rest is left to :meth:`send_loop`.

        A worker calls this at the end of each step: the other process then hears of the
        step as soon as it is over, not when trio next schedules the sending task (which
        waits until the worker yields).
        """
        if self._sending or self._unsent or not self._out:
            return
        out, self._out = self._out, []
        unsent = [memoryview(piece).cast("B") for piece in encode(out)]
        try:
            while unsent:
                n = os.write(self._fd, unsent[0])
                if n == len(unsent[0]):
                    unsent.pop(0)
                else:
                    unsent[0] = unsent[0][n:]
        except BlockingIOError:
            pass
        except OSError:
            pass  # the stream broke: send_loop finds out and reports it
        if unsent:
            self._unsent = unsent
            self._ready.set()

    def close_after_queued(self) -> None:
        """End :meth:`send_loop` once what is queued has been sent."""
        self._closing = True
        self._ready.set()

    async def send_frame(self, messages: Any) -> None:
        """Write one frame of ``messages`` now (nothing else may be sending)."""
        head, body, *raws = encode(messages)
        if len(body) < _CHUNK:
            await self.stream.send_all(head + body)
        else:
            await self.stream.send_all(head)
            await self.stream.send_all(body)
        for raw in raws:
            await self.stream.send_all(raw)

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
        for piece in unsent:
            await self.stream.send_all(piece)
        out, self._out = self._out, []
        if out:
            await self.send_frame(out)
        self._sending = False

    # -- receiving -------------------------------------------------------------------------
    async def _read(self, n: int) -> Any:
        """Exactly ``n`` bytes; :class:`EOFError` if the stream ends first."""
        buf = self._buf
        if len(buf) >= n:
            out = bytes(buf[:n])
            del buf[:n]
            return out
        out_arr = bytearray(n)
        have = len(buf)
        out_arr[:have] = buf
        buf.clear()
        view = memoryview(out_arr)
        sock = self._sock
        while have < n:
            if n - have < _CHUNK:
                chunk = await sock.recv(_CHUNK)
                if not chunk:
                    raise EOFError
                take = min(len(chunk), n - have)
                view[have : have + take] = chunk[:take]
                buf += chunk[take:]
                have += take
            else:
                got = await sock.recv_into(view[have:], n - have)
                if not got:
                    raise EOFError
                have += got
        return out_arr

    async def receive(self) -> Any:
        """The next frame's messages; :class:`EOFError` if the other process went away."""
        size, count = _HEAD.unpack(await self._read(_HEAD.size))
        lengths = struct.unpack(f"<{count}Q", await self._read(8 * count)) if count else ()
        body = await self._read(size)
        buffers = [await self._read(n) for n in lengths]
        return decode(body, buffers)

    async def aclose(self) -> None:
        """Close the stream."""
        await self.stream.aclose()


class TcpTransport:
    """Workers ``[first, first + local)`` of ``peers`` in this process; the rest behind links.

    ``links`` maps a process's index to its :class:`Link`; process ``p`` hosts workers
    ``[p * local, (p + 1) * local)``. The job calls :meth:`finish` once its local workers
    have stopped; :meth:`run` then says goodbye on every link and returns when every other
    process has said goodbye too. ``on_error`` is told when another process reports a failure
    or goes away.
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

    def attach(self, workers: list[Worker]) -> None:
        """Deliver to this process's ``workers`` (in index order)."""
        self.workers = workers

    def send_data(
        self, sender: int, worker: int, node: int, port: int, time: Any, payload: Any
    ) -> None:
        """Deliver to a local worker now, or queue on the link to the worker's process."""
        process, offset = divmod(worker, self.local)
        if process == self.index:
            self.workers[offset].receive(node, port, time, payload)
            return
        link = self.links[process]
        if payload.__class__ is UpdateBatch and len(payload.data) > PART:
            data, diffs = payload.data, payload.diffs
            for lo in range(0, len(data) - PART, PART):
                hi = lo + PART
                link.queue(("part", sender, offset, data[lo:hi], diffs[lo:hi]))
            lo = (len(data) - 1) // PART * PART
            payload = UpdateBatch(data[lo:], diffs[lo:])
        link.queue(("d", sender, offset, node, port, time, payload))

    def broadcast_progress(self, sender: int, changes: list[ProgressChange]) -> None:
        """Every local worker now; every other process after the data sent before it."""
        for w in self.workers:
            w.receive_progress(changes)
        message = ("p", changes)
        for link in self.links.values():
            link.queue(message)
            link.flush_now()  # the end of the sender's step: what it sent can leave now

    def report_error(self, exc: BaseException) -> None:
        """Tell every other process that this one failed (once)."""
        if self._reported:
            return
        self._reported = True
        operator = exc.operator if isinstance(exc, OperatorError) else None
        message = ("error", type(exc).__name__, str(exc), operator)
        for link in self.links.values():
            link.queue(message)

    def finish(self) -> None:
        """The local workers have stopped: say goodbye once what is queued has gone."""
        if not self._finished.is_set():
            for link in self.links.values():
                link.queue(("bye",))
                link.close_after_queued()
            self._finished.set()

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
                    payload = UpdateBatch(
                        [d for p in parts for d in p.data], [r for p in parts for r in p.diffs]
                    )
                workers[offset].receive(node, port, time, payload)
            elif kind == "p":
                changes = m[1]
                for w in workers:
                    w.receive_progress(changes)
            elif kind == "part":
                _, sender, offset, data, diffs = m
                self._parts.setdefault((sender, offset), []).append(UpdateBatch(data, diffs))
            elif kind == "error":
                _, name, text, operator = m
                self.on_error(_remote_error(link.peer, name, text, operator))
            else:  # "bye"
                return True
        return False

    async def _receive_loop(self, link: Link) -> None:
        while True:
            try:
                messages = await link.receive()
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
        """Send and receive on every link until every process has said goodbye.

        Cancelled (the job failed here, or was abandoned), it still tries for a moment to
        send what is queued, so the other processes hear of the failure rather than only
        see the connection drop.
        """
        try:
            async with trio.open_nursery() as nursery:
                for link in self.links.values():
                    nursery.start_soon(self._send_loop, link)
                    nursery.start_soon(self._receive_loop, link)
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(self.GRACE_S):
                    for link in self.links.values():
                        with contextlib.suppress(trio.BrokenResourceError, OSError):
                            await link.drain()
                for link in self.links.values():
                    await trio.aclose_forcefully(link.stream)


def describe_workers(process: int, local: int) -> str:
    """``"worker 3 (process 3)"``, ``"workers 2-3 (process 1)"``: who a process hosts.

    >>> describe_workers(1, 2)
    'workers 2-3 (process 1)'
    """
    first = process * local
    workers = f"worker {first}" if local == 1 else f"workers {first}-{first + local - 1}"
    return f"{workers} (process {process})"


def _remote_error(peer: int, name: str, text: str, operator: str | None) -> BaseException:
    """The local copy of an error another process reported."""
    if operator is not None:
        return OperatorError(text, operator=operator)
    if name == PeerLostError.__name__:
        return PeerLostError(text)
    return PeerLostError(f"process {peer} failed: {name}: {text}")
