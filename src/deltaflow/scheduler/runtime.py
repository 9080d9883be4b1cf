"""Running a pipeline: ``open()`` inside a trio program, ``run()`` for a batch of updates.

    >>> import deltaflow as df
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> df.run(Double(), xs=[(1, 0, 1), (5, 1, 1), (1, 2, -1)])
    [(2, 0, 1), (10, 1, 1), (2, 2, -1)]

Inside trio, ``async with df.open(Double()) as job`` gives a :class:`Job`: feed its
``inputs``, ``await job.advance_to(t)`` to close the times before ``t``, and read
``job.output``. The workers run as tasks of a nursery the job opens; leaving the ``async
with`` block closes the inputs and waits until every output is complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from ..operators.pipeline import Pipeline
from .accounting import InputAccount, Rejected, make_accounts
from .collector import GC_THRESHOLD, check_gc_threshold
from .dashboard import check_dashboard
from .feed import feed_sources, run_to_end
from .handles import InputHandle, OutputHandle, Subscription
from .job import Job, OpenJob, check_progress
from .net.processes import Processes
from .placement import InProcess, Placement
from .sinks import Sink
from .sources import Source, is_source
from .validation import require_pipeline, validate_updates

__all__ = [
    "InputHandle",
    "Job",
    "OutputHandle",
    "Subscription",
    "check_inputs",
    "execute",
    "open",
    "run",
]


def open(
    pipeline: Pipeline,
    workers: int | None = None,
    *,
    processes: int = 1,
    fuse: bool = True,
    gc_threshold: int | None = GC_THRESHOLD,
    history: int | None = None,
    profile: bool = False,
    progress: bool | float = False,
    checkpoint: str | os.PathLike[str] | None = None,
    dashboard: int | tuple[str, int] | None = None,
    fresh: bool = False,
    allow_code_change: bool = False,
    sources: Mapping[str, Source] | None = None,
    on_bad: str | Mapping[str, str] | None = None,
    metrics: int | tuple[str, int] | None = None,
    sinks: Mapping[str, Sink] | None = None,
) -> OpenJob:
    """Run ``pipeline`` inside the current trio program; use as ``async with``.

    Args:
        pipeline: the :class:`~deltaflow.Pipeline` instance to run.
        workers: how many workers (each with its own copy of the dataflow) to run; by
            default one per process.
        processes: ``1`` runs every worker in the caller's trio loop; ``P >= 2`` starts ``P``
            fresh interpreters hosting ``workers / P`` workers each (``P`` must divide
            ``workers``) and none in the caller (see :mod:`deltaflow.scheduler.net.processes`).
        fuse: run chains of linear operators as one actor (the default); ``False`` gives
            every operator its own actor, which only helps to measure what fusion saves.
        gc_threshold: while the job runs, the cyclic garbage collector's first threshold is
            at least this (restored when the last job ends; see
            :mod:`deltaflow.scheduler.collector`). ``None`` leaves the collector alone.
        history: keep each output answerable only for the last ``history`` times before its
            frontier (``job.output.at(t)`` for ``t >= job.time - history``; an older time is
            a ``ValueError``), older updates compacted into one, so that a long-running job's
            outputs take bounded memory. ``None`` (the default) keeps everything.
        profile: count each operator's activations, records and seconds for
            :meth:`Job.statistics` (also on when the ``deltaflow`` logger is at ``DEBUG``).
        progress: show a progress line on stderr (time reached, updates/s, elapsed): ``True``
            at once, a number of seconds once the job has run that long.
        checkpoint: a directory (local, or a URI pyarrow's filesystems or fsspec reach, such
            as ``s3://bucket/path``) where the job keeps its durable state. If it holds a
            checkpoint the job resumes from it (``job.resumed_at``); ``await
            job.checkpoint()`` writes one, and leaving the block normally writes one at
            ``job.time`` (see :meth:`Job.checkpoint`). ``None``: the state lives only in the
            job. One job at a time holds a location: entering the block locks it (a lease
            file on object stores, stale after
            :data:`~deltaflow.framework.durable.lock.LEASE_STALE_S` seconds), leaving it
            unlocks it.
        fresh: start over: when entered (the location locked), remove every checkpoint at
            ``checkpoint`` first. Without it, a location holding data but no readable
            checkpoint is an error, never a fresh start.
        allow_code_change: resume even if the code of some operator changed since the
            checkpoint was written (a WARNING names them); without it such a resume is
            refused. Line numbers and file names do not count as changes.
        dashboard: serve a live dashboard of the job from its own trio loop on this port of
            ``127.0.0.1`` (``0`` picks a free one), or on ``(host, port)``; off loopback it
            requires the token in ``job.dashboard_url``. It counts each operator's work as
            ``profile=True`` does (see :mod:`deltaflow.scheduler.dashboard`).
        sources: inputs the job feeds itself, by name (``df.sources.files("in/*.csv")``):
            ``await job.follow()`` feeds each batch they read at its own time, and a
            checkpoint keeps their offsets, so a resumed job goes on where it left off (see
            :mod:`deltaflow.scheduler.sources`).
        on_bad: what each input does with a bad record (malformed, unhashable, a NaN, not
            fitting the input's declared schema): ``"fail"`` (the default: the error is
            raised where it was fed), ``"skip"`` (left out, counted) or ``"quarantine"``
            (left out, counted, kept in ``job.rejected``); one mode for every input or a
            dict by input name (see :mod:`deltaflow.scheduler.accounting`).
        metrics: serve the job's :meth:`Job.statistics` as Prometheus metrics over HTTP
            on this port of the loopback interface (``0``: any free port), or on
            ``(host, port)``; ``job.metrics_url`` then says where (see
            :mod:`deltaflow.scheduler.metrics`; needs ``prometheus_client``).
        sinks: outputs the job writes out itself, by name (``df.sinks.postgres(...)``): each
            time that closes is written once, before ``advance_to`` returns; a resumed job
            writes only the times after those the sink holds (see
            :mod:`deltaflow.scheduler.sinks`).

    Returns:
        An async context manager giving the running :class:`Job`.

    Raises:
        ValueError: ``workers``, ``processes`` or ``gc_threshold`` is not a positive int,
            ``processes`` does not divide ``workers``, ``history`` is not a non-negative
            int, ``progress`` not a bool or a number of seconds, ``dashboard`` not a port
            or ``(host, port)``, or ``fresh`` given without ``checkpoint``; when entered, the
            checkpoint location holds a checkpoint of another pipeline, or of other code
            (without ``allow_code_change``).
        OSError: when entered, the dashboard's address cannot be listened on.
        CheckpointError: when entered, another job holds the checkpoint location (naming
            it and the holder), or its checkpoint is damaged or cannot be read.
    """
    if progress is not True and progress is not False:
        check_progress(progress)
    gc_threshold = check_gc_threshold(gc_threshold)
    served = check_dashboard(dashboard)
    profile = profile or served is not None  # the dashboard shows records per edge
    workers = processes if workers is None else workers
    placement: Placement = InProcess()
    if processes != 1:
        placement = Processes(
            pipeline,
            workers,
            processes,
            fuse=fuse,
            gc_threshold=gc_threshold,
            profile=profile,
            checkpoint=checkpoint,
        )
    job = Job(
        pipeline,
        workers,
        placement=placement,
        fuse=fuse,
        history=history,
        profile=profile,
        checkpoint=checkpoint,
        fresh=fresh,
        allow_code_change=allow_code_change,
        on_bad=on_bad,
    )
    job.attach_sources(sources)
    job.attach_sinks(sinks)
    return OpenJob(job, gc_threshold, progress=progress, dashboard=served, metrics=metrics)


def run(
    pipeline: Pipeline,
    /,
    workers: int | None = None,
    *,
    processes: int = 1,
    fuse: bool = True,
    gc_threshold: int | None = GC_THRESHOLD,
    progress: bool | float = False,
    on_bad: str | Mapping[str, str] | None = None,
    rejected: list[Rejected] | None = None,
    **inputs: Iterable[Any],
) -> Any:
    """Run ``pipeline`` over complete inputs and return its consolidated output updates.

    Each input is an iterable of ``(data, time, diff)`` with int times ``>= 0``, or a pandas
    DataFrame (its columns other than ``time`` and ``diff`` form the datum; those two default
    to 0 and 1), or a source (``df.sources.files(...)``: what it holds now, each batch at its
    own time after those of the other inputs' updates). Every input ``build()`` takes must be
    given, but for those it declares optional (``events: df.Collection = df.optional()``),
    which are empty when left out. Every time is processed as its own logical time (all at
    once, so this measures throughput). Returns a list of ``(data, time, diff)`` sorted by
    time, with no two updates for the same ``(data, time)`` and no zero diff; a ``build()``
    returning a dict of collections gives a dict of such lists. ``workers``, ``processes``,
    ``fuse``, ``gc_threshold``, ``progress`` and ``on_bad`` are as for :func:`open`;
    ``rejected`` receives the records ``on_bad="quarantine"`` sets aside (it is required
    then).

    Raises:
        TypeError, ValueError: a malformed input, naming the input and the value; an input
            left out that is not optional.
        OperatorError: user code in an operator failed.
    """
    result, _ = execute(
        pipeline,
        workers,
        processes=processes,
        fuse=fuse,
        gc_threshold=gc_threshold,
        progress=progress,
        on_bad=on_bad,
        rejected=rejected,
        inputs=inputs,
    )
    return result


def _check_run_inputs(pipeline: Pipeline, inputs: Mapping[str, Any]) -> None:
    """Refuse :func:`run`'s ``inputs`` unless each is one ``build()`` takes, and every one it
    takes is given (or optional); and a pipeline whose inputs are named as ``run()``'s own
    parameters (those could never be given).

    Raises:
        TypeError: naming the inputs at fault.
    """
    names = pipeline.input_names()
    taken = sorted(set(names) & {"workers", "processes", "fuse", "gc_threshold", "progress",
                                 "on_bad", "rejected"})  # fmt: skip
    if taken:
        msg = (
            f"{type(pipeline).__name__}.build() has inputs named {taken}, which are run()'s own "
            "parameters: rename them, or feed the pipeline with df.open()"
        )
        raise TypeError(msg)
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        msg = f"unknown input(s) {unknown}; {type(pipeline).__name__}.build() takes {names}"
        raise TypeError(msg)
    check_inputs(pipeline, inputs, "{name}=[...]")


def check_inputs(pipeline: Pipeline, given: Iterable[str], how: str) -> None:
    """Refuse a run that leaves out an input ``build()`` does not declare optional.

    Raises:
        TypeError: naming the inputs left out, and how to give them (``how``: ``"events=[...]"``
            for ``df.run``) or declare them optional.
    """
    given = set(given)
    missing = [n for n in pipeline.input_names() if n not in given]
    required = [n for n in missing if n not in pipeline.optional_inputs()]
    if required:
        shown = ", ".join(repr(n) for n in required)
        example = how.format(name=required[0])
        msg = (
            f"{type(pipeline).__name__}: input(s) {shown} not given; give {example} (empty "
            f"for no updates), or declare it optional in build(): "
            f"{required[0]}: df.Collection = df.optional()"
        )
        raise TypeError(msg)


def execute(
    pipeline: Pipeline,
    workers: int | None = None,
    *,
    inputs: Mapping[str, Iterable[Any]],
    on_bad: str | Mapping[str, str] | None = None,
    rejected: list[Rejected] | None = None,
    accounts: dict[str, InputAccount] | None = None,
    opened: Callable[[Job], None] | None = None,
    follow: bool = False,
    **options: Any,
) -> tuple[Any, dict[str, Any]]:
    """:func:`run`, returning also the job's :meth:`Job.statistics` at its end (what the
    command line reports). ``options`` are :func:`open`'s (``processes``, ``fuse``,
    ``gc_threshold``, ``progress``, ``metrics``, ``dashboard``, ``sinks``); ``accounts`` (by
    input, with their modes: ``on_bad`` is then theirs) holds what reading the inputs
    refused already; ``opened(job)`` is called once the job is open (the command line tells
    the dashboard's address); with ``follow`` the sources are followed until they end (a
    directory: for ever) rather than read once (the command line's ``--follow``)."""
    pipeline = require_pipeline(pipeline)
    _check_run_inputs(pipeline, inputs)
    sources: dict[str, Source] = {n: s for n, s in inputs.items() if is_source(s)}
    if accounts is None:
        accounts = make_accounts(pipeline.input_names(), on_bad)
    else:
        on_bad = {name: a.mode for name, a in accounts.items()}
    if rejected is None and any(a.mode == "quarantine" for a in accounts.values()):
        msg = (
            "run(on_bad='quarantine') needs rejected=[] (a list) to receive the records it "
            "sets aside; or use on_bad='skip' to count them only"
        )
        raise ValueError(msg)
    validated = {
        name: validate_updates(name, upds, pipeline.input_schema(name), accounts[name])
        for name, upds in inputs.items()
        if name not in sources
    }
    check_gc_threshold(options.get("gc_threshold", GC_THRESHOLD))

    async def main() -> tuple[dict[str, list[tuple[Any, Any, int]]], bool, dict[str, Any]]:
        async with open(pipeline, workers, sources=sources, on_bad=on_bad, **options) as job:
            if opened is not None:
                opened(job)
            for name, account in accounts.items():
                job.accounts[name].absorb(account)
            if sources:
                await feed_sources(job, validated, once=not follow)
            outputs = await run_to_end(job, validated)
        return outputs, job.builder.single_output, job.statistics()

    result, single, stats = trio.run(main)
    if rejected is not None:
        for account in accounts.values():
            rejected.extend(account.rejected())
    if single:
        return result["output"], stats
    return result, stats
