"""``run``: a pipeline over input DataFrames as one Spark barrier job, output DataFrames back.

The job: every input's rows, tagged by input (:func:`~._convert.tag_inputs`), spread over
``partitions`` partitions; one barrier task per partition hosts one worker of the dataflow
(:func:`deltaflow.scheduler.net.peer.run_peer`). The tasks publish their ``host:port`` with one
``allGather`` and open a TCP mesh among themselves, which carries every exchange and all
progress from then on (Spark's own barrier calls poll once a second, so they are used once).
The mesh admits only the job's own tasks: each connection proves it holds a secret the driver
made for this job and shipped in the tasks' closure (:mod:`deltaflow.scheduler.net.handshake`);
each task binds its executor's own address (:func:`~._slots.task_host`).
Each task feeds the rows of its own partition; the dataflow's exchanges route them to their
owners. Each task returns the consolidated output updates that ended on its worker (outputs
are exchanged by datum, so equal data meet on one worker), as Arrow batches of
``mapInArrow(..., barrier=True)``: the result is a DataFrame with no conversion on the driver.

Why ``mapInArrow`` rather than ``rdd.barrier().mapPartitions``: rows reach the tasks as Arrow
batches and leave as Arrow batches, where the RDD path pickles every row through Python on
both sides and rebuilds a DataFrame with ``createDataFrame``; the cost of each path is in
``benchmarks/RESULTS.md``. Spark's placement (``repartition``) is not the dataflow's, which
costs nothing extra: the dataflow routes its inputs at its first exchange anyway.

The job runs when :func:`run` is called, once: the result is checkpointed locally
(``localCheckpoint``), so reading it twice does not run the barrier stage twice.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.accumulators import AccumulatorParam

from ...errors import PeerLostError
from ...operators.pipeline import Pipeline
from ...scheduler.accounting import InputAccount, Rejected, make_accounts
from ...scheduler.net.handshake import check_secret, new_secret
from ...scheduler.net.peer import run_peer
from ...scheduler.net.tls import TLS
from ...scheduler.runtime import check_inputs as required_inputs
from ._convert import (
    InputLayout,
    OutputLayout,
    read_partition,
    read_partition_accounted,
    tag_inputs,
)
from ._errors import reported, translated
from ._logs import Record, forwarding, records_accumulator, relog
from ._ship import require_importable, ship, unship
from ._slots import require_slots, task_host

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["barrier_task", "check_inputs", "phase_timings", "run"]

#: Seconds a task waits, once the ``allGather`` has answered, for its peers to connect.
RENDEZVOUS_TIMEOUT_S = 120.0

Timings = dict[str, float]


class _Slowest(AccumulatorParam[Timings]):
    """Per phase, the slowest task's seconds (``started``: the earliest task's start)."""

    def zero(self, value: Timings) -> Timings:
        return {}

    def addInPlace(self, value1: Timings, value2: Timings) -> Timings:
        for phase, seconds in value2.items():
            pick = min if phase == "started" else max
            value1[phase] = pick(value1.get(phase, seconds), seconds)
        return value1


_timings: Accumulator[Timings] | None = None


@contextlib.contextmanager
def phase_timings(spark: SparkSession) -> Iterator[Timings]:
    """Where the :func:`run` jobs inside the block spend their time, per phase of a task.

    The dict it gives is filled when the block ends: ``submitted`` and ``started`` (epoch
    seconds: the job's submission on the driver, the earliest task's start; between them
    Spark reads the inputs and shuffles them to the tasks' partitions), then the slowest
    task's seconds in each phase: ``read_s`` (the partition's rows as updates),
    ``rendezvous_s`` (the ``allGather``), ``dataflow_s`` (the mesh and the dataflow, to its
    output), ``output_s`` (the output as Arrow batches, handed to Spark).
    """
    global _timings
    result: Timings = {}
    _timings = spark.sparkContext.accumulator({}, _Slowest())
    try:
        yield result
    finally:
        result.update(_timings.value)
        _timings = None


#: Seconds a task that lost a peer waits before failing, so that the peer's own failure
#: reaches Spark first (see :func:`second_to_fail`).
LOST_PEER_GRACE_S = 5.0


@contextlib.contextmanager
def second_to_fail() -> Iterator[None]:
    """Hold back a :class:`~deltaflow.errors.PeerLostError` for a few seconds.

    Spark fails a barrier stage with the error of the first task to fail. When user code
    raises in one task, the others may see that peer's connection drop before its error
    reaches them; failing at once, one of them could be first, and the driver would report
    "lost a peer" instead of the user's message. Waiting lets the task that failed for a
    reason report it (Spark then kills the waiting tasks); a peer truly lost (its executor
    gone) fails the stage by itself meanwhile.
    """
    try:
        yield
    except PeerLostError:
        time.sleep(LOST_PEER_GRACE_S)
        raise


def check_inputs(
    pipeline: object,
    inputs: Mapping[str, object],
    *,
    streaming: bool,
    static: Collection[str] = (),
    lists: Collection[str] = (),
) -> tuple[Pipeline, list[InputLayout], list[DataFrame], Any]:
    """The pipeline, each input's layout and DataFrame, and the pipeline's dataflow builder.
    ``static``: the inputs of a stream that are static DataFrames (read once; no ``time``
    column either); ``lists``: those given as Python lists (not in ``inputs``).

    Raises:
        TypeError: not a pipeline, an unknown input, an input left out that ``build()``
            does not declare optional, or an input that is not a DataFrame (or is not
            streaming for :func:`~.stream`, or is for :func:`run`).
    """
    from pyspark.sql import DataFrame

    if not isinstance(pipeline, Pipeline):
        msg = f"expected a deltaflow Pipeline instance, got {pipeline!r}"
        raise TypeError(msg)
    names = pipeline.input_names()
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        msg = f"unknown input(s) {unknown}; {type(pipeline).__name__}.build() takes {names}"
        raise TypeError(msg)
    clash = sorted(RESERVED & set(names))
    if clash:
        msg = (
            f"{type(pipeline).__name__}.build() has inputs named {clash}, which are the "
            "Spark adapter's own parameters: rename them"
        )
        raise TypeError(msg)
    required_inputs(pipeline, [*inputs, *lists], "{name}=DATAFRAME")
    builder = pipeline.instantiate()
    layouts: list[InputLayout] = []
    frames: list[DataFrame] = []
    for name in names:
        if name not in inputs:
            continue
        frame = inputs[name]
        if not isinstance(frame, DataFrame):
            msg = f"input {name!r}: expected a Spark DataFrame, got {type(frame).__name__}"
            raise TypeError(msg)
        if frame.isStreaming != (streaming and name not in static):
            msg = (
                f"input {name!r} is a streaming DataFrame: use dfspark.stream()"
                if frame.isStreaming
                else f"input {name!r} is not a streaming DataFrame (dfspark.stream() takes "
                "streaming inputs; use dfspark.run() for static ones)"
            )
            raise TypeError(msg)
        declared = pipeline.input_schema(name)
        layouts.append(
            InputLayout.of(name, len(layouts), frame.schema, streaming=streaming, declared=declared)
        )
        frames.append(frame)
    return pipeline, layouts, frames, builder


@attrs.frozen(repr=False)
class Security:
    """How a job's tasks authenticate each other: a secret made on the driver (or the
    user's), shipped to the tasks in their closure, and optional TLS."""

    secret: bytes
    tls: TLS | None

    @classmethod
    def of(cls, secret: object, tls: object) -> Security:
        """The user's secret checked, or a fresh one; ``tls`` checked.

        Raises:
            TypeError: ``tls`` is not a :class:`deltaflow.TLS`; a secret neither bytes nor
                str.
            ValueError: a secret under 16 bytes.
        """
        if tls is not None and not isinstance(tls, TLS):
            msg = f"tls must be a deltaflow.TLS, not {type(tls).__name__}"
            raise TypeError(msg)
        return cls(new_secret() if secret is None else check_secret(secret), tls)


Gather = Callable[[Any, str], list[str]]
"""``gather(ctx, my_address)``: every task's address, in partition order."""


def _all_gather(ctx: Any, address: str) -> list[str]:
    return list(ctx.allGather(address))


def barrier_task(
    shipped: bytes,
    peers: int,
    layouts: list[InputLayout],
    output: OutputLayout,
    security: Security,
    timings: Accumulator[Timings] | None,
    gather: Gather = _all_gather,
    logs: Accumulator[list[Record]] | None = None,
    modes: Mapping[str, str] | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function of :func:`run`'s barrier tasks (for ``mapInArrow``): unpickle the
    ``shipped`` pipeline (:func:`~._ship.ship`), read the task's partition, meet the other
    tasks (``gather``: one ``allGather``), connect the mesh authenticated with ``security``,
    run to the end, yield the output as Arrow batches. An error leaves it reported
    (:func:`~._errors.reported`); the task's WARNINGs go to the driver in ``logs``
    (:mod:`~._logs`). With ``modes`` (``on_bad`` by input) the bad rows of inputs not in
    mode ``"fail"`` are left out, and the task's last row is a marker carrying, as JSON, its
    partition and per input the rows it read and those it left out
    (:meth:`~._convert.OutputLayout.report_batch`)."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        with forwarding(f"task {ctx.partitionId()}") as kept, reported():
            started = time.time()
            clock = time.perf_counter
            start = clock()
            pipeline = unship(shipped)
            report = None
            if modes is None:
                feed = read_partition(layouts, batches)
            else:
                feed, report = read_partition_accounted(layouts, batches, modes)
            read = clock()
            gathered = [0.0]

            def rendezvous(address: str) -> list[str]:
                begin = clock()
                addresses = gather(ctx, address)
                gathered[0] = clock() - begin
                return addresses

            with second_to_fail():
                result = run_peer(
                    pipeline,
                    index=ctx.partitionId(),
                    peers=peers,
                    rendezvous=rendezvous,
                    secret=security.secret,
                    tls=security.tls,
                    feed=feed,
                    host=task_host(),
                    connect_timeout=RENDEZVOUS_TIMEOUT_S,
                )
            ran = clock()
            yield from output.to_arrow(result if isinstance(result, dict) else {"output": result})
            if report is not None:
                text = json.dumps({"part": ctx.partitionId(), "inputs": report}, default=str)
                yield output.report_batch(text)
            if logs is not None:
                logs.add(kept.take())
        if timings is not None:
            timings.add(
                {
                    "started": started,
                    "read_s": read - start,
                    "rendezvous_s": gathered[0],
                    "dataflow_s": ran - read - gathered[0],
                    "output_s": clock() - ran,
                }
            )

    return task


#: The keyword parameters of :func:`run` and :func:`~._stream.stream`: no input may be named
#: as one of them.
RESERVED = frozenset(
    {"schema", "partitions", "secret", "tls", "foreach_batch", "path", "table", "trigger",
     "checkpoint_location", "on_bad", "rejected", "counts"}
)  # fmt: skip


def run(
    pipeline: Pipeline,
    spark: SparkSession,
    *,
    schema: Any,
    partitions: int | None = None,
    secret: bytes | str | None = None,
    tls: TLS | None = None,
    on_bad: str | Mapping[str, str] | None = None,
    rejected: list[Rejected] | None = None,
    counts: dict[str, dict[str, int]] | None = None,
    **inputs: DataFrame,
) -> DataFrame | dict[str, DataFrame]:
    """Run ``pipeline`` over input DataFrames on Spark; return its output as a DataFrame.

    The result holds exactly the consolidated updates :func:`deltaflow.run` returns for the
    same inputs: ``schema``'s columns (each datum flattened into them, nested tuples too),
    then ``time`` and ``diff`` (bigint). An input's columns named ``time`` and ``diff`` are
    optional (every row at time 0 with diff 1 without them); its other columns, in order,
    form the datum (one column its value, several a tuple; a null is ``None``).

    Args:
        pipeline: the :class:`~deltaflow.Pipeline` to run.
        spark: the session to run it in.
        schema: the output's schema, a DDL string (``"root long, node long"``) or a
            ``StructType``; a dict of them by name when ``build()`` returns a dict.
        partitions: how many workers, one per barrier task (default: the context's default
            parallelism). That many task slots must be free at once.
        secret: the secret the tasks' connections are authenticated with (at least 16
            bytes, e.g. from a cluster's secret store); by default a fresh one made here for
            this job. It travels to the tasks in their closure.
        tls: a :class:`deltaflow.TLS` to encrypt the tasks' connections (for executors on a
            network you do not trust; its files must exist on every executor).
        on_bad: what an input does with a bad row (a null or negative time, a null diff, a
            datum holding a NaN, a null in a column its schema declares ``NOT NULL``), as
            ``df.run``'s: ``"fail"`` (the default: the job stops, naming the input, the
            column and the row), ``"skip"`` (left out, counted) or ``"quarantine"`` (left
            out, counted, and appended to ``rejected`` as a ``df.Rejected`` whose ``where``
            is ``"partition P, row R"``); one mode for every input or a dict by input name.
        rejected: a list receiving the rows set aside (required with ``"quarantine"``).
        counts: a dict receiving, per input, ``read``, ``accepted``, ``refused``,
            ``skipped`` and ``quarantined`` (with ``on_bad``).
        inputs: a static DataFrame per input name (a missing input is empty).

    Returns:
        The output DataFrame, or a dict of them by output name. The job has run already.

    Raises:
        TypeError, ValueError: bad arguments, or input columns of the wrong type, checked
            before any job runs.
        RuntimeError: fewer than ``partitions`` free task slots.
        ModuleNotFoundError: the executors cannot import a module the pipeline needs (an
            installed package; the user's own modules travel with the pipeline), naming it.
        OperatorError: user code raised, naming the operator and the user's exception,
            which is its ``__cause__`` (the job's Spark exception its ``__context__``; for
            every error below, Spark's exception is the ``__cause__``).
        ValueError, TypeError: a bad row (naming the input, the column and the row), an
            output datum that does not fit the schema (naming the output and the column).
        pyspark.errors.PySparkException: Spark failed the job for a reason of its own.

    Example::

        out = dfspark.run(Reachability(), spark, roots=roots_df, edges=edges_df,
                          schema="root long, node long", partitions=2)
    """
    pipeline, layouts, frames, builder = check_inputs(pipeline, inputs, streaming=False)
    output = OutputLayout.of(schema, single=builder.single_output, names=list(builder.stores))
    accounts = _accounts(pipeline.input_names(), on_bad, rejected)
    modes = None if accounts is None else {n: a.mode for n, a in accounts.items()}
    output = attrs.evolve(output, report=modes is not None)
    sc = spark.sparkContext
    n = sc.defaultParallelism if partitions is None else partitions
    if n.__class__ is not int or n < 1:
        msg = f"partitions must be a positive int, not {partitions!r}"
        raise ValueError(msg)
    security = Security.of(secret, tls)
    tagged = tag_inputs(spark, layouts, frames).repartition(n)
    shipment = ship(pipeline)
    logs = records_accumulator(sc)
    task = barrier_task(
        shipment.blob, n, layouts, output, security, _timings, logs=logs, modes=modes
    )
    timings = _timings
    what = f"dfspark.run of {type(pipeline).__name__} with partitions={n}"
    require_slots(sc, n, what)
    require_importable(sc, shipment.by_reference, what)
    if timings is not None:
        timings.add({"submitted": time.time()})
    try:
        with translated():
            barrier = tagged.mapInArrow(task, output.combined, barrier=True)
            combined = barrier.localCheckpoint(eager=True)
    finally:
        relog(logs.value)
    if accounts is not None:
        # The marker rows of the one computation the checkpoint holds: exact however many
        # times the result is read later (reading it runs no task again).
        _account(accounts, output.reports(combined))
        if rejected is not None:
            rejected.extend(r for account in accounts.values() for r in account.rejected())
        if counts is not None:
            counts.update({name: account.counts() for name, account in accounts.items()})
    frames_out = output.split(combined)
    return frames_out["output"] if output.single else frames_out


def _accounts(names: list[str], on_bad: object, rejected: object) -> dict[str, InputAccount] | None:
    """The inputs' accounts for ``run(on_bad=...)`` (None: every input fails on a bad row,
    as without it).

    Raises:
        TypeError, ValueError: as :func:`~deltaflow.scheduler.accounting.check_on_bad`; a
            ``"quarantine"`` without a ``rejected`` list.
    """
    accounts = make_accounts(names, on_bad)
    if all(a.mode == "fail" for a in accounts.values()):
        return None
    if not isinstance(rejected, list) and any(a.mode == "quarantine" for a in accounts.values()):
        msg = (
            "dfspark.run(on_bad='quarantine') needs rejected=[] (a list) to receive the rows "
            "it sets aside; or use on_bad='skip' to count them only"
        )
        raise ValueError(msg)
    return accounts


def _account(accounts: Mapping[str, InputAccount], reports: list[str]) -> None:
    """Fold the tasks' reports (JSON: the partition, and per input the rows read and the bad
    ones left out) into ``accounts``, in partition order."""
    decoded = sorted((json.loads(text) for text in reports), key=lambda r: int(r["part"]))
    for report in decoded:
        part = report["part"]
        for name, seen in report["inputs"].items():
            account = accounts[name]
            account.admitted(0, int(seen["read"]) - len(seen["bad"]))
            for datum, reason, row in seen["bad"]:
                account.refuse(
                    ValueError(reason), _as_datum(datum), f"partition {part}, row {row}", 0
                )


def _as_datum(value: Any) -> Any:
    """A datum decoded from JSON: its lists as the tuples a row's columns were."""
    if isinstance(value, list):
        return tuple(_as_datum(v) for v in value)
    return value
