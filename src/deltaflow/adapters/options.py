"""Checks of the options the sources and sinks take (``df.sources.files(poll=...)``,
``df.sinks.postgres(patience=...)``): a bad one is refused where it is given, named with the
factory it was given to.

    >>> check_seconds(0.5, "files", "poll")
    >>> check_seconds(True, "files", "poll")
    Traceback (most recent call last):
    ...
    ValueError: files: poll must be a number of seconds > 0, not True
"""

from __future__ import annotations

__all__ = ["check_seconds"]


def check_seconds(value: object, where: str, name: str, *, zero: bool = False) -> None:
    """Refuse ``value`` for the option ``name`` of ``where`` unless it is a number of seconds
    (an int or a float, not a bool) above 0, or at least 0 with ``zero``.

    Raises:
        ValueError: naming ``where``, the option and the value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fits = False
    else:
        fits = not value < 0 if zero else value > 0
    if not fits:
        bound = ">= 0" if zero else "> 0"
        msg = f"{where}: {name} must be a number of seconds {bound}, not {value!r}"
        raise ValueError(msg)
