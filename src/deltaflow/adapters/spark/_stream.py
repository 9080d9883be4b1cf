"""``stream``: a pipeline kept running in one barrier job, one time per streaming micro-batch.

How it runs: :func:`stream` starts a long-lived barrier job (from a driver thread) whose
``partitions`` tasks each host one worker of the dataflow, and a Structured Streaming query
over the inputs whose ``foreachBatch`` function drives them (the tasks are in
:mod:`._stream_tasks`). Each worker connects back to a small TCP server on the driver
(:mod:`._stream_server`); like the workers' mesh, the server admits only connections that
prove they hold the secret the driver made for this stream and shipped in the tasks' closure,
and stops listening once every worker is in. The driver is also the workers' rendezvous.

One Spark job per micro-batch reads its rows. A micro-batch Spark estimates small
(:data:`._stream_driver.INLINE_BYTES`, from its plan's statistics) is collected by the driver
as Arrow (a job with no Python tasks) and its changes dealt out round-robin with the step. A
larger one is read by tasks that deal their partitions' rows out to the workers directly; the
driver collects a row per partition and worker fed (the ids and the row count) and tells
every worker which partitions to take. Every worker then steps through one time (the
dataflow's exchanges route the rows to their owners) and answers with its output changes of
``b`` as Arrow when they are small (:data:`._stream_driver.INLINE_OUTPUT_BYTES`): the sink's
DataFrame (the schema's columns plus ``time``, the batch id, and ``diff``) is then made of
them on the driver, with no Spark job; else it is made of tasks that fetch each worker's
output changes from it. So the driver holds a micro-batch's rows or output only when they are
small.

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

import logging
import socket
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...scheduler.accounting import make_accounts
from ...scheduler.net.tls import TLS
from ._batch import Security
from ._convert import (
    OutputLayout,
)
from ._ship import require_importable, ship
from ._slots import require_slots, task_host
from ._stream_inputs import StreamInputs, worker_count
from ._stream_sink import Sink, sink_of
from ._stream_state import open_state, qualified
from ._stream_tasks import (
    worker_task,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

from ._stream_driver import SparkStream

__all__ = ["SparkStream", "stream"]

_log = logging.getLogger("deltaflow")


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
    called = time.time()
    given = StreamInputs.of(pipeline, inputs)
    pipeline, builder = given.pipeline, given.builder
    output = OutputLayout.of(schema, single=builder.single_output, names=list(builder.stores))
    accounts = make_accounts([layout.name for layout in given.every], on_bad)
    sink, holds = sink_of(spark, output, foreach_batch, path, table)
    sc = spark.sparkContext
    n = worker_count(sc, partitions, allow_code_change)
    state, manifest, code = None, None, None
    if checkpoint_location is not None:
        located = qualified(spark, checkpoint_location)
        state, manifest, code = open_state(pipeline, located, n, allow_code_change)
    try:
        what = f"dfspark.stream of {type(pipeline).__name__} with partitions={n}"
        require_slots(sc, n + 1, f"{what} (plus one for micro-batches)")
        shipment = ship(pipeline)
        require_importable(sc, shipment.by_reference, what)
        host = sc.getConf().get("spark.driver.host") or task_host()
        security = Security.of(secret, tls)
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

    running = SparkStream(
        spark, given.layouts, output, sink, n, server, group, security, state, holds
    )
    running.start(job, given, manifest, code, accounts, trigger, checkpoint_location, called)
    return running
