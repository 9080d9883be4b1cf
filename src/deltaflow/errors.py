"""The errors deltaflow raises at run time.

API misuse raises plain ``TypeError`` / ``ValueError`` with the offending value in the message.
Conditions of a running job raise a :class:`DeltaflowError`.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "DeltaflowError",
    "JobClosedError",
    "OperatorError",
    "OperatorTypeError",
    "OperatorValueError",
    "PeerLostError",
    "RemoteTraceback",
    "SubscriptionOverflowError",
]


class DeltaflowError(Exception):
    """Base class of the errors a running deltaflow job raises."""


class OperatorError(DeltaflowError):
    """User code inside an operator raised; the job is stopped.

    ``operator`` names the operator (with the user function as ``module.qualname:line``); the
    user's exception is the ``__cause__``.
    """

    def __init__(self, message: str, *, operator: str) -> None:
        super().__init__(message)
        self.operator = operator

    @classmethod
    def of(cls, operator: str, exc: BaseException) -> OperatorError:
        """The error for ``exc`` raised by ``operator``'s code (raise it ``from exc``).

        >>> OperatorError.of("map(f)", ZeroDivisionError("boom"))
        OperatorError("operator 'map(f)' raised ZeroDivisionError: boom")
        """
        msg = f"operator '{operator}' raised {exc.__class__.__name__}: {exc}"
        return cls(msg, operator=operator)


class OperatorValueError(OperatorError, ValueError):
    """A built-in operator met a value it cannot use (a NaN among values it orders or adds);
    the job is stopped. Both an :class:`OperatorError` and a ``ValueError``.

    >>> err = OperatorValueError("max: key 'k' has NaN among its values", operator="max")
    >>> isinstance(err, ValueError), err.operator
    (True, 'max')
    """


class OperatorTypeError(OperatorError, TypeError):
    """A built-in operator met values of types it cannot use (values ``<`` cannot compare,
    a sum of strings); the job is stopped. Both an :class:`OperatorError` and a
    ``TypeError``."""


class JobClosedError(DeltaflowError):
    """The job has stopped (finished, or failed earlier) and cannot take more work."""


class PeerLostError(DeltaflowError):
    """A worker process (or a peer of a mesh) went away before the job finished: it was
    killed, crashed, or lost its connection. The message names the worker(s) it hosted."""


class SubscriptionOverflowError(DeltaflowError):
    """A subscription with a ``max_buffer`` fell that many times behind and was ended; the job
    and its other readers go on."""


class RemoteTraceback(Exception):
    """The traceback, as text, of an exception raised in another process (a worker process, a
    Spark task): the ``__cause__`` of the copy raised here, so that a printed traceback shows
    where the original was raised.

    >>> print(RemoteTraceback("Traceback (most recent call last): ..."))
    <BLANKLINE>
    Traceback (most recent call last): ...
    """

    def __str__(self) -> str:
        return "\n" + str(self.args[0] if self.args else "")


class CheckpointError(DeltaflowError):
    """A checkpoint could not be read (a file is missing, truncated or corrupted, or was
    written by a newer deltaflow) or written. The message names the checkpoint's location and
    the file; nothing is started from a checkpoint that cannot be read whole."""
