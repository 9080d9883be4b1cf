"""The tasks of a :func:`~._stream.stream`: the workers that keep the dataflow, and each
micro-batch's tasks that feed them and fetch their output.

**Workers.** The stream's long-lived barrier job has one task per worker (:func:`worker_task`).
Each dials the driver first, which is their rendezvous: it says there the address of its
mesh's port and is answered with every worker's (Spark's ``allGather`` polls once a second).
It then hosts one peer of the dataflow (:func:`deltaflow.scheduler.net.peer.open_peer`: the
workers' own authenticated mesh), listens on a port of its own for the micro-batches' tasks,
and says that port to the driver (and the time it resumed at from a checkpoint, if it did,
and when its task began and its mesh was up). From
then on the driver sends it, per micro-batch ``b``, ``("step", b, parts, extra, limit)``: the
ids of the micro-batch's partitions whose rows have reached this worker, and the changes the
driver deals it itself (a small micro-batch's rows, which the driver collected, and its
share of the Python lists given as static inputs, with the first micro-batch). The worker
takes those rows, steps its peer through one time (every worker does, so the time closes
everywhere) and answers ``("done", b, seconds, doors, arrow)``: ``arrow`` its output changes
as an Arrow IPC stream if that takes at most ``limit`` bytes, else ``None``; it keeps the
output changes that ended on it until the next step, for the fetching tasks. A stream that
keeps checkpoints then asks it to ``("settle",)`` (answered with the messages its workers
sent and received, once idle) until the counts agree, and to ``("save", sequence,
committed)`` its share of the checkpoint (answered with the manifest fragment it wrote and
the manifest's header).

**Feeding** (a micro-batch too large for the driver). Each partition of micro-batch ``b`` is
read by a task of its own (:func:`feed_task`, ``mapInArrow`` over the micro-batch's
DataFrame): it turns its rows into ``(data, diff)`` changes (checking every row, so a bad row
fails that task naming it) and deals them out round-robin to the workers over connections of
its own; the dataflow's exchanges route them from there to the workers that own them, as for
:func:`~._batch.run`. The task returns a row per worker it fed (the partition's id, the
worker's, how many rows), so all the driver collects per micro-batch is a few small rows per
partition.

**Output** (too large for the driver). The sink's DataFrame is ``spark.range(workers)``
mapped by :func:`fetch_task`: task ``w`` fetches worker ``w``'s output changes of ``b`` and
returns them as Arrow batches (the time column is ``b``). It is computed wherever and as
often as the sink's actions ask for it.

Every connection - worker to driver, task to worker, workers among themselves - opens with
the handshake of :mod:`deltaflow.scheduler.net.handshake` on the stream's secret, which the tasks
carry in their closures: nothing on it is decoded before the other end has proved it holds
the secret. A worker's port stays open while the stream runs (its micro-batches' tasks come
and go); a stranger on it is refused and logged, each connection handled on its own with a
deadline, behind a door (:mod:`deltaflow.scheduler.net.door`) that bounds how many wait to
authenticate and serves through a process out of file descriptors. What a task logs at
WARNING reaches the driver's log (:mod:`._logs`): a worker's records travel before each of
its answers, a feeding or fetching task's in an accumulator; a worker's answer to a step also
says what its ports' doors counted, for the stream's ``statistics()``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import pickle
import socket
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import trio

from ...errors import PeerLostError
from ...scheduler.net.door import Door, accept_forever
from ...scheduler.net.handshake import REFUSED, HandshakeError, Hello, accept, dial, reason
from ...scheduler.net.peer import Peer, open_peer
from ...scheduler.net.tcp import MAX_FRAME, FrameError, Link
from ._batch import RENDEZVOUS_TIMEOUT_S, Security
from ._convert import InputLayout, OutputLayout, read_changes_accounted, to_arrow_schema
from ._errors import from_text, report_text, reported
from ._logs import Kept, Record, forwarding
from ._ship import unship
from ._slots import task_host

if TYPE_CHECKING:
    import ssl

    from pyspark.accumulators import Accumulator

__all__ = ["DRIVER", "FEED", "feed_task", "fetch_task", "receive", "send", "worker_task"]

#: What the ends of a connection say they run in their handshake: a worker and the driver,
#: a micro-batch's task and a worker.
DRIVER = b"deltaflow stream driver"
FEED = b"deltaflow stream feed"

Changes = dict[str, list[tuple[Any, int]]]

#: The fewest bytes an output row takes as Arrow: its time and diff.
_ROW_BYTES = 16

# -- the driver's connections: length-prefixed pickles -------------------------------------
_HEADER = struct.Struct("!Q")


def send(sock: socket.socket, message: object) -> None:
    """Write one message on a blocking socket (the driver's end)."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(body)) + body)


def _check_size(size: int) -> None:
    """Refuse a frame longer than a link accepts (a broken peer), before reading it."""
    if size > MAX_FRAME:
        msg = f"a frame of {size} bytes announced (at most {MAX_FRAME} are accepted)"
        raise FrameError(msg)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            msg = "the worker closed its connection"
            raise EOFError(msg)
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> Any:
    """Read one message from a blocking socket (the driver's end).

    Raises:
        EOFError, OSError: the connection broke.
        FrameError: the message announces more than a link accepts.
    """
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    _check_size(size)
    return pickle.loads(_read_exactly(sock, size))


class _Reader:
    """Messages from the driver, on the worker's trio stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def _fill(self, size: int) -> None:
        while len(self.buffer) < size:
            chunk = await self.stream.receive_some(1 << 20)
            if not chunk:
                msg = "the driver closed its connection"
                raise EOFError(msg)
            self.buffer += chunk

    async def receive(self) -> Any:
        await self._fill(_HEADER.size)
        (size,) = _HEADER.unpack_from(self.buffer)
        _check_size(size)
        await self._fill(_HEADER.size + size)
        body = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
        del self.buffer[: _HEADER.size + size]
        return pickle.loads(body)

    async def send(self, message: object) -> None:
        body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        await self.stream.send_all(_HEADER.pack(len(body)) + body)


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def _dial(
    address: tuple[str, int], security: Security, index: int, context: bytes, who: str
) -> trio.abc.Stream:
    """An authenticated connection to ``address``, whose end must run ``context``.

    Raises:
        PeerLostError: it could not be reached, or failed the exchange (``who`` it is).
    """
    tls = security.tls.context(server=False) if security.tls is not None else None
    try:
        stream, hello = await dial(*address, security.secret, Hello.fresh(index, context), tls)
    except REFUSED as exc:
        msg = f"could not reach and authenticate {who} at {address[0]}:{address[1]}: {reason(exc)}"
        raise PeerLostError(msg) from exc
    if hello.context.rstrip(b"\0") != context:
        await trio.aclose_forcefully(stream)
        msg = f"{who} at {address[0]}:{address[1]} is not one (it runs {hello.context!r})"
        raise PeerLostError(msg)
    return stream


# -- a worker ------------------------------------------------------------------------------
class _Worker:
    """One worker of a stream: its peer, the rows fed to it per micro-batch and partition,
    and the output of its last step."""

    def __init__(
        self,
        peer: Peer,
        index: int,
        security: Security,
        kept: Kept,
        layout: OutputLayout | None = None,
    ) -> None:
        self.peer = peer
        #: The output's layout, to answer a step with its output as Arrow.
        self.layout = layout
        #: This task's WARNINGs, sent to the driver before each answer.
        self.kept = kept
        self.index = index
        self.security = security
        self.fed: dict[int, dict[int, Changes]] = {}
        self.output: tuple[int, Any] | None = None
        #: The door of the worker's data port: what it refused and turned away.
        self.door = Door(f"stream worker {index}", 0)

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen for the micro-batches' tasks; report ``"host:port"`` when listening.

        Its :attr:`door` bounds the connections waiting to authenticate and keeps it
        serving when ``accept()`` fails (:mod:`deltaflow.scheduler.net.door`)."""
        host = task_host()
        listeners = await trio.open_tcp_listeners(0, host=host)
        for extra in listeners[1:]:
            await extra.aclose()
        listener = listeners[0]
        port = listener.socket.getsockname()[1]
        self.door.port = port
        tls = self.security.tls.context(server=True) if self.security.tls is not None else None

        async def greet(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
            await self._answer(stream, scope, tls)

        async with listener, trio.open_nursery() as nursery:
            task_status.started(f"{host}:{port}")
            await accept_forever(listener, self.door, greet, nursery)

    async def _answer(
        self, stream: trio.SocketStream, scope: trio.CancelScope, tls: ssl.SSLContext | None
    ) -> None:
        """One task's request: rows of a partition to keep, or the last step's output."""
        try:
            host, remote = stream.socket.getpeername()[:2]
            who = f"{host}:{remote}"
        except OSError:
            who = "an unknown address"
        mine = Hello.fresh(self.index, FEED)
        try:
            try:
                with scope:
                    proved = functools.partial(self.door.leave, scope)
                    secure, hello = await accept(stream, self.security.secret, mine, tls, proved)
            finally:
                self.door.leave(scope)
            if self.door.evicted(scope):
                self.door.forget(scope)  # turned away: counted and logged already
                await trio.aclose_forcefully(stream)
                return
            if hello.context.rstrip(b"\0") != FEED:
                msg = "it is not a task of a deltaflow stream"
                raise HandshakeError(msg)
        except REFUSED as exc:
            if self.door.evicted(scope):
                self.door.forget(scope)
            else:
                self.door.refuse(who, reason(exc))
            await trio.aclose_forcefully(stream)
            return
        link = Link(secure, -1)
        try:
            (request,) = await link.receive()
            if request[0] == "feed":
                _, batch, part, changes = request
                self.fed.setdefault(batch, {})[part] = changes
                await link.send_frame([("fed", batch, part)])
            elif request[0] == "fetch":
                batch = request[1]
                if self.output is None or self.output[0] != batch:
                    gone = LookupError(
                        f"worker {self.index} holds no output of micro-batch {batch}"
                    )
                    await link.send_frame([("error", report_text(gone))])
                else:
                    await link.send_frame([("out", batch, self.output[1])])
        except (EOFError, FrameError, *REFUSED):
            pass  # the task went away: it fails on its own
        finally:
            await trio.aclose_forcefully(secure)

    async def obey(self, driver: _Reader) -> None:
        """Step as the driver says, until it says stop; settle and write this worker's share
        of a checkpoint when it says so (see :func:`~._stream.stream`'s checkpoints).

        Raises:
            RuntimeError: a step's partitions did not all reach this worker.
            OperatorError: user code failed (here or on another worker).
            CheckpointError: this worker's share of a checkpoint could not be written.
        """
        while True:
            message = await driver.receive()
            if message[0] == "stop":
                await self.tell(driver)
                return
            if message[0] == "settle":
                await self.answer(driver, ("settled", *await self.peer.settle()))
                continue
            if message[0] == "save":
                _, sequence, committed = message
                fragment = await self.peer.save_share(sequence, committed)
                await self.answer(driver, ("saved", fragment, self.peer.header(sequence)))
                continue
            _, batch, parts, extra, inline = message
            fed = self.fed.pop(batch, {})
            missing = [p for p in parts if p not in fed]
            if missing:
                msg = (
                    f"micro-batch {batch}: the rows of partition(s) {missing} did not reach "
                    f"worker {self.index}"
                )
                raise RuntimeError(msg)
            changes: Changes = {name: list(rows) for name, rows in extra.items()}
            for part in parts:
                for name, rows in fed[part].items():
                    changes.setdefault(name, []).extend(rows)
            start = time.perf_counter()
            out = await self.peer.step(changes)
            spent = time.perf_counter() - start
            self.output = (batch, out)
            arrow = self.arrow(batch, out, inline)
            await self.answer(driver, ("done", batch, spent, self.doors(), arrow))

    def arrow(self, batch: int, out: Any, limit: int) -> bytes | None:
        """The output changes ``out`` of micro-batch ``batch`` as an Arrow IPC stream at time
        ``batch``, if it takes at most ``limit`` bytes; else ``None`` (then they are fetched
        by tasks: the driver holds no large output). ``None`` too when a datum does not fit
        its schema: the fetching task raises that, naming it, as for a large output."""
        if limit <= 0 or self.layout is None:
            return None
        named: Mapping[str, Any] = out if isinstance(out, dict) else {"output": out}
        if sum(len(u) for u in named.values()) * _ROW_BYTES > limit:
            return None  # (too large whatever its columns: not converted twice)
        stamped = {n: [(d, batch, r) for d, _, r in u] for n, u in named.items()}
        try:
            batches = list(self.layout.to_arrow(stamped))
        except TypeError:
            return None
        if sum(b.nbytes for b in batches) > limit:
            return None
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, to_arrow_schema(self.layout.combined)) as writer:
            for b in batches:
                writer.write_batch(b)
        return bytes(sink.getvalue().to_pybytes())

    def doors(self) -> dict[str, int]:
        """What the doors of this worker's ports (its mesh's and its data port) counted."""
        counts = self.door.statistics()
        for what, n in self.peer.door.statistics().items():
            counts[what] += n
        return counts

    async def tell(self, driver: _Reader) -> None:
        """Send the driver this task's WARNINGs logged since the last answer."""
        records = self.kept.take()
        if records:
            await driver.send(("log", records))

    async def answer(self, driver: _Reader, message: tuple[Any, ...]) -> None:
        """Answer the driver (this task's WARNINGs first)."""
        await self.tell(driver)
        await driver.send(message)


def worker_task(
    shipped: bytes,
    peers: int,
    driver: tuple[str, int],
    security: Security,
    checkpoint: str | None = None,
    output: OutputLayout | None = None,
) -> Callable[[Iterable[int]], Iterator[Any]]:
    """The workers' barrier task: host worker ``partitionId`` of the ``shipped`` pipeline
    until the driver says stop (see the module), its state resumed from the ``checkpoint``
    location when that holds one; a step's small output goes back to the driver as Arrow
    in ``output``'s layout."""

    def task(_rows: Iterable[int]) -> Iterator[Any]:
        from pyspark import BarrierTaskContext

        started = time.time()  # (its Python worker up, deltaflow imported: the closure is)
        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()

        async def main(kept: Kept) -> None:
            stream = await _dial(driver, security, index, DRIVER, "the stream's driver")
            link = _Reader(stream)
            try:
                await serve(kept, link)
            finally:
                await trio.aclose_forcefully(stream)

        async def serve(kept: Kept, link: _Reader) -> None:
            async def exchange(me: str) -> list[str]:
                await link.send(("mesh", me))
                _, everyone = await link.receive()
                return [str(a) for a in everyone]

            def rendezvous(me: str) -> list[str]:
                # (the driver is the rendezvous: see _stream_server.WorkerServer)
                return trio.from_thread.run(exchange, me)

            async with open_peer(
                unship(shipped),
                index=index,
                peers=peers,
                rendezvous=rendezvous,
                secret=security.secret,
                tls=security.tls,
                host=task_host(),
                connect_timeout=RENDEZVOUS_TIMEOUT_S,
                checkpoint=checkpoint,
            ) as peer:
                meshed = time.time()
                worker = _Worker(peer, index, security, kept, output)
                async with trio.open_nursery() as nursery:
                    address = await nursery.start(worker.serve)
                    try:
                        hello = ("address", address, peer.resumed_at, (started, meshed))
                        await link.send(hello)
                        await worker.obey(link)
                    except Exception as exc:
                        # The driver may be gone already: then its side reports the loss.
                        lost = (OSError, trio.BrokenResourceError)
                        with trio.move_on_after(5), contextlib.suppress(*lost):
                            await worker.answer(link, ("error", report_text(exc)))
                        raise
                    nursery.cancel_scope.cancel()

        with forwarding(f"stream worker {index}") as kept, reported():
            trio.run(main, kept)
        return iter(())

    return task


# -- a micro-batch's tasks -----------------------------------------------------------------
async def _request(
    address: str, worker: int, security: Security, message: tuple[Any, ...], batch: int
) -> Any:
    """Send one request to a worker and return its answer.

    Raises:
        PeerLostError: the worker could not be reached, or went away.
    """
    who = f"worker {worker} of the stream"
    stream = await _dial(_split_address(address), security, 0, FEED, who)
    link = Link(stream, worker)
    try:
        await link.send_frame([message])
        (answer,) = await link.receive()
    except (EOFError, FrameError, *REFUSED) as exc:
        msg = f"micro-batch {batch}: lost {who} at {address} ({reason(exc)})"
        raise PeerLostError(msg) from exc
    finally:
        await trio.aclose_forcefully(stream)
    return answer


def feed_task(
    batch: int,
    addresses: Sequence[str],
    layouts: Sequence[InputLayout],
    security: Security,
    logs: Accumulator[list[Record]] | None = None,
    modes: Mapping[str, str] | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function (for ``mapInArrow``) of micro-batch ``batch``'s feeding tasks: read the
    partition's rows as changes, deal them out round-robin to the workers at ``addresses``,
    and return a row ``(part, worker, rows, null)`` for each worker fed (an empty partition
    feeds none), then one ``(part, -1, 0, report)``: per input, the rows read and the bad
    ones left out under its ``on_bad`` mode (``modes``), as JSON (the driver decodes no
    pickle from an executor). Its WARNINGs go to the driver in ``logs`` (:mod:`~._logs`)."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        part = context.partitionId()
        with forwarding(f"micro-batch {batch}'s task {part}") as kept, reported():
            changes, report = read_changes_accounted(layouts, batches, modes or {})
            n = len(addresses)
            shares = [{name: rows[w::n] for name, rows in changes.items()} for w in range(n)]
            sizes = [sum(len(rows) for rows in share.values()) for share in shares]
            fed = [w for w in range(n) if sizes[w]]

            async def deal() -> None:
                async with trio.open_nursery() as nursery:
                    for w in fed:
                        message = ("feed", batch, part, shares[w])
                        nursery.start_soon(_request, addresses[w], w, security, message, batch)

            if fed:
                trio.run(deal)
            text = json.dumps(report, default=str)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([part] * (len(fed) + 1), pa.int64()),
                    pa.array([*fed, -1], pa.int32()),
                    pa.array([*(sizes[w] for w in fed), 0], pa.int64()),
                    pa.array([None] * len(fed) + [text], pa.string()),
                ],
                names=["part", "worker", "rows", "report"],
            )
            if logs is not None:
                logs.add(kept.take())

    return task


#: The schema of what a feeding task returns.
FED_SCHEMA = "part long, worker int, rows long, report string"


def fetch_task(
    batch: int,
    addresses: Sequence[str],
    output: OutputLayout,
    security: Security,
    logs: Accumulator[list[Record]] | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function (for ``mapInArrow`` over ``spark.range(workers)``) of the tasks that
    fetch micro-batch ``batch``'s output from the workers, as Arrow batches at time
    ``batch``; their WARNINGs go to the driver in ``logs``."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        with forwarding(f"micro-batch {batch}'s output task") as kept, reported():
            workers = [int(w) for b in batches for w in b.column(0).to_pylist()]
            for w in workers:
                request = ("fetch", batch)
                answer = trio.run(_request, addresses[w], w, security, request, batch)
                if answer[0] == "error":
                    raise from_text(answer[1]) or RuntimeError(answer[1])
                out = answer[2]
                named: Mapping[str, Any] = out if isinstance(out, dict) else {"output": out}
                stamped = {n: [(d, batch, r) for d, _, r in u] for n, u in named.items()}
                yield from output.to_arrow(stamped)
            if logs is not None:
                logs.add(kept.take())

    return task
