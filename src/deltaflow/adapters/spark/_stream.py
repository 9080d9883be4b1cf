"""``stream``: a pipeline kept running in one barrier job, one time per streaming micro-batch.

How it runs: :func:`stream` starts a long-lived barrier job (from a driver thread) whose
``partitions`` tasks each host one worker of the dataflow, and a Structured Streaming query
over the inputs whose ``foreachBatch`` function drives them (the tasks are in
:mod:`._stream_tasks`). Each worker connects back to a small TCP server on the driver; like
the workers' mesh, the server admits only connections that prove they hold the secret the
driver made for this stream and shipped in the tasks' closure
(:mod:`deltaflow.scheduler.net.handshake`), and stops listening once every worker is in. The
driver is also the workers' rendezvous: each says there where its mesh listens and is told
where every other's does.

One Spark job per micro-batch reads its rows. A micro-batch Spark estimates small
(:data:`INLINE_BYTES`, from its plan's statistics) is collected by the driver as Arrow (a job
with no Python tasks) and its changes dealt out round-robin with the step. A larger one is
read by tasks that deal their partitions' rows out to the workers directly; the driver
collects a row per partition and worker fed (the ids and the row count) and tells every
worker which partitions to take. Every worker then steps through one time (the dataflow's
exchanges route the rows to their owners) and answers with its output changes of ``b`` as
Arrow when they are small (:data:`INLINE_OUTPUT_BYTES`): the sink's DataFrame (the schema's
columns plus ``time``, the batch id, and ``diff``) is then made of them on the driver, with
no Spark job; else it is made of tasks that fetch each worker's output changes from it. So
the driver holds a micro-batch's rows or output only when they are small.

Static inputs (a static DataFrame, a Python list of data) are fed once, with the workers'
first micro-batch: the static DataFrames' rows read by that micro-batch's feeding tasks beside
its own (their tagged union), the lists' shares sent by the driver with the step. A stream
resumed from a checkpoint holds them already.

The workers keep the pipeline's state from one micro-batch to the next: nothing is
recomputed. Without a ``checkpoint_location`` that state lives only in the job.

Checkpoints: with ``checkpoint_location=L`` (Spark's own checkpoint location, where it logs
the offsets of every micro-batch and commits each once ``foreachBatch`` returns), the workers'
state is checkpointed under ``L/deltaflow`` (:mod:`deltaflow.scheduler.checkpoint`'s format)
with every micro-batch, micro-batch ids being the dataflow's times. For micro-batch ``b``,
inside ``foreachBatch``: the workers step through time ``b``, the sink takes the changes,
then the driver has the workers settle (rounds of their message counts until nothing is in
flight), each write its share, and commits the manifest at time ``b + 1``; only then does
``foreachBatch`` return and Spark commit ``b``. So Spark's commit of ``b`` implies the
checkpoint holds ``b``. A query restarted on ``L`` has its workers resume at the checkpoint's
time ``T`` and Spark resume at its first uncommitted micro-batch ``b0 <= T``: micro-batches
``b0 .. T - 1`` (run and sunk, the checkpoint committed, Spark stopped before committing
them) are skipped, not applied twice, and their sink is not called again; ``b0 = T`` (run,
perhaps sunk, not checkpointed) is applied again, to the state from before it, with the same
rows (Spark re-reads the offsets it logged): its changes are the same as the first time.
The ``path`` and ``table`` sinks then write it only if they do not hold changes at time
``T`` already, so their contents are an uninterrupted run's; a ``foreach_batch`` sink may see
that micro-batch again. ``b0 > T`` means the checkpoint lacks micro-batches Spark committed
(``L/deltaflow`` replaced or removed): an error, not a silent gap.

Slots: ``partitions`` for the workers as long as the stream runs, and at least one more for
each micro-batch's own Spark jobs (reading the rows, fetching a large output, the sink's
writing).

Failure: user code raising in a worker fails the micro-batch with the worker's message (the
operator named), so the query stops with it; the barrier job fails too, and a later
micro-batch cannot run. Stopping the query (:meth:`SparkStream.stop`) ends the workers and
their job.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import pyarrow as pa
import trio

from ...errors import CheckpointError, DeltaflowError, PeerLostError
from ...operators.collection import Pipeline
from ...scheduler.accounting import InputAccount, Rejected, make_accounts
from ...scheduler.checkpoint import Checkpointer, settled
from ...scheduler.local.plan import make_plan
from ...scheduler.net.door import Door, reset
from ...scheduler.net.handshake import (
    HANDSHAKE_TIMEOUT_S,
    HandshakeError,
    Hello,
    authenticate_socket,
)
from ...scheduler.net.tcp import FrameError
from ...scheduler.net.tls import TLS
from ...scheduler.state_layout import check_code, check_pipeline, state_layout
from ._batch import RENDEZVOUS_TIMEOUT_S, _Security, check_inputs
from ._convert import (
    InputLayout,
    OutputLayout,
    read_changes_accounted,
    tag_inputs,
    to_arrow_schema,
)
from ._errors import from_spark, from_text, raise_from, report_text, translated
from ._logs import Record, records_accumulator, relog
from ._ship import require_importable, ship
from ._slots import require_slots, task_host
from ._stream_tasks import (
    DRIVER,
    FED_SCHEMA,
    feed_task,
    fetch_task,
    receive,
    send,
    worker_task,
)

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["SparkStream", "stream"]

_log = logging.getLogger("deltaflow")

Sink = Callable[[Any, int], object]
"""A ``foreachBatch``-style sink: ``sink(frame, batch_id)``, the frame a DataFrame (a dict of
them for a ``build()`` returning a dict)."""

Holds = Callable[[str, int], bool]
"""``holds(output, time)``: whether a sink already holds changes of ``output`` at ``time``."""

#: Where, under a stream's checkpoint location, its workers' state is kept.
STATE_FOLDER = "deltaflow"

#: A micro-batch whose size Spark estimates at most this (bytes of its plan's sources: the
#: files' sizes for a file source) is collected by the driver as Arrow and dealt out with
#: the step: one Spark job with no Python tasks, where feeding tasks cost a Python stage.
#: A larger one (or one Spark cannot estimate) is read by feeding tasks, so the driver
#: never holds a large micro-batch.
INLINE_BYTES = 4 << 20

#: A worker answers a step with its output as Arrow when that takes at most this many
#: bytes; when every worker did, the sink's DataFrame is made of them on the driver (no
#: Spark job), else tasks fetch the output from the workers.
INLINE_OUTPUT_BYTES = 8 << 20


#: The rows of an Arrow batch Spark makes a DataFrame of (its default
#: ``spark.sql.execution.arrow.maxRecordsPerBatch``).
_ARROW_ROWS = 10_000


def estimated_bytes(frame: DataFrame) -> int | None:
    """Spark's estimate of ``frame``'s size in bytes (its optimized plan's statistics, which
    its execution reuses), or ``None`` where it has none."""
    try:
        stats = frame._jdf.queryExecution().optimizedPlan().stats()
        # (a Scala BigInt: py4j gives an int, or the object, whose text is the number)
        return int(str(stats.sizeInBytes()))
    except Exception:  # no estimate: take the path that never holds the rows
        return None


def state_location(checkpoint_location: str) -> str:
    """Where the workers' checkpoints of a stream with ``checkpoint_location`` (qualified:
    :func:`qualified`) are kept.

    >>> state_location("s3://bucket/queries/words/")
    's3://bucket/queries/words/deltaflow'
    """
    return f"{checkpoint_location.rstrip('/')}/{STATE_FOLDER}"


def qualified(spark: SparkSession, location: str) -> str:
    """``location`` as Spark resolves a checkpoint location: against its default filesystem
    and the driver's working directory. A local one becomes an absolute path (the workers,
    in the executors' own directories, reach the same place), another a full URI
    (``hdfs://namenode:8020/...`` where HDFS is the default).
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = path.getFileSystem(conf).makeQualified(path).toUri()
    if uri.getScheme() == "file":
        return str(uri.getPath())
    return str(uri.toString())


def _shut(sock: socket.socket) -> None:
    """End a connection still authenticating (its thread then closes the socket)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _receive_or_lost(sock: socket.socket) -> Any:
    """A worker's reply, or an ``("error", ...)`` one when its connection is gone."""
    try:
        return receive(sock)
    except (OSError, EOFError, FrameError) as exc:
        lost = PeerLostError(f"lost a worker's connection ({exc})")
        return ("error", report_text(lost))


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
    _security: _Security
    #: Where the workers' state is checkpointed (``None``: it lives only in the job).
    _state: Checkpointer | None = None
    #: Says whether the path or table sink holds an output's changes at a time already.
    _holds: Holds | None = None
    #: The time the workers resumed at from the checkpoint (``None``: they started afresh).
    resumed_at: int | None = None
    query: StreamingQuery | None = None
    _thread: threading.Thread | None = None
    _links: list[socket.socket] = attrs.field(factory=list)
    #: Each worker's ``host:port``, where the micro-batches' tasks reach it.
    _addresses: list[str] = attrs.field(factory=list)
    _job_error: BaseException | None = None
    #: The error that stopped the stream (raised again by the query's waiting methods).
    _error: BaseException | None = None
    _stopped: bool = False
    #: Per micro-batch: the slowest worker's seconds from changes in to output complete.
    worker_seconds: list[float] = attrs.field(factory=list)
    #: Per micro-batch: seconds in the ``foreachBatch`` function (feed, step, sink).
    batch_seconds: list[float] = attrs.field(factory=list)
    #: Per micro-batch: how many rows its partitions fed the workers.
    batch_rows: list[int] = attrs.field(factory=list)
    #: Per micro-batch: seconds of the job that reads its rows and deals them out.
    feed_seconds: list[float] = attrs.field(factory=list)
    #: Per micro-batch: whether the driver collected its rows (else feeding tasks read them).
    inline_batches: list[bool] = attrs.field(factory=list)
    #: Per micro-batch: seconds in the sink (its Spark jobs, the output's fetch included).
    sink_seconds: list[float] = attrs.field(factory=list)
    #: Per micro-batch: seconds to checkpoint the workers' state (with checkpoint_location).
    checkpoint_seconds: list[float] = attrs.field(factory=list)
    #: Micro-batches skipped as re-runs of ones the checkpoint holds already.
    skipped: list[int] = attrs.field(factory=list)
    #: The workers' time: the micro-batch they step through next.
    _time: int = 0
    #: The number of the next checkpoint.
    _sequence: int = 1
    #: Per worker, the wall-clock times its task began (its Python worker up, deltaflow
    #: imported) and its mesh was up (the rendezvous done), as it said when it connected.
    _started: list[tuple[float, float]] = attrs.field(factory=list)
    #: Per worker, the time it resumed at (as it said when it connected).
    _resumed: list[int | None] = attrs.field(factory=list)
    #: The door of the driver's server: what it refused and turned away.
    _door: Door = attrs.field(factory=lambda: Door("the stream driver", 0))
    #: Per worker, what the doors of its ports counted (as it said with its last answer).
    _worker_doors: dict[int, dict[str, int]] = attrs.field(factory=dict)
    #: What the manifests say of the operators' code: the driver's digests (``"code"``).
    _code: dict[str, Any] | None = None
    #: The static inputs, fed with the workers' first micro-batch (then dropped): their
    #: DataFrames' layouts and tagged union, and the Python lists by input name.
    _static_layouts: list[InputLayout] = attrs.field(factory=list)
    _static: DataFrame | None = None
    _lists: dict[str, list[Any]] = attrs.field(factory=dict)
    #: Per input, the rows read and the bad ones set aside, by micro-batch
    #: (:mod:`deltaflow.scheduler.accounting`; checkpointed with the workers' state).
    accounts: dict[str, InputAccount] = attrs.field(factory=dict)

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
        """Wait for every worker to connect and authenticate (or for the job to fail), be
        their rendezvous, and wait for each to say its port and resumed time.

        Each connection is authenticated in a thread of its own with its own deadline, so a
        stranger (silent, or sending anything) holds up nothing: it is refused and logged,
        and those still pending when every worker is in are closed with the server. Each
        worker says the address of its mesh's port first; once all have, each is sent all
        of them (in index order), from which the workers open their mesh. This is the
        workers' rendezvous: Spark's ``allGather`` would cost them a second (its JVM side
        polls each second).

        Raises:
            TimeoutError: not every worker connected within ``timeout`` (naming them).
            DeltaflowError: the workers' job ended first.
        """
        links: dict[int, socket.socket] = {}
        meshes: dict[int, str] = {}
        addresses: dict[int, str] = {}
        resumed: dict[int, int | None] = {}
        pending: set[socket.socket] = set()
        arrived = threading.Condition()
        refused: list[str] = []
        tls = security.tls.context(server=True) if security.tls is not None else None
        port = self._server.getsockname()[1]

        door = self._door
        door.port = port

        def greet(sock: socket.socket, who: str, scope: trio.CancelScope) -> None:
            try:
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True)
                    with arrived:
                        pending.add(sock)
                hello = authenticate_socket(
                    sock,
                    security.secret,
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
                # loaded from a checkpoint): it has proved the secret, so it gets the time
                # the workers have to start, not a handshake's.
                sock.settimeout(timeout)
                _, mesh = receive(sock)
                with arrived:
                    if not 0 <= hello.index < self.peers or hello.index in links:
                        msg = f"it claims to be worker {hello.index}, which is connected already"
                        raise HandshakeError(msg)
                    links[hello.index] = sock
                    meshes[hello.index] = str(mesh)
                    pending.discard(sock)
                    arrived.notify_all()
            except (HandshakeError, OSError, ValueError, EOFError, FrameError) as exc:
                door.leave(scope)
                reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
                with arrived:
                    pending.discard(sock)
                if door.evicted(scope):
                    door.forget(scope)  # turned away: counted and logged already
                else:
                    with arrived:
                        refused.append(f"{who} ({reason})")
                    door.refuse(who, reason)
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
                    what = f"; refused meanwhile: {door.summary(refused)}" if refused else ""
                    msg = f"workers {missing} did not connect within {timeout} s{what}"
                    raise TimeoutError(msg)
                try:
                    sock, address = self._server.accept()
                except TimeoutError:
                    continue
                except OSError as exc:  # out of file descriptors...: serve on
                    # (at least a moment: a socket turned away closes in its own thread)
                    time.sleep(max(door.accept_failed(exc), 0.01))
                    continue
                with arrived:
                    pending.add(sock)
                who = f"{address[0]}:{address[1]}"
                scope = door.enter(functools.partial(reset, sock))
                threading.Thread(target=greet, args=(sock, who, scope), daemon=True).start()
        finally:
            # Every worker is in (or the start failed): nobody else may connect, and the
            # connections still authenticating are strangers.
            self._server.close()
            with arrived:
                strangers = list(pending)
            for sock in strangers:
                _shut(sock)
        self._links = [links[i] for i in range(self.peers)]
        everyone = [meshes[i] for i in range(self.peers)]
        try:
            for link in self._links:
                send(link, ("peers", everyone))
            for i, link in enumerate(self._links):
                link.settimeout(max(deadline - time.monotonic(), 1.0))
                _, address, resumed_at, (started, meshed) = receive(link)
                link.settimeout(None)
                addresses[i] = str(address)
                resumed[i] = None if resumed_at is None else int(resumed_at)
                self._started.append((float(started), float(meshed)))
        except (OSError, EOFError, FrameError) as exc:
            what = f"the workers did not open their mesh ({exc})"
            self._fail(self._workers_error(what))
        self._addresses = [addresses[i] for i in range(self.peers)]
        self._resumed = [resumed[i] for i in range(self.peers)]

    def _check_resumed(self) -> None:
        """Check that every worker resumed where the driver found the checkpoint.

        Raises:
            CheckpointError: the workers found another checkpoint there (the executors reach
                another place by that name, or another job uses the location).
        """
        if self._state is not None and any(r != self.resumed_at for r in self._resumed):
            msg = (
                f"the workers resumed at times {self._resumed} from "
                f"{self._state.store.describe()}, where the driver found a checkpoint at "
                f"{self.resumed_at}: do the executors reach the same location as the driver "
                "(a shared filesystem), and does no other job use it?"
            )
            raise CheckpointError(msg)

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

    def _ask(self, messages: list[tuple[Any, ...]], batch_id: int) -> list[Any]:
        """Send each worker its message; their answers (a worker's error stops the stream),
        the WARNINGs they sent before logged here."""
        try:
            for message, link in zip(messages, self._links, strict=True):
                send(link, message)
            replies = [self._reply(link) for link in self._links]
        except (OSError, EOFError) as exc:
            lost = PeerLostError(f"micro-batch {batch_id}: lost a worker ({exc})")
            self._fail(self._workers_error(str(lost), report_text(lost)))
        for i, r in enumerate(replies):
            if r[0] == "done":
                self._worker_doors[i] = dict(r[3])
        errors = [r[1] for r in replies if r[0] == "error"]
        if errors:
            # A worker that lost a peer says less than the one whose code failed.
            what = f"micro-batch {batch_id} failed in a worker"
            self._fail(self._workers_error(what, "\n".join(errors)))
        return replies

    @staticmethod
    def _reply(link: socket.socket) -> Any:
        """A worker's next answer; the WARNINGs it sends first are logged here."""
        while True:
            reply = _receive_or_lost(link)
            if reply[0] != "log":
                return reply
            relog(reply[1])

    def _drain(self) -> None:
        """Log what the workers, stopped, sent and nobody read (their last WARNINGs)."""
        for link in self._links:
            with contextlib.suppress(OSError, EOFError, FrameError):
                link.settimeout(1.0)
                while True:
                    reply = receive(link)
                    if reply[0] == "log":
                        relog(reply[1])

    def _step(self, frame: DataFrame, batch_id: int) -> None:
        """Feed micro-batch ``batch_id``'s rows to the workers, step them, sink the output,
        checkpoint the workers' state (with a checkpoint location).

        A micro-batch Spark estimates small (:data:`INLINE_BYTES`) is collected by the
        driver as Arrow in one Spark job and dealt out with the step; a larger one is read
        by feeding tasks that deal their partitions' rows to the workers themselves. The
        workers answer the step with a small output as Arrow, which becomes the sink's
        DataFrame on the driver (no Spark job); a larger output is fetched by tasks."""
        if self._state is not None and not self._in_turn(batch_id):
            return
        start = time.perf_counter()
        layouts = self.layouts
        extra: list[dict[str, list[tuple[Any, int]]]] = [{} for _ in self._links]
        first = self._static is not None or bool(self._lists)
        if self._static is not None:
            frame = frame.unionByName(self._static, allowMissingColumns=True)
            layouts = [*layouts, *self._static_layouts]
        for name, data in self._lists.items():
            for w, share in enumerate(extra):
                share[name] = [(d, 1) for d in data[w :: self.peers]]
        size = estimated_bytes(frame)
        inline = size is not None and size <= INLINE_BYTES
        planned = time.perf_counter()
        if inline:
            parts, rows, reports = self._collect(frame, layouts, batch_id, extra)
        else:
            parts, rows, reports = self._feed(frame, layouts, batch_id)
        fed = time.perf_counter()
        self.feed_seconds.append(fed - start)
        self.inline_batches.append(inline)
        steps = [
            ("step", batch_id, sorted(p), e, INLINE_OUTPUT_BYTES)
            for p, e in zip(parts, extra, strict=True)
        ]
        replies = self._ask(steps, batch_id)
        stepped = time.perf_counter()
        self._account(batch_id, reports)
        if first:  # the static inputs are in the workers' state from now on
            self._static, self._lists = None, {}
        self.worker_seconds.append(max(r[2] for r in replies))
        self.batch_rows.append(rows)
        logs = records_accumulator(self.spark.sparkContext)
        combined, fetched = self._output(batch_id, replies, logs)
        frames = self.output.split(combined)
        if self._holds is not None and batch_id == self.resumed_at:
            # Run before, perhaps sunk, not checkpointed: what a sink holds already stays.
            frames = {name: f for name, f in frames.items() if not self._holds(name, batch_id)}
        sinking = time.perf_counter()
        try:
            if frames:
                with translated():
                    self.sink(frames["output"] if self.output.single else frames, batch_id)
        finally:
            if fetched:
                combined.unpersist()
            relog(logs.value)
        sunk = time.perf_counter()
        self.sink_seconds.append(sunk - sinking)
        if self._state is not None:
            self._checkpoint(self._state, batch_id)
            self.checkpoint_seconds.append(time.perf_counter() - sunk)
        self._time = batch_id + 1
        end = time.perf_counter()
        self.batch_seconds.append(end - start)
        _log.debug(
            "micro-batch %d: %d rows %s (estimated %s bytes); plan %.3f s, feed %.3f s, "
            "step %.3f s (workers %.3f s), output %s %.3f s, sink %.3f s, checkpoint %.3f s",
            batch_id,
            rows,
            "through the driver" if inline else "by feeding tasks",
            size,
            planned - start,
            fed - planned,
            stepped - fed,
            self.worker_seconds[-1],
            "fetched by tasks" if fetched else "from the workers' answers",
            sinking - stepped,
            sunk - sinking,
            end - sunk,
        )

    def _collect(
        self,
        frame: DataFrame,
        layouts: list[InputLayout],
        batch_id: int,
        extra: list[dict[str, list[tuple[Any, int]]]],
    ) -> tuple[list[list[int]], int, list[tuple[int, dict[str, Any]]]]:
        """Read a small micro-batch on the driver (one Spark job, its rows as Arrow) and deal
        its changes into ``extra``, round-robin; the partitions fed (none), the rows read and
        the report of its bad rows (as the feeding tasks make it, one "partition")."""
        with translated():
            batches = frame._collect_as_arrow()  # type: ignore[operator]
        modes = {name: a.mode for name, a in self.accounts.items()}
        changes, report = read_changes_accounted(layouts, batches, modes)
        n = self.peers
        for name, dealt in changes.items():
            for w, share in enumerate(extra):
                share.setdefault(name, []).extend(dealt[w::n])
        rows = sum(int(seen["read"]) for seen in report.values())
        # (as JSON, as from a feeding task: the same data in the quarantine either way)
        decoded = json.loads(json.dumps(report, default=str))
        return [[] for _ in self._links], rows, [(0, decoded)]

    def _feed(
        self, frame: DataFrame, layouts: list[InputLayout], batch_id: int
    ) -> tuple[list[list[int]], int, list[tuple[int, dict[str, Any]]]]:
        """Have feeding tasks read the micro-batch's partitions and deal their rows to the
        workers (one Spark job); per worker the partitions that fed it, the rows read, and
        each partition's report of its bad rows."""
        logs = records_accumulator(self.spark.sparkContext)
        modes = {name: a.mode for name, a in self.accounts.items()}
        feeding = frame.mapInArrow(
            feed_task(batch_id, self._addresses, layouts, self._security, logs, modes),
            FED_SCHEMA,
        )
        try:
            with translated():
                fed = feeding.collect()
        finally:
            relog(logs.value)
        parts: list[list[int]] = [[] for _ in self._links]
        reports = []
        rows = 0
        for part, worker, count, report in fed:
            if worker < 0:
                reports.append((int(part), json.loads(report)))
            else:
                parts[worker].append(int(part))
                rows += int(count)
        return parts, rows, reports

    def _output(
        self, batch_id: int, replies: list[Any], logs: Accumulator[list[Record]]
    ) -> tuple[DataFrame, bool]:
        """The sink's DataFrame of micro-batch ``batch_id``'s output, and whether tasks fetch
        it (then it is persisted: the first of the sink's actions fetches every output's rows
        in one stage, the others read them there). Made on the driver from the workers'
        answers when each sent its output as Arrow."""
        arrows = [r[4] for r in replies]
        if all(a is not None for a in arrows):
            schema = to_arrow_schema(self.output.combined)
            batches = [b for a in arrows for b in pa.ipc.open_stream(a)]
            # One chunk: a batch per 10,000 rows (Spark's Arrow batch size), not one per
            # worker's batch; and as many partitions (Spark spreads them over as many as it
            # has slots), so a small output is one task per stage of the sink's jobs.
            table = pa.Table.from_batches(batches, schema=schema).combine_chunks()
            frame = self.spark.createDataFrame(table, self.output.combined)
            return frame.coalesce(max(1, len(table.to_batches(_ARROW_ROWS)))), False
        n = self.peers
        fetch = fetch_task(batch_id, self._addresses, self.output, self._security, logs)
        combined = self.spark.range(0, n, 1, n).mapInArrow(fetch, self.output.combined)
        return combined.persist(), True

    def _account(self, batch_id: int, reports: list[tuple[int, dict[str, Any]]]) -> None:
        """Fold the feeding tasks' reports (decoded JSON: per input, rows read and the bad
        ones left out) into the inputs' accounts, at time ``batch_id``."""
        for part, report in sorted(reports, key=lambda r: r[0]):
            for name, seen in report.items():
                account = self.accounts.get(name)
                if account is None:
                    continue
                account.admitted(batch_id, int(seen["read"]) - len(seen["bad"]))
                for datum, reason, row in seen["bad"]:
                    where = f"micro-batch {batch_id}, partition {part}, row {row}"
                    account.refuse(ValueError(reason), _as_datum(datum), where, batch_id)

    def rejected(self) -> list[Rejected]:
        """The rows set aside by inputs whose ``on_bad`` is ``"quarantine"``, each with its
        input, the reason and where it came from (micro-batch, partition, row), in the order
        of their micro-batches (a stream resumed from its checkpoint has those of the
        micro-batches before it too)."""
        return [r for account in self.accounts.values() for r in account.rejected()]

    def _in_turn(self, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` is the workers' next time (False: a re-run of one
        the checkpoint holds already, skipped).

        Raises:
            CheckpointError: Spark committed micro-batches the checkpoint does not hold.
        """
        if batch_id < self._time:
            self.skipped.append(batch_id)
            _log.info(
                "micro-batch %d skipped: the checkpoint holds it already (time %d)",
                batch_id,
                self._time,
            )
            return False
        if batch_id > self._time:
            assert self._state is not None
            msg = (
                f"Spark runs micro-batch {batch_id} but {self._state.store.describe()} holds "
                f"the workers' state up to micro-batch {self._time - 1} only: the state of "
                f"micro-batches {self._time} to {batch_id - 1} is missing (was it removed or "
                "replaced?); start the query on a fresh checkpoint location"
            )
            raise CheckpointError(msg)
        return True

    def _checkpoint(self, state: Checkpointer, batch_id: int) -> None:
        """Checkpoint the workers at time ``batch_id + 1``: settle, write the shares, commit.

        Raises:
            CheckpointError: a share or the manifest could not be written.
        """
        last: list[tuple[int, int]] | None = None
        while True:
            replies = self._ask([("settle",)] * self.peers, batch_id)
            counts = [(int(r[1]), int(r[2])) for r in replies]
            if settled(last, counts):
                break
            last = counts
        sequence = self._sequence
        replies = self._ask([("save", sequence, sequence - 1)] * self.peers, batch_id)
        header = replies[0][2]
        if self._code is not None:  # (the code the driver checks a restart against)
            header = {**header, "code": self._code}
        # The driver's accounts, under a key of their own (the workers' jobs keep theirs).
        saved = {name: a.saved(batch_id + 1) for name, a in self.accounts.items()}
        header = {**header, "spark_inputs": saved}
        state.commit(header, [r[1] for r in replies])
        self._sequence = sequence + 1

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
                send(link, ("stop",))
        if not self._join(60):
            self.spark.sparkContext.cancelJobGroup(self._group)
            self._join(30)
        self._drain()
        for link in self._links:
            link.close()
        self._server.close()
        if self._state is not None:
            self._state.unlock()  # (the checkpoint location: another query may use it now)

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
            raise_from(error, exc)

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
        """Micro-batches run and rows fed, micro-batches skipped (re-runs the checkpoint held
        already), and the median seconds per micro-batch: reading and dealing its rows, in
        the workers (from changes in to output complete), in the sink (the output's fetch
        and the sink's own Spark jobs), checkpointing the workers' state
        (0 without a checkpoint location), and in the whole ``foreachBatch`` function (the
        sink's work and the checkpoint included). ``refused``, ``turned_away`` and
        ``accept_errors`` count what the doors of the driver's server and of the workers'
        ports (their mesh's and their data ports, as of their last answer) refused (failed
        the exchange), turned away (too many waiting to authenticate) and failed to accept
        (out of file descriptors...): :mod:`deltaflow.scheduler.net.door`. ``inputs``: per input
        fed through micro-batches, its rows ``read``, ``accepted``, ``refused``, ``skipped``
        and ``quarantined`` (its ``on_bad`` mode; :meth:`rejected` holds the quarantined)."""
        doors = self._door.statistics()
        for counts in self._worker_doors.values():
            for what, n in counts.items():
                doors[what] = doors.get(what, 0) + n
        return {
            "batches": len(self.batch_seconds),
            "inputs": {name: a.counts() for name, a in self.accounts.items()},
            "rows": sum(self.batch_rows),
            "skipped": len(self.skipped),
            "refused": doors["refused"],
            "turned_away": doors["turned_away"],
            "accept_errors": doors["accept_errors"],
            "feed_median_s": statistics.median(self.feed_seconds or [0.0]),
            "worker_median_s": statistics.median(self.worker_seconds or [0.0]),
            "sink_median_s": statistics.median(self.sink_seconds or [0.0]),
            "checkpoint_median_s": statistics.median(self.checkpoint_seconds or [0.0]),
            "batch_median_s": statistics.median(self.batch_seconds or [0.0]),
        }

    def __enter__(self) -> SparkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _as_datum(value: Any) -> Any:
    """A datum decoded from JSON: its lists as the tuples a row's columns were."""
    if isinstance(value, list):
        return tuple(_as_datum(v) for v in value)
    return value


def _sink_of(
    spark: SparkSession,
    output: OutputLayout,
    foreach_batch: Sink | None,
    path: str | None,
    table: str | Mapping[str, str] | None,
) -> tuple[Sink, Holds | None]:
    """The one sink given, as a ``foreachBatch``-style function; for the path and table
    sinks, also a function saying whether they hold an output's changes at a time already
    (every change of micro-batch ``b`` is at time ``b``, and each is appended by one Spark
    job, committed whole)."""
    given = [s for s in (foreach_batch, path, table) if s is not None]
    if len(given) != 1:
        msg = "pass exactly one sink: foreach_batch=, path= (parquet) or table="
        raise TypeError(msg)
    if foreach_batch is not None:
        return foreach_batch, None
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    def has_time(frame: DataFrame, at: int) -> bool:
        return bool(frame.where(F.col("time") == at).limit(1).count())

    if path is not None:
        root = path

        def folder(name: str) -> str:
            return root if output.single else f"{root}/{name}"

        def to_parquet(frames: Any, _batch_id: int) -> None:
            if output.single:
                frames.write.mode("append").parquet(root)
            else:
                for name, frame in frames.items():
                    frame.write.mode("append").parquet(folder(name))

        def parquet_holds(name: str, at: int) -> bool:
            try:
                written = spark.read.parquet(folder(name))
            except AnalysisException:
                return False  # nothing written there yet (no such path, or no files)
            return has_time(written, at)

        return to_parquet, parquet_holds
    assert table is not None
    if output.single != isinstance(table, str):
        msg = "table= is one table name for one output, a dict of names by output for several"
        raise TypeError(msg)
    names = table

    def table_of(name: str) -> str:
        return names if isinstance(names, str) else names[name]

    def to_table(frames: Any, _batch_id: int) -> None:
        if isinstance(names, str):
            frames.write.mode("append").saveAsTable(names)
        else:
            for name, frame in frames.items():
                frame.write.mode("append").saveAsTable(names[name])

    def table_holds(name: str, at: int) -> bool:
        t = table_of(name)
        return spark.catalog.tableExists(t) and has_time(spark.table(t), at)

    return to_table, table_holds


def _open_state(
    pipeline: Pipeline, checkpoint_location: str, workers: int, allow_code_change: bool
) -> tuple[Checkpointer, dict[str, Any] | None, dict[str, Any]]:
    """The checkpointer of a stream's workers' state under ``checkpoint_location``, locked
    for this query (until :meth:`SparkStream.stop`), the manifest of the checkpoint there
    (``None``: none), checked to be ``pipeline``'s and made by its code, and what the
    manifests say of that code.

    Raises:
        ValueError: the location holds a checkpoint of another pipeline, or of other code
            (without ``allow_code_change``), naming it.
        CheckpointError: another query (or job) holds the location, or the checkpoint there
            cannot be read.
    """
    state = Checkpointer(state_location(checkpoint_location), "driver")
    state.lock()
    try:
        manifest = state.store.latest()
        builder = pipeline.instantiate(workers, exchange_outputs=True)
        layout = state_layout(builder, make_plan(builder.spec, workers=workers))
        if manifest is not None:
            where = state.store.describe()
            check_pipeline(manifest, layout, where, type(pipeline).__name__)
            check_code(manifest, layout, where, allow=allow_code_change)
    except BaseException:
        state.unlock()
        raise
    return state, manifest, layout.code_entry()


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
    allow_code_change: bool = False,
    secret: bytes | str | None = None,
    tls: TLS | None = None,
    on_bad: str | Mapping[str, str] | None = None,
    **inputs: DataFrame | list[Any],
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
            without it), where the workers' state is checkpointed too (in ``deltaflow``
            below it) with every micro-batch: a query restarted on it resumes the workers'
            state at the micro-batch Spark resumes from, and its path and table sinks end
            up holding what an uninterrupted query's would (a ``foreach_batch`` sink may be
            given the micro-batch the query stopped in again, with the same changes). Any
            location Spark and pyarrow's filesystems (or fsspec) both reach: a local or
            shared directory, ``hdfs://``, ``s3://``... (resolved as Spark resolves it,
            :func:`qualified`). Without it the state lives only in the running job. One
            query (or job) at a time holds a location: the driver locks it until
            :meth:`SparkStream.stop`.
        allow_code_change: resume a checkpoint even if the code of some operator changed
            since (a WARNING names them); without it such a restart is refused.
        secret, tls: as for :func:`~deltaflow.adapters.spark.run`: the workers' connections
            to each other and to the driver are authenticated with ``secret`` (a fresh one
            by default) and encrypted with ``tls`` when given.
        on_bad: what an input fed by DataFrames does with a bad row (a null ``diff``, a
            datum holding a NaN, a null in a column declared ``NOT NULL``): ``"fail"`` (the
            default: the query stops, naming it), ``"skip"`` (left out, counted) or
            ``"quarantine"`` (left out, counted, kept in :meth:`SparkStream.rejected`); one
            mode for every input or a dict by input name
            (:mod:`deltaflow.scheduler.accounting`). The counts per input are in
            :meth:`SparkStream.statistics` (``"inputs"``), checkpointed with the state.
        inputs: per input name, a streaming DataFrame (several are read as one union), or
            a static one or a Python list of data, fed once with the stream's first
            micro-batch (a table to join the stream with: ``pages=pages_df``). A static
            DataFrame's rows are read as a streaming one's (no ``time`` column; ``diff``
            optional); a list's items are data, each inserted once. A stream resumed from
            its checkpoint has them in its state already: they are not read again.

    Returns:
        The running :class:`SparkStream`; call :meth:`SparkStream.stop` (or use it in a
        ``with`` block) to stop the query and the workers.

    Raises:
        TypeError, ValueError: bad arguments (an unknown ``on_bad`` mode), no streaming
            input, an input neither a DataFrame nor a list, a ``time`` column.
        ValueError: ``checkpoint_location`` holds a checkpoint of another pipeline, or of
            other code (without ``allow_code_change``).
        CheckpointError: the checkpoint there cannot be read, or another query holds it.
        RuntimeError: fewer than ``partitions + 1`` free task slots.
        DeltaflowError: the workers did not start.

    Example::

        with dfspark.stream(WordCount(), spark, lines=lines_df, schema="word string, n long",
                            foreach_batch=lambda frame, b: frame.show()) as running:
            running.await_termination(60)
    """
    from pyspark.sql import DataFrame

    called = time.time()
    lists = {n: list(v) for n, v in inputs.items() if isinstance(v, list | tuple)}
    static = {n for n, v in inputs.items() if isinstance(v, DataFrame) and not v.isStreaming}
    framed = {n: v for n, v in inputs.items() if n not in lists}
    pipeline, every, all_frames, builder = check_inputs(
        pipeline, framed, streaming=True, static=static, lists=lists
    )
    unknown = sorted(set(lists) - set(pipeline.input_names()))
    if unknown:
        msg = f"unknown input(s) {unknown}; {type(pipeline).__name__}.build() takes "
        raise TypeError(msg + str(pipeline.input_names()))
    layouts: list[InputLayout] = []
    static_layouts: list[InputLayout] = []
    frames: list[DataFrame] = []
    static_frames: list[DataFrame] = []
    for layout, f in zip(every, all_frames, strict=True):
        (static_layouts if layout.name in static else layouts).append(layout)
        (static_frames if layout.name in static else frames).append(f)
    if not frames:
        given = sorted([*static, *lists])
        msg = "stream() needs at least one streaming input"
        if given:
            msg += f" (inputs {given} are static: dfspark.run() takes static inputs alone)"
        raise TypeError(msg)
    output = OutputLayout.of(schema, single=builder.single_output, names=list(builder.stores))
    accounts = make_accounts([layout.name for layout in every], on_bad)
    sink, holds = _sink_of(spark, output, foreach_batch, path, table)
    sc = spark.sparkContext
    n = max(1, sc.defaultParallelism - 1) if partitions is None else partitions
    if n.__class__ is not int or n < 1:
        msg = f"partitions must be a positive int, not {partitions!r}"
        raise ValueError(msg)
    flag: object = allow_code_change
    if flag.__class__ is not bool:
        msg = f"allow_code_change must be True or False, not {flag!r}"
        raise ValueError(msg)
    state, manifest, code = None, None, None
    if checkpoint_location is not None:
        located = qualified(spark, checkpoint_location)
        state, manifest, code = _open_state(pipeline, located, n, allow_code_change)
    try:
        what = f"dfspark.stream of {type(pipeline).__name__} with partitions={n}"
        require_slots(sc, n + 1, f"{what} (plus one for micro-batches)")
        shipment = ship(pipeline)
        require_importable(sc, shipment.by_reference, what)
        host = sc.getConf().get("spark.driver.host") or task_host()
        security = _Security.of(secret, tls)
        server = socket.create_server((host, 0))
    except BaseException:
        if state is not None:
            state.unlock()
        raise
    group = f"deltaflow-stream-{uuid.uuid4().hex}"
    where = None if state is None else state.store.location
    task = worker_task(shipment.blob, n, (host, server.getsockname()[1]), security, where, output)

    def job() -> None:
        sc.setJobGroup(group, "deltaflow stream workers", interruptOnCancel=True)
        sc.parallelize(range(n), n).barrier().mapPartitions(task).collect()

    running = SparkStream(spark, layouts, output, sink, n, server, group, security, state, holds)
    running._code = code
    running.accounts = accounts
    if manifest is not None:
        saved = manifest.get("spark_inputs", {})
        for name, account in running.accounts.items():
            account.restore(saved.get(name))
        running.resumed_at = running._time = int(manifest["time"])
        running._sequence = int(manifest["sequence"]) + 1
    elif static_frames or lists:
        running._static_layouts = static_layouts
        if static_frames:
            running._static = tag_inputs(spark, static_layouts, static_frames)
        running._lists = lists
    try:
        submitted = time.time()
        running._start_workers(job)
        running._accept(security, RENDEZVOUS_TIMEOUT_S)
        connected = time.time()
        running._check_resumed()
        writer = tag_inputs(spark, layouts, frames).writeStream.foreachBatch(running._on_batch)
        if trigger:
            writer = writer.trigger(**trigger)
        if checkpoint_location is not None:
            writer = writer.option("checkpointLocation", checkpoint_location)
        running.query = writer.start()
    except BaseException:
        running.stop()
        raise
    _log.debug(
        "stream started: checks %.3f s; workers' tasks began %s s after their job's "
        "submission, their mesh up %s s after; all connected %.3f s, query started %.3f s",
        submitted - called,
        [round(s - submitted, 3) for s, _ in running._started],
        [round(m - s, 3) for s, m in running._started],
        connected - submitted,
        time.time() - connected,
    )
    return running
