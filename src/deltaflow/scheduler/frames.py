"""Tables of updates: the column conventions of DataFrames and of CSV / JSON-lines files.

A table's columns named ``time`` and ``diff`` are optional (default ``0`` and ``1``); its other
columns, in order, form the datum: one column gives its value, several give a tuple. This is
how ``df.run`` and input handles read a pandas DataFrame, how the command line reads files,
and how the Spark adapter reads its inputs.

    >>> updates_from_rows("xs", ["src", "dst", "time"], [(1, 2, 0), (2, 3, 5)])
    [((1, 2), 0, 1), ((2, 3), 5, 1)]
    >>> updates_from_rows("xs", ["word"], [("cat",)])
    [('cat', 0, 1)]

Nothing here imports pandas: a DataFrame is recognised by its ``columns`` and
``itertuples``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["is_frame", "updates_from_frame", "updates_from_rows"]


def is_frame(obj: object) -> bool:
    """True for a pandas-like DataFrame (it has ``columns`` and ``itertuples``).

    >>> is_frame([(1, 0, 1)])
    False
    """
    return hasattr(obj, "columns") and hasattr(obj, "itertuples")


def updates_from_rows(
    name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> list[tuple[Any, Any, int]]:
    """``(data, time, diff)`` for each row of a table with ``columns`` (see the module).

    Raises:
        ValueError: no data column, a repeated column, or a row of the wrong length, naming
            the input ``name``.
    """
    columns = list(columns)
    if len(set(columns)) != len(columns):
        msg = f"input {name!r}: repeated column names in {columns}"
        raise ValueError(msg)
    data_at = [i for i, c in enumerate(columns) if c not in ("time", "diff")]
    if not data_at:
        msg = f"input {name!r}: no data columns, only {columns} (time and diff are not data)"
        raise ValueError(msg)
    time_at = columns.index("time") if "time" in columns else None
    diff_at = columns.index("diff") if "diff" in columns else None
    single = data_at[0] if len(data_at) == 1 else None
    width = len(columns)
    out = []
    for row in rows:
        if len(row) != width:
            msg = f"input {name!r}: row {row!r} has {len(row)} cells for the columns {columns}"
            raise ValueError(msg)
        data = row[single] if single is not None else tuple(row[i] for i in data_at)
        time = 0 if time_at is None else row[time_at]
        diff = 1 if diff_at is None else row[diff_at]
        out.append((data, time, diff))
    return out


def updates_from_frame(name: str, frame: Any) -> list[tuple[Any, Any, int]]:
    """The updates of a DataFrame (see the module), rows in order."""
    columns = [str(c) for c in frame.columns]
    return updates_from_rows(name, columns, frame.itertuples(index=False, name=None))
