"""deltaflow's WARNINGs on Spark executors, logged again on the driver.

A Spark executor's Python worker configures no logging: deltaflow's ``NullHandler`` would
swallow what its tasks log (a stranger refused on a worker's port, anything an operator
warns of). So every deltaflow task runs under :func:`forwarding`, which keeps the task's
``deltaflow`` records of level WARNING and above (at most :data:`MAX_RECORDS`; the rest are
counted) until the task hands them to the driver: a stream's workers on their authenticated
connection to the driver, with each answer; a batch job's tasks in an accumulator, read when
the job is done. The driver logs each again (:func:`relog`) under the record's own logger,
its message prefixed with where it happened (the task, its host and process). Records a task
could not hand over (it failed first) go to the executor's standard error, Spark's log of
that executor.

    >>> with forwarding("task 0") as kept:
    ...     logging.getLogger("deltaflow").warning("a stranger refused")
    ...     records = kept.take()
    >>> name, level, text = records[0]
    >>> name, logging.getLevelName(level), text.startswith("task 0 on ")
    ('deltaflow', 'WARNING', True)
    >>> text.endswith(": a stranger refused")
    True
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.accumulators import AccumulatorParam

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.accumulators import Accumulator

__all__ = ["MAX_RECORDS", "Kept", "Records", "forwarding", "records_accumulator", "relog"]

#: ``(logger name, level, "where: message")``: one record on its way to the driver.
Record = tuple[str, int, str]
#: The most records one task keeps for the driver (the rest are counted, then said).
MAX_RECORDS = 1000


def where(task: str) -> str:
    """``"task 3 on host-7 (pid 123)"``: a task and the executor process it runs in."""
    return f"{task} on {socket.gethostname()} (pid {os.getpid()})"


class Kept(logging.Handler):
    """The task's ``deltaflow`` records of level WARNING and above, kept for the driver."""

    def __init__(self, task: str) -> None:
        super().__init__(logging.WARNING)
        self.where = where(task)
        self._records: list[Record] = []
        self._dropped = 0
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception), self._guard:
            if len(self._records) < MAX_RECORDS:
                text = f"{self.where}: {record.getMessage()}"
                self._records.append((record.name, record.levelno, text))
            else:
                self._dropped += 1

    def take(self) -> list[Record]:
        """The records kept since the last call (and how many were dropped), now the
        driver's."""
        with self._guard:
            records, self._records = self._records, []
            dropped, self._dropped = self._dropped, 0
        if dropped:
            text = f"{self.where}: {dropped} more WARNING records were dropped"
            records.append(("deltaflow", logging.WARNING, text))
        return records


@contextlib.contextmanager
def forwarding(task: str) -> Iterator[Kept]:
    """Keep the ``deltaflow`` WARNINGs logged inside the block (see the module); what is left
    untaken at its end goes to standard error."""
    logger = logging.getLogger("deltaflow")
    kept = Kept(task)
    logger.addHandler(kept)
    try:
        yield kept
    finally:
        logger.removeHandler(kept)
        for _, level, text in kept.take():
            print(f"deltaflow {logging.getLevelName(level)}: {text}", file=sys.stderr)


def relog(records: list[Record]) -> None:
    """Log on the driver the records a task kept (each under its own logger)."""
    for name, level, text in records:
        logger = logging.getLogger(name)
        if logger.isEnabledFor(level):
            record = logger.makeRecord(name, level, "(spark executor)", 0, text, (), None)
            logger.handle(record)


class Records(AccumulatorParam[list[Record]]):
    """An accumulator of the records a batch job's tasks kept."""

    def zero(self, value: list[Record]) -> list[Record]:
        return []

    def addInPlace(self, value1: list[Record], value2: list[Record]) -> list[Record]:
        value1.extend(value2)
        return value1


def records_accumulator(sc: SparkContext) -> Accumulator[list[Record]]:
    """A fresh accumulator for one job's records."""
    return sc.accumulator([], Records())
