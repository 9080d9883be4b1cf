"""The ``async with`` that runs a :class:`~deltaflow.scheduler.job.Job`: :class:`OpenJob` starts
its workers (and its dashboard, metrics and progress line when asked for) as tasks of a
nursery, and on leaving checkpoints, closes and stops them, raising what they raised.

    >>> import deltaflow as df, trio
    >>> class Same(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs
    >>> async def main():
    ...     async with OpenJob(df.Job(Same()), None) as job:
    ...         job.inputs["xs"].insert(1)
    ...     return job.output.updates()
    >>> trio.run(main)
    [(1, 0, 1)]
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import trio

from . import observe
from .collector import collector_tuned
from .dashboard import Dashboard
from .dashboard.server import close as close_listeners
from .metrics import MetricsServer, check_metrics

if sys.version_info < (3, 11):  # pragma: no cover - the builtin from 3.11 on
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from types import TracebackType

    from .job import Job

__all__ = ["OpenJob", "check_progress"]


class OpenJob:
    """Run ``job`` for the ``async with`` block (what :func:`deltaflow.open` returns)."""

    def __init__(
        self,
        job: Job,
        gc_threshold: int | None,
        progress: bool | float = False,
        dashboard: tuple[str, int] | None = None,
        metrics: object = None,
    ) -> None:
        self._job = job
        # The live dashboard (``dashboard=``), served from the job's nursery until it ends.
        self._dashboard = None if dashboard is None else Dashboard(job, *dashboard)
        self._dashboard_scope = trio.CancelScope()
        self._metrics: MetricsServer | None = None
        if metrics is not None:
            host, port = check_metrics(metrics)
            self._metrics = MetricsServer(job.statistics, host, port)
        self._nursery_cm: Any = None
        self._collector = collector_tuned(gc_threshold)
        self._progress: observe.ProgressLine | None = None
        if progress is not False:
            after = 0.0 if progress is True else check_progress(progress)
            self._progress = observe.ProgressLine(self._job, after=after)
        self._progress_scope = trio.CancelScope()
        self._started = 0.0

    async def _show_progress(self, line: observe.ProgressLine) -> None:
        with self._progress_scope:
            await line.run()

    async def __aenter__(self) -> Job:
        if self._nursery_cm is not None:
            msg = "this df.open(...) was already entered: call df.open() again for another job"
            raise RuntimeError(msg)
        # The dashboard's address first: taken, the job starts nothing (no worker process).
        listeners = None if self._dashboard is None else await self._dashboard.bind()
        if self._metrics is not None:
            try:
                self._job.metrics_url = self._metrics.start()
            except BaseException:
                close_listeners(listeners or [])
                raise
            observe.logger.info("job metrics at %s", self._job.metrics_url)
        try:
            await self._job.start()
        except BaseException:
            close_listeners(listeners or [])
            if self._metrics is not None:
                self._metrics.stop()
            raise
        self._collector.__enter__()
        try:
            self._nursery_cm = trio.open_nursery()
            nursery = await self._nursery_cm.__aenter__()
        except BaseException:
            self._collector.__exit__(None, None, None)
            close_listeners(listeners or [])
            self._job.release_location()
            if self._metrics is not None:
                self._metrics.stop()
            raise
        self._nursery = nursery
        job = self._job
        observe.logger.info(
            "job %s started: %s", type(job.pipeline).__name__, job.placement.describe(job)
        )
        self._started = trio.current_time()
        nursery.start_soon(job.transport.run)
        for w in job.workers:
            nursery.start_soon(w.run)
        if self._progress is not None:
            nursery.start_soon(self._show_progress, self._progress)
        if self._dashboard is not None and listeners is not None:
            job.dashboard_url = self._dashboard.url
            nursery.start_soon(self._serve_dashboard, self._dashboard, listeners)
        return job

    async def _serve_dashboard(self, dashboard: Dashboard, listeners: Any) -> None:
        with self._dashboard_scope:
            await dashboard.serve(listeners)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        job = self._job
        pending: BaseException | None = None
        if exc is None:
            try:
                # Left normally, a job that keeps checkpoints makes one at its time first.
                if job.checkpoints_itself and job.error is None and not job.closed:
                    await job.checkpoint()
                await job.close()
            except BaseException as e:
                pending = e
        self._progress_scope.cancel()
        self._dashboard_scope.cancel()
        if exc is not None or pending is not None:
            job.abandon()
            self._nursery.cancel_scope.cancel()
        try:
            await self._nursery_cm.__aexit__(None, None, None)
        except BaseExceptionGroup as group:
            self._log_stop(group)
            raise _unwrapped(group) from None
        finally:
            await job.close_sinks()
            self._collector.__exit__(None, None, None)
            if self._metrics is not None:
                self._metrics.stop()
            if self._progress is not None:
                self._progress.finish()
            job.release_location()
        self._log_stop(pending or exc)
        if pending is not None:
            raise pending
        return False

    def _log_stop(self, exc: BaseException | None) -> None:
        job = self._job
        name = type(job.pipeline).__name__
        elapsed = trio.current_time() - self._started
        if job.operator_counts is not None and observe.logger.isEnabledFor(logging.DEBUG):
            observe.log_operator_work(job.operator_counts)
        if exc is None:
            observe.logger.info(
                "job %s finished in %.3f s: %s", name, elapsed, job.placement.describe(job)
            )
        else:
            observe.logger.info("job %s stopped after %.3f s: %r", name, elapsed, exc)


def _unwrapped(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What the job's nursery raised, as the application should see it: a ``KeyboardInterrupt``
    (Ctrl-C, or raised by user code in a worker) or a ``trio.Cancelled`` as itself, so that
    ``except KeyboardInterrupt`` catches it; anything else stays grouped."""
    for kind in (KeyboardInterrupt, trio.Cancelled):
        match, _ = group.split(kind)
        if match is not None:
            first: BaseException = match
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return first
    return group


def check_progress(progress: object) -> float:
    if isinstance(progress, bool) or not isinstance(progress, (int, float)) or progress < 0:
        msg = f"progress must be True, False or a number of seconds >= 0, not {progress!r}"
        raise ValueError(msg)
    return float(progress)
