"""A task's error raised on the driver as itself, not as Spark's.

A failed task fails its Spark job with a JVM exception (a ``Py4JJavaError``, a
``StreamingQueryException``) of a few hundred lines, the task's Python traceback somewhere
inside. So every deltaflow task runs under :func:`reported`: an error leaving it becomes a
:class:`TaskFailed` whose message ends with the error's
:class:`~deltaflow.scheduler.net.remote_errors.ErrorReport` as text (JSON, never a pickle). The
driver makes Spark's calls under :func:`translated`, which finds the report in Spark's
exception and raises the error it describes - the :class:`~deltaflow.OperatorError` naming
the operator and the user's exception, the ``ValueError`` of a bad row, the ``TypeError`` of
an output datum that does not fit the schema. An ``OperatorError``'s ``__cause__`` is the
user's exception (rebuilt, :mod:`deltaflow.scheduler.net.remote_errors`), whose own cause holds
the task's traceback, naming the user's file and line (:func:`._ship.ship` keeps the
functions' file names); Spark's exception is its ``__context__``. Any other error's
``__cause__`` is Spark's exception, which keeps the whole story within reach.

    >>> try:
    ...     with translated():
    ...         try:
    ...             with reported():
    ...                 raise ValueError("input 'xs': column 'time' is null in the row (x=2)")
    ...         except TaskFailed as failed:
    ...             raise RuntimeError(f"Job aborted: ... {failed} ...") from None
    ... except ValueError as exc:
    ...     print(exc, "<-", type(exc.__cause__).__name__)
    input 'xs': column 'time' is null in the row (x=2) <- RuntimeError
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import NoReturn

from ...errors import PeerLostError, RemoteTraceback
from ...scheduler.net.remote_errors import ErrorReport

__all__ = [
    "TaskFailed",
    "from_spark",
    "from_text",
    "raise_from",
    "report_text",
    "reported",
    "translated",
]

_MARK = "deltaflow-error:"
_FOUND = re.compile(r"\[deltaflow-error:([A-Za-z0-9+/=]+)\]")


class TaskFailed(Exception):
    """A deltaflow task's error on its way to the driver: ``"Kind: message"``, then the
    report that :func:`translated` reads."""


def report_text(exc: BaseException) -> str:
    """``exc`` as the text a :class:`TaskFailed` carries (and any channel of text can): its
    kind and message, the traceback of the user's exception behind it (Spark shows only the
    last exception of a chain), and the report."""
    report = ErrorReport.of(exc, with_cause=False)
    # The report keeps the traceback too: the driver's error names the user's frames from it.
    return f"{type(exc).__name__}: {exc}\n\n{report.traceback}\n[{_MARK}{report.to_text()}]"


@contextlib.contextmanager
def reported() -> Iterator[None]:
    """Run a task's body: an error leaving it leaves as a :class:`TaskFailed` (from it)."""
    try:
        yield
    except Exception as exc:
        raise TaskFailed(report_text(exc)) from exc


def from_spark(exc: BaseException) -> BaseException | None:
    """The error a deltaflow task reported inside Spark's exception ``exc`` (the first one
    other than a lost peer's, which only follows from another's failure), or ``None``."""
    return from_text(str(exc))


def from_text(text: str) -> BaseException | None:
    """The error of the first report in ``text`` other than a lost peer's (else the first
    report's), or ``None`` when it holds none."""
    reports = []
    for found in _FOUND.finditer(text):
        with contextlib.suppress(ValueError):
            reports.append(ErrorReport.from_text(found.group(1)))
    if not reports:
        return None
    told = [r for r in reports if r.kind != PeerLostError.__name__]
    return (told or reports)[0].rebuild()


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Make Spark's calls: an exception carrying a task's report raises that error instead,
    from Spark's exception."""
    try:
        yield
    except Exception as exc:
        error = from_spark(exc)
        if error is None:
            raise
        raise_from(error, exc)


def raise_from(error: BaseException, spark: BaseException) -> NoReturn:
    """Raise ``error`` (rebuilt from a task's report) for Spark's exception ``spark``: the
    user's exception behind it stays its ``__cause__`` (``spark`` its ``__context__``);
    else ``spark`` is its cause."""
    if error.__cause__ is not None and not isinstance(error.__cause__, RemoteTraceback):
        error.__context__ = spark
        raise error
    raise error from spark
