"""``stream``: a pipeline kept running in one barrier job, one time per streaming micro-batch.

How it runs: :func:`stream` starts a long-lived barrier job (from a driver thread) whose
``partitions`` tasks each host one worker of the dataflow (:func:`deltaflow.scheduler.peer.
open_peer`: one ``allGather``, then their own TCP mesh), and a Structured Streaming query
over the inputs whose ``foreachBatch`` function drives them. Each worker connects back to a
small TCP server on the driver; like the workers' mesh, the server admits only connections
that prove they hold the secret the driver made for this stream and shipped in the tasks'
closure (:mod:`deltaflow.scheduler.handshake`), and stops listening once every worker is in.
For micro-batch ``b``, the driver reads the batch's rows as
Arrow, turns them into ``(data, diff)`` changes (checking every row), deals them out to the
workers, and each worker steps its dataflow through one time and answers with the output
changes that ended on it; their union is the micro-batch's output changes, which go to the
sink as a DataFrame of the schema's columns plus ``time`` (the batch id) and ``diff``.

The workers keep the pipeline's state from one micro-batch to the next: nothing is
recomputed. That state lives only in the job: a restarted query starts from empty
collections (use a fresh checkpoint location).

Slots: ``partitions`` for the workers as long as the stream runs, and at least one more for
each micro-batch's own Spark jobs (reading the source, writing the sink).

Failure: user code raising in a worker fails the micro-batch with the worker's message (the
operator named), so the query stops with it; the barrier job fails too, and a later
micro-batch cannot run. Stopping the query (:meth:`SparkStream.stop`) ends the workers and
their job.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import socket
import statistics
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import pyarrow as pa
import trio

from ...errors import DeltaflowError, PeerLostError
from ...scheduler.handshake import (
    HANDSHAKE_TIMEOUT_S,
    HandshakeError,
    Hello,
    authenticate,
    authenticate_socket,
)
from ...scheduler.peer import open_peer
from ...scheduler.tcp import MAX_FRAME, FrameError
from ...scheduler.tls import TLS
from ._batch import RENDEZVOUS_TIMEOUT_S, _Security, check_inputs
from ._convert import InputLayout, OutputLayout, read_changes, tag_inputs
from ._errors import from_spark, from_text, report_text, reported
from ._ship import require_importable, ship, unship
from ._slots import require_slots, task_host

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["SparkStream", "stream"]

_HEADER = struct.Struct("!Q")
_log = logging.getLogger("deltaflow")

Sink = Callable[[Any, int], object]
"""A ``foreachBatch``-style sink: ``sink(frame, batch_id)``, the frame a DataFrame (a dict of
them for a ``build()`` returning a dict)."""


def _frame(obj: object) -> bytes:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


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


def _check_size(size: int) -> None:
    """Refuse a frame longer than a link accepts (a broken peer), before reading it."""
    if size > MAX_FRAME:
        msg = f"a frame of {size} bytes announced (at most {MAX_FRAME} are accepted)"
        raise FrameError(msg)


def _receive(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    _check_size(size)
    return pickle.loads(_read_exactly(sock, size))


def _receive_or_lost(sock: socket.socket) -> Any:
    """A worker's reply, or an ``("error", ...)`` one when its connection is gone."""
    try:
        return _receive(sock)
    except (OSError, EOFError, FrameError) as exc:
        lost = PeerLostError(f"lost a worker's connection ({exc})")
        return ("error", report_text(lost))


class _Reader:
    """Length-prefixed pickled messages from a trio stream (the worker's side)."""

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


#: What a stream's workers and its driver say they run in their handshake.
_CONTEXT = b"deltaflow stream driver"


async def _dial_driver(driver: tuple[str, int], index: int, security: _Security) -> trio.abc.Stream:
    """A connection to the driver's server, authenticated (and over TLS with ``tls``).

    Raises:
        PeerLostError: the driver could not be reached or failed the exchange.
    """
    stream = await trio.open_tcp_stream(*driver)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            secure: trio.abc.Stream = stream
            if security.tls is not None:
                secure = trio.SSLStream(stream, security.tls.context(server=False))
                await secure.do_handshake()
            hello = await authenticate(
                secure, security.secret, Hello.fresh(index, _CONTEXT), dialer=True
            )
            if hello.context.rstrip(b"\0") != _CONTEXT:
                msg = "the driver's end is not a deltaflow stream"
                raise HandshakeError(msg)
    except (HandshakeError, trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
        await trio.aclose_forcefully(stream)
        msg = f"worker {index} could not authenticate the driver at {driver}: {exc}"
        raise PeerLostError(msg) from exc
    return secure


def _worker_task(
    shipped: bytes, peers: int, driver: tuple[str, int], security: _Security
) -> Callable[[Iterable[int]], Iterator[Any]]:
    """The barrier task's function: host one worker (of the ``shipped`` pipeline), step it as
    the driver says."""

    def task(_rows: Iterable[int]) -> Iterator[Any]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()

        async def main() -> None:
            async with open_peer(
                unship(shipped),
                index=index,
                peers=peers,
                rendezvous=ctx.allGather,
                secret=security.secret,
                tls=security.tls,
                host=task_host(),
                connect_timeout=RENDEZVOUS_TIMEOUT_S,
            ) as peer:
                stream = await _dial_driver(driver, index, security)
                reader = _Reader(stream)
                try:
                    while True:
                        message = await reader.receive()
                        if message[0] == "stop":
                            break
                        _, batch_id, changes = message
                        start = time.perf_counter()
                        out = await peer.step(changes)
                        spent = time.perf_counter() - start
                        await stream.send_all(_frame(("done", batch_id, out, spent)))
                except Exception as exc:
                    with contextlib.suppress(OSError, trio.BrokenResourceError):
                        await stream.send_all(_frame(("error", report_text(exc))))
                    raise
                finally:
                    await trio.aclose_forcefully(stream)

        with reported():
            trio.run(main)
        return iter(())

    return task


@attrs.define(eq=False, repr=False)
class SparkStream:
    """A running :func:`stream`: its streaming query, its workers' job, its statistics.

    ``query`` is the Structured Streaming query (``query.lastProgress`` and the rest are
    Spark's); :meth:`stop` stops it and the workers. Use it as a context manager to stop on
    leaving the block.
    """

    spark: SparkSession
    layouts: list[InputLayout]
    output: OutputLayout
    sink: Sink
    peers: int
    _server: socket.socket
    _group: str
    query: StreamingQuery | None = None
    _thread: threading.Thread | None = None
    _links: list[socket.socket] = attrs.field(factory=list)
    _job_error: BaseException | None = None
    #: The error that stopped the stream (raised again by the query's waiting methods).
    _error: BaseException | None = None
    _stopped: bool = False
    #: Per micro-batch: the slowest worker's seconds from changes in to output complete.
    worker_seconds: list[float] = attrs.field(factory=list)
    #: Per micro-batch: seconds in the ``foreachBatch`` function (read, step, sink).
    batch_seconds: list[float] = attrs.field(factory=list)

    def _start_workers(self, job: Callable[[], object]) -> None:
        """Run the workers' barrier job in a driver thread; its failure is kept."""

        def body() -> None:
            try:
                job()
            except BaseException as exc:
                self._job_error = exc

        self._thread = threading.Thread(target=body, name=self._group, daemon=True)
        self._thread.start()

    def _join(self, timeout: float) -> bool:
        """Wait for the workers' job to end; True if it has."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _accept(self, security: _Security, timeout: float) -> None:
        """Wait for every worker to connect and authenticate (or for the job to fail).

        Each connection is authenticated in a thread of its own with its own deadline, so a
        stranger (silent, or sending anything) holds up nothing: it is refused and logged,
        and those still pending when every worker is in are closed with the server.

        Raises:
            TimeoutError: not every worker connected within ``timeout`` (naming them).
            DeltaflowError: the workers' job ended first.
        """
        links: dict[int, socket.socket] = {}
        pending: set[socket.socket] = set()
        arrived = threading.Condition()
        refused: list[str] = []
        tls = security.tls.context(server=True) if security.tls is not None else None
        port = self._server.getsockname()[1]

        def greet(sock: socket.socket, who: str) -> None:
            try:
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True)
                    with arrived:
                        pending.add(sock)
                hello = authenticate_socket(
                    sock, security.secret, Hello.fresh(0, _CONTEXT), dialer=False
                )
                if hello.context.rstrip(b"\0") != _CONTEXT:
                    msg = "it is not a worker of a deltaflow stream"
                    raise HandshakeError(msg)
                with arrived:
                    if not 0 <= hello.index < self.peers or hello.index in links:
                        msg = f"it claims to be worker {hello.index}, which is connected already"
                        raise HandshakeError(msg)
                    links[hello.index] = sock
                    pending.discard(sock)
                    arrived.notify_all()
            except (HandshakeError, OSError, ValueError) as exc:
                reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
                with arrived:
                    pending.discard(sock)
                    refused.append(f"{who} ({reason})")
                _log.warning(
                    "the stream driver refused a connection from %s to port %d: %s",
                    who,
                    port,
                    reason,
                )
                sock.close()
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        deadline = time.monotonic() + timeout
        self._server.settimeout(0.2)
        try:
            while True:
                with arrived:
                    if len(links) == self.peers:
                        break
                if self._join(0):
                    what = "the workers' job ended before every worker connected"
                    self._fail(self._workers_error(what))
                if time.monotonic() > deadline:
                    missing = sorted(set(range(self.peers)) - links.keys())
                    what = f"; refused meanwhile: {'; '.join(refused)}" if refused else ""
                    msg = f"workers {missing} did not connect within {timeout} s{what}"
                    raise TimeoutError(msg)
                try:
                    sock, address = self._server.accept()
                except TimeoutError:
                    continue
                with arrived:
                    pending.add(sock)
                who = f"{address[0]}:{address[1]}"
                threading.Thread(target=greet, args=(sock, who), daemon=True).start()
        finally:
            # Every worker is in (or the start failed): nobody else may connect, and the
            # connections still authenticating are strangers.
            self._server.close()
            with arrived:
                strangers = list(pending)
            for sock in strangers:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._links = [links[i] for i in range(self.peers)]

    def _workers_error(self, what: str, reported: str | None = None) -> BaseException:
        """The workers' error: the one a worker ``reported``, else their job's (a task's own
        error when Spark's exception carries it), else ``what`` happened."""
        error = None if reported is None else from_text(reported)
        if error is None and self._join(30) and self._job_error is not None:
            error = from_spark(self._job_error) or self._job_error
        return error if error is not None else DeltaflowError(f"{what}: no error reported")

    def _fail(self, error: BaseException) -> NoReturn:
        """Stop the stream with ``error`` (or the error that stopped it first)."""
        if self._error is None:
            self._error = error
        raise self._error

    def _on_batch(self, frame: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: one time through the workers, changes to the sink;
        whatever fails stops the stream with its error."""
        if self._error is not None:
            raise self._error
        try:
            self._step(frame, batch_id)
        except Exception as exc:
            self._fail(exc)

    def _step(self, frame: DataFrame, batch_id: int) -> None:
        start = time.perf_counter()
        table = frame.toArrow() if hasattr(frame, "toArrow") else _collect_arrow(frame)
        changes = read_changes(self.layouts, table.to_batches())
        n = self.peers
        try:
            for w, link in enumerate(self._links):
                part = {name: rows[w::n] for name, rows in changes.items()}
                link.sendall(_frame(("step", batch_id, part)))
            results: dict[str, list[tuple[Any, Any, int]]] = {n: [] for n in self.output.names}
            slowest = 0.0
            replies = [_receive_or_lost(link) for link in self._links]
            errors = [r[1] for r in replies if r[0] == "error"]
            if errors:
                # A worker that lost a peer says less than the one whose code failed.
                what = f"micro-batch {batch_id} failed in a worker"
                self._fail(self._workers_error(what, "\n".join(errors)))
            for reply in replies:
                _, _, out, spent = reply
                slowest = max(slowest, spent)
                named = out if isinstance(out, dict) else {"output": out}
                for name, updates in named.items():
                    results[name].extend((d, batch_id, r) for d, _, r in updates)
        except (OSError, EOFError) as exc:
            lost = PeerLostError(f"micro-batch {batch_id}: lost a worker ({exc})")
            self._fail(self._workers_error(str(lost), report_text(lost)))
        self.worker_seconds.append(slowest)
        batches = list(self.output.to_arrow(results))
        schema = self.output.combined
        if batches:
            combined = _frame_of(self.spark, pa.Table.from_batches(batches), schema)
        else:
            combined = self.spark.createDataFrame([], schema)
        frames = self.output.split(combined)
        self.sink(frames["output"] if self.output.single else frames, batch_id)
        self.batch_seconds.append(time.perf_counter() - start)

    def stop(self) -> None:
        """Stop the query, then the workers (their job ends); idempotent. A failure of the
        workers is the query's exception (and :attr:`failure`), not raised again here."""
        if self._stopped:
            return
        self._stopped = True
        if self.query is not None:
            self.query.stop()
        for link in self._links:
            with contextlib.suppress(OSError):
                link.sendall(_frame(("stop",)))
        if not self._join(60):
            self.spark.sparkContext.cancelJobGroup(self._group)
            self._join(30)
        for link in self._links:
            link.close()
        self._server.close()

    @property
    def error(self) -> BaseException | None:
        """The error that stopped the stream, once one did: as :func:`deltaflow.run` would
        raise it (an :class:`~deltaflow.OperatorError` naming the operator, the
        ``ValueError`` of a bad row...)."""
        if self._error is None and self._job_error is not None:
            self._error = from_spark(self._job_error) or self._job_error
        return self._error

    @property
    def failure(self) -> str | None:
        """:attr:`error` as text (``"OperatorError: operator ..."``), once there is one."""
        error = self.error
        return None if error is None else f"{type(error).__name__}: {error}"

    @contextlib.contextmanager
    def _raising_ours(self) -> Iterator[None]:
        """The query's exception raises the error that stopped the stream, from it."""
        try:
            yield
        except Exception as exc:
            error = self.error if self._error is not None else from_spark(exc)
            if error is None or error is exc:
                raise
            raise error from exc

    def process_all_available(self) -> None:
        """Block until every row available now has gone through the workers and the sink.

        Raises:
            OperatorError, ValueError, TypeError: what stopped the stream (user code raising,
                a bad row...), as :func:`deltaflow.run` raises it, from the query's exception.
        """
        assert self.query is not None
        with self._raising_ours():
            self.query.processAllAvailable()

    def await_termination(self, timeout: int | None = None) -> bool | None:
        """Wait for the query to end (see ``StreamingQuery.awaitTermination``); raises as
        :meth:`process_all_available` does."""
        assert self.query is not None
        with self._raising_ours():
            return self.query.awaitTermination(timeout)

    def statistics(self) -> dict[str, Any]:
        """Micro-batches run, and the median seconds per micro-batch: in the workers (from
        changes in to output complete) and in the whole ``foreachBatch`` function."""
        return {
            "batches": len(self.batch_seconds),
            "worker_median_s": statistics.median(self.worker_seconds or [0.0]),
            "batch_median_s": statistics.median(self.batch_seconds or [0.0]),
        }

    def __enter__(self) -> SparkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _frame_of(spark: SparkSession, table: Any, schema: Any) -> DataFrame:
    """A DataFrame of an Arrow table: directly on Spark 4, through pandas on 3.5."""
    try:
        return spark.createDataFrame(table, schema)
    except TypeError:
        return spark.createDataFrame(table.to_pandas(), schema)


def _collect_arrow(frame: DataFrame) -> Any:
    """A DataFrame's rows as an Arrow table where ``DataFrame.toArrow`` is missing (3.5)."""
    return pa.Table.from_batches(frame._collect_as_arrow())  # type: ignore[operator]


def _sink_of(
    output: OutputLayout,
    foreach_batch: Sink | None,
    path: str | None,
    table: str | Mapping[str, str] | None,
) -> Sink:
    """The one sink given, as a ``foreachBatch``-style function."""
    given = [s for s in (foreach_batch, path, table) if s is not None]
    if len(given) != 1:
        msg = "pass exactly one sink: foreach_batch=, path= (parquet) or table="
        raise TypeError(msg)
    if foreach_batch is not None:
        return foreach_batch
    if path is not None:
        root = path

        def to_parquet(frames: Any, _batch_id: int) -> None:
            if output.single:
                frames.write.mode("append").parquet(root)
            else:
                for name, frame in frames.items():
                    frame.write.mode("append").parquet(f"{root}/{name}")

        return to_parquet
    assert table is not None
    if output.single != isinstance(table, str):
        msg = "table= is one table name for one output, a dict of names by output for several"
        raise TypeError(msg)
    names = table

    def to_table(frames: Any, _batch_id: int) -> None:
        if isinstance(names, str):
            frames.write.mode("append").saveAsTable(names)
        else:
            for name, frame in frames.items():
                frame.write.mode("append").saveAsTable(names[name])

    return to_table


def stream(
    pipeline: Any,
    spark: SparkSession,
    *,
    schema: Any,
    foreach_batch: Sink | None = None,
    path: str | None = None,
    table: str | Mapping[str, str] | None = None,
    partitions: int | None = None,
    trigger: Mapping[str, Any] | None = None,
    checkpoint_location: str | None = None,
    secret: bytes | str | None = None,
    tls: TLS | None = None,
    **inputs: DataFrame,
) -> SparkStream:
    """Keep ``pipeline`` running over streaming DataFrames; each micro-batch is one time.

    Starts the workers (one long-lived barrier job of ``partitions`` tasks) and a streaming
    query over the inputs. Micro-batch ``b``'s rows are changes at time ``b`` (columns as
    for :func:`~deltaflow.adapters.spark.run`, but no ``time`` column: the batch id is the
    time; ``diff`` is optional), and its output changes reach the sink as a DataFrame of
    ``schema``'s columns plus ``time`` (= ``b``) and ``diff``. The workers keep the state
    between micro-batches, so each costs work in proportion to its changes.

    Args:
        pipeline: the :class:`~deltaflow.Pipeline` to run.
        spark: the session.
        schema: the output's schema (DDL string or ``StructType``; a dict of them by name
            for a ``build()`` returning a dict).
        foreach_batch: a sink ``fn(frame, batch_id)``, as ``DataStreamWriter.foreachBatch``
            (``frame`` a dict of DataFrames for several outputs).
        path: or: append every micro-batch's changes to parquet files there (one
            directory per output name below it for several outputs).
        table: or: append them to this table (a dict of table names by output).
        partitions: how many workers (default: the context's default parallelism minus
            one, leaving a slot for the micro-batches). ``partitions + 1`` task slots must
            be free.
        trigger: keyword arguments of ``DataStreamWriter.trigger`` (e.g.
            ``{"processingTime": "1 second"}``); Spark's default without it.
        checkpoint_location: the query's checkpoint location (Spark picks a temporary one
            without it).
        secret, tls: as for :func:`~deltaflow.adapters.spark.run`: the workers' connections
            to each other and to the driver are authenticated with ``secret`` (a fresh one
            by default) and encrypted with ``tls`` when given.
        inputs: a streaming DataFrame per input name; several are read as one union.

    Returns:
        The running :class:`SparkStream`; call :meth:`SparkStream.stop` (or use it in a
        ``with`` block) to stop the query and the workers.

    Raises:
        TypeError, ValueError: bad arguments, a non-streaming input, a ``time`` column.
        RuntimeError: fewer than ``partitions + 1`` free task slots.
        DeltaflowError: the workers did not start.

    Example::

        with dfspark.stream(WordCount(), spark, lines=lines_df, schema="word string, n long",
                            foreach_batch=lambda frame, b: frame.show()) as running:
            running.await_termination(60)
    """
    pipeline, layouts, frames, builder = check_inputs(pipeline, inputs, streaming=True)
    if not frames:
        msg = "stream() needs at least one streaming input"
        raise TypeError(msg)
    output = OutputLayout.of(schema, single=builder.single_output, names=list(builder.stores))
    sink = _sink_of(output, foreach_batch, path, table)
    sc = spark.sparkContext
    n = max(1, sc.defaultParallelism - 1) if partitions is None else partitions
    if n.__class__ is not int or n < 1:
        msg = f"partitions must be a positive int, not {partitions!r}"
        raise ValueError(msg)
    what = f"dfspark.stream of {type(pipeline).__name__} with partitions={n}"
    require_slots(sc, n + 1, f"{what} (plus one for micro-batches)")
    shipment = ship(pipeline)
    require_importable(sc, shipment.by_reference, what)
    host = sc.getConf().get("spark.driver.host") or task_host()
    security = _Security.of(secret, tls)
    server = socket.create_server((host, 0))
    group = f"deltaflow-stream-{uuid.uuid4().hex}"
    task = _worker_task(shipment.blob, n, (host, server.getsockname()[1]), security)

    def job() -> None:
        sc.setJobGroup(group, "deltaflow stream workers", interruptOnCancel=True)
        sc.parallelize(range(n), n).barrier().mapPartitions(task).collect()

    running = SparkStream(spark, layouts, output, sink, n, server, group)
    try:
        running._start_workers(job)
        running._accept(security, RENDEZVOUS_TIMEOUT_S)
        writer = tag_inputs(spark, layouts, frames).writeStream.foreachBatch(running._on_batch)
        if trigger:
            writer = writer.trigger(**trigger)
        if checkpoint_location is not None:
            writer = writer.option("checkpointLocation", checkpoint_location)
        running.query = writer.start()
    except BaseException:
        running.stop()
        raise
    return running
