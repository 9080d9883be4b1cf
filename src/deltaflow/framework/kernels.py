"""Which path bulk work on integer data takes: numpy kernels over columns, or the general path.

Operators that have a columnar kernel for integer data (keys, values and times that are ints,
int tuples or ``Product`` of ints) choose it per batch: by default (``"auto"``) only for
batches large enough that numpy's fixed cost per call pays, keeping single-update rounds on
the per-update path. The choice can be forced, for the whole process and the processes it
starts, with the ``DELTAFLOW_KERNELS`` environment variable:

* ``auto`` (the default): kernels for large batches of integer data;
* ``always``: kernels wherever the data allow, whatever the batch size (tests use it so that
  small random inputs exercise the kernels);
* ``never``: the general path everywhere (tests use it to check the kernels against it).

Both paths compute the same collections; the setting changes only how.

    >>> previous = set_mode("auto")
    >>> use_kernel(10, threshold=1_000), use_kernel(5_000, threshold=1_000)
    (False, True)
    >>> _ = set_mode(previous)
"""

from __future__ import annotations

import os
from typing import Final, Literal

__all__ = ["ENV", "MODES", "Mode", "mode", "set_mode", "use_kernel"]

Mode = Literal["auto", "always", "never"]

ENV: Final = "DELTAFLOW_KERNELS"
MODES: Final[tuple[Mode, ...]] = ("auto", "always", "never")


def _parse(value: str) -> Mode:
    for m in MODES:
        if value == m:
            return m
    raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(MODES)}")


_mode: Mode = _parse(os.environ.get(ENV, "auto").strip().lower() or "auto")


def mode() -> Mode:
    """The current setting: ``"auto"``, ``"always"`` or ``"never"``."""
    return _mode


def set_mode(value: str) -> Mode:
    """Set the mode for this process and the processes it starts from now on; returns the
    previous one.

    >>> previous = set_mode("never")
    >>> use_kernel(10**6, threshold=1), mode()
    (False, 'never')
    >>> _ = set_mode(previous)
    """
    global _mode
    previous = _mode
    _mode = _parse(value)
    os.environ[ENV] = _mode
    return previous


def use_kernel(size: int, *, threshold: int) -> bool:
    """Whether a batch of ``size`` updates whose data a kernel accepts should take it: at
    ``threshold`` updates or more under ``"auto"`` (each kernel measures its own threshold)."""
    if _mode == "auto":
        return size >= threshold
    return _mode == "always"
