"""The driver's side of a running :func:`~._stream.stream`: :class:`SparkStream`.

Its ``foreachBatch`` function steps the workers through one time per micro-batch: it feeds
them the micro-batch's rows (collected on the driver when small, :data:`INLINE_BYTES`, else
read by feeding tasks), asks each to step, makes the sink's DataFrame of their output
(from their answers when small, :data:`INLINE_OUTPUT_BYTES`, else fetched by tasks), hands it
to the sink and checkpoints the workers' state. It also keeps the stream's statistics, its
inputs' accounts, and stops the query and the workers.

    running = dfspark.stream(WordCount(), spark, lines=lines_df, schema=..., path="out")
    running.process_all_available()
    running.statistics()["batches"]
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import attrs
import pyarrow as pa

from ...errors import CheckpointError, DeltaflowError, PeerLostError
from ...scheduler.accounting import InputAccount, Rejected
from ...scheduler.checkpoint import Checkpointer, settled
from ...scheduler.net.door import Door
from ...scheduler.net.tcp import FrameError
from ._batch import RENDEZVOUS_TIMEOUT_S, Security
from ._convert import (
    InputLayout,
    OutputLayout,
    read_changes_accounted,
    tag_inputs,
    to_arrow_schema,
)
from ._errors import from_spark, from_text, raise_from, report_text, translated
from ._logs import Record, records_accumulator, relog
from ._stream_inputs import StreamInputs
from ._stream_server import RendezvousError, WorkerServer
from ._stream_sink import Holds, Sink
from ._stream_tasks import (
    FED_SCHEMA,
    feed_task,
    fetch_task,
    receive,
    send,
)

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["INLINE_BYTES", "INLINE_OUTPUT_BYTES", "SparkStream", "estimated_bytes"]

_log = logging.getLogger("deltaflow")

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
    _security: Security
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

    def start(
        self,
        job: Callable[[], object],
        given: StreamInputs,
        manifest: dict[str, Any] | None,
        code: dict[str, Any] | None,
        accounts: dict[str, InputAccount],
        trigger: Mapping[str, Any] | None,
        checkpoint_location: str | None,
        called: float,
    ) -> None:
        """Start the workers' ``job`` (resumed from the checkpoint whose ``manifest`` is
        given, the manifests' ``code``, the inputs' ``accounts``), admit them, and start the
        streaming query over ``given``'s streaming inputs; stop everything again if any of
        it fails. ``called``: when :func:`~._stream.stream` was (for the DEBUG log)."""
        self._code = code
        self.accounts = accounts
        self._begin(manifest, given)
        try:
            submitted = time.time()
            self._start_workers(job)
            self._accept(self._security, RENDEZVOUS_TIMEOUT_S)
            connected = time.time()
            self._check_resumed()
            streaming = tag_inputs(self.spark, given.layouts, given.frames)
            writer = streaming.writeStream.foreachBatch(self._on_batch)
            if trigger:
                writer = writer.trigger(**trigger)
            if checkpoint_location is not None:
                writer = writer.option("checkpointLocation", checkpoint_location)
            self.query = writer.start()
        except BaseException:
            self.stop()
            raise
        _log.debug(
            "stream started: checks %.3f s; workers' tasks began %s s after their job's "
            "submission, their mesh up %s s after; all connected %.3f s, query started %.3f s",
            submitted - called,
            [round(s - submitted, 3) for s, _ in self._started],
            [round(m - s, 3) for s, m in self._started],
            connected - submitted,
            time.time() - connected,
        )

    def _begin(self, manifest: dict[str, Any] | None, given: StreamInputs) -> None:
        """Start at the time of the checkpoint whose ``manifest`` is given, its inputs'
        accounts restored; or afresh, with ``given``'s static inputs to feed with the
        first micro-batch."""
        if manifest is not None:
            saved = manifest.get("spark_inputs", {})
            for name, account in self.accounts.items():
                account.restore(saved.get(name))
            self.resumed_at = self._time = int(manifest["time"])
            self._sequence = int(manifest["sequence"]) + 1
        elif given.static_frames or given.lists:
            self._static_layouts = given.static_layouts
            if given.static_frames:
                self._static = tag_inputs(self.spark, given.static_layouts, given.static_frames)
            self._lists = given.lists

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

    def _accept(self, security: Security, timeout: float) -> None:
        """Admit every worker through the driver's server (:mod:`._stream_server`) and keep
        their connections, ports, resumed times and start times.

        Raises:
            TimeoutError: not every worker connected within ``timeout`` (naming them).
            DeltaflowError: the workers' job ended first, or they did not open their mesh.
        """
        server = WorkerServer(self._server, self.peers, security, self._door)
        try:
            connected = server.admit(timeout, self._check_job)
        except RendezvousError as exc:
            self._links = exc.links
            self._fail(self._workers_error(str(exc)))
        self._links = connected.links
        self._addresses = connected.addresses
        self._resumed = connected.resumed
        self._started = connected.started

    def _check_job(self) -> None:
        """Raise the workers' error if their job ended before every worker connected."""
        if self._join(0):
            what = "the workers' job ended before every worker connected"
            self._fail(self._workers_error(what))

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
        first = self._static is not None or bool(self._lists)
        frame, layouts, extra = self._with_static(frame)
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

    def _with_static(
        self, frame: DataFrame
    ) -> tuple[DataFrame, list[InputLayout], list[dict[str, list[tuple[Any, int]]]]]:
        """A micro-batch's rows and layouts, with the static DataFrames' (in the first
        micro-batch), and each worker's share of the lists' data (its changes by input)."""
        layouts = self.layouts
        extra: list[dict[str, list[tuple[Any, int]]]] = [{} for _ in self._links]
        if self._static is not None:
            frame = frame.unionByName(self._static, allowMissingColumns=True)
            layouts = [*layouts, *self._static_layouts]
        for name, data in self._lists.items():
            for w, share in enumerate(extra):
                share[name] = [(d, 1) for d in data[w :: self.peers]]
        return frame, layouts, extra

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
