"""Errors that cross a process boundary: reported where they are raised, raised again where
the job is awaited.

A worker process, a peer of a mesh or a Spark task that fails sends an :class:`ErrorReport`
of its error; whoever awaits the job raises :meth:`ErrorReport.rebuild`: the same deltaflow
error (an :class:`~deltaflow.OperatorError` stays an ``OperatorError``, an
``OperatorValueError`` an ``OperatorValueError``) or built-in exception (``ValueError``,
``KeyboardInterrupt``...) with the same message, so that the application's ``except``
clauses catch at every process count what they catch in one process. The user's exception
behind an ``OperatorError`` comes along pickled when it can: the rebuilt error's
``__cause__`` is then a copy of it, and that copy's ``__cause__`` a
:class:`~deltaflow.errors.RemoteTraceback` holding the traceback text from the other side.

    >>> from deltaflow.errors import OperatorError
    >>> def fails():
    ...     try:
    ...         1 / 0
    ...     except ZeroDivisionError as exc:
    ...         raise OperatorError.of("map(f)", exc) from exc
    >>> try:
    ...     fails()
    ... except OperatorError as exc:
    ...     report = ErrorReport.of(exc)
    >>> again = report.rebuild()
    >>> again, again.operator, type(again.__cause__).__name__
    (OperatorError("operator 'map(f)' raised ZeroDivisionError: division by zero"), 'map(f)', \
'ZeroDivisionError')
    >>> "1 / 0" in str(again.__cause__.__cause__)
    True

A report also travels as text (:meth:`ErrorReport.to_text`: base64 of JSON, never a pickle),
for channels that carry only a message, such as a failed Spark task's; the user's exception
does not travel that way, only its class's name and module, its plain arguments and its
traceback text: the rebuilt error's ``__cause__`` is then a new exception of that class when
it is deltaflow's, a built-in, or one of a module already imported here (nothing is imported
or unpickled on the word of a text), else the :class:`~deltaflow.errors.RemoteTraceback`.
"""

from __future__ import annotations

import base64
import builtins
import json
import pickle
import sys
import traceback
from collections.abc import Callable
from typing import Any

import attrs
import cloudpickle  # type: ignore[import-untyped]

from ... import errors
from ...errors import DeltaflowError, OperatorError, RemoteTraceback

__all__ = ["ErrorReport"]

_PLAIN = (str, int, float, bool, type(None))


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _known(module: str, kind: str) -> type[BaseException] | None:
    """The exception class a report names, if it is one of deltaflow's or a built-in."""
    if module == errors.__name__ and kind in errors.__all__:
        found = getattr(errors, kind)
    elif module == "builtins":
        found = getattr(builtins, kind, None)
    else:
        return None
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


@attrs.frozen
class ErrorReport:
    """What is known of an error raised in another process (see the module docstring)."""

    #: The exception's class name and module.
    kind: str
    module: str
    #: ``str(exc)``, and ``exc.args`` when they are plain values (else ``(message,)``).
    message: str
    args: tuple[Any, ...]
    #: The operator that failed (an :class:`~deltaflow.OperatorError`'s), else ``None``.
    operator: str | None
    #: The traceback text of the user's exception behind it (else of the error itself).
    traceback: str
    #: The user's exception, pickled, when it was asked for and pickles.
    cause: bytes | None = None
    #: The user's exception's class name and module, and its plain arguments.
    cause_kind: str | None = None
    cause_module: str | None = None
    cause_args: tuple[Any, ...] = ()

    @classmethod
    def of(cls, exc: BaseException, *, with_cause: bool = True) -> ErrorReport:
        """The report of ``exc``; ``with_cause``: pickle its ``__cause__`` (the user's
        exception behind an ``OperatorError``) into it when it pickles."""
        args = exc.args if all(isinstance(a, _PLAIN) for a in exc.args) else (str(exc),)
        user = exc.__cause__
        pickled = None
        if with_cause and user is not None:
            try:
                pickled = cloudpickle.dumps(user)
            except Exception:  # not every exception pickles: its text still travels
                pickled = None
        return cls(
            kind=type(exc).__name__,
            module=type(exc).__module__,
            message=str(exc),
            args=tuple(args),
            operator=exc.operator if isinstance(exc, OperatorError) else None,
            traceback=_format(user if user is not None else exc),
            cause=pickled,
            cause_kind=None if user is None else type(user).__name__,
            cause_module=None if user is None else type(user).__module__,
            cause_args=()
            if user is None or not all(isinstance(a, _PLAIN) for a in user.args)
            else tuple(user.args),
        )

    def rebuild(self, otherwise: Callable[[str], BaseException] = DeltaflowError) -> BaseException:
        """The error to raise here: the same class and message when the class is deltaflow's
        or a built-in, else ``otherwise("Kind: message")``; its ``__cause__`` as the module
        docstring says."""
        found = _known(self.module, self.kind)
        exc: BaseException
        if found is not None and issubclass(found, OperatorError):
            exc = found(self.message, operator="?" if self.operator is None else self.operator)
        elif found is not None:
            try:
                exc = found(*self.args)
            except Exception:  # a constructor that wants other arguments
                exc = otherwise(f"{self.kind}: {self.message}")
        else:
            exc = otherwise(f"{self.kind}: {self.message}")
        remote = RemoteTraceback(self.traceback)
        user = self._user()
        if user is not None:
            user.__cause__ = remote
            exc.__cause__ = user
        else:
            exc.__cause__ = remote
        return exc

    def _user(self) -> BaseException | None:
        """The user's exception, unpickled, if the report carries it and it unpickles; else
        one made of its class and plain arguments (see the module docstring)."""
        if self.cause is not None:
            try:
                user = pickle.loads(self.cause)
            except Exception:  # its class is not importable here, or does not unpickle
                user = None
            if isinstance(user, BaseException):
                return user
        if self.cause_kind is None or self.cause_module is None:
            return None
        kind = _known(self.cause_module, self.cause_kind)
        if kind is None:
            module = sys.modules.get(self.cause_module)  # imported already: never import
            found = getattr(module, self.cause_kind, None) if module is not None else None
            if isinstance(found, type) and issubclass(found, Exception):
                kind = found
        if kind is None or issubclass(kind, OperatorError):
            return None
        try:
            return kind(*self.cause_args)
        except Exception:  # a constructor that wants other arguments
            return None

    def to_text(self) -> str:
        """The report without the pickled exception, as one line of base64 (of JSON)."""
        fields = attrs.asdict(self)
        del fields["cause"]
        return base64.b64encode(json.dumps(fields).encode()).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> ErrorReport:
        """The report :meth:`to_text` wrote.

        Raises:
            ValueError: ``text`` is not such a report.
        """
        try:
            fields = json.loads(base64.b64decode(text, validate=True))
            return cls(
                kind=str(fields["kind"]),
                module=str(fields["module"]),
                message=str(fields["message"]),
                args=tuple(a for a in fields["args"] if isinstance(a, _PLAIN)),
                operator=None if fields["operator"] is None else str(fields["operator"]),
                traceback=str(fields["traceback"]),
                cause_kind=_text_or_none(fields.get("cause_kind")),
                cause_module=_text_or_none(fields.get("cause_module")),
                cause_args=tuple(a for a in fields.get("cause_args", ()) if isinstance(a, _PLAIN)),
            )
        except (ValueError, TypeError, KeyError) as exc:
            msg = f"not an error report: {text[:80]!r}"
            raise ValueError(msg) from exc
