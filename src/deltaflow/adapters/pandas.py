"""pandas in and out (the optional extra ``deltaflow[pandas]``).

In: ``df.run`` and ``InputHandle.insert_many`` take a DataFrame directly; its columns other
than ``time`` and ``diff``, in order, form the datum (one column: its value; several: a
tuple), ``time`` and ``diff`` default to 0 and 1 — the conventions of the Spark adapter.
:func:`from_dataframe` gives those updates as a list.

Out: :func:`to_dataframe` turns output updates into a DataFrame whose columns are the
datum's (tuples flattened, nested ones too) followed by ``time`` and ``diff``.

    >>> import pandas as pd
    >>> import deltaflow as df
    >>> class Totals(df.Pipeline):
    ...     def build(self, sales):
    ...         return sales.sum()
    >>> sales = pd.DataFrame({"who": ["ann", "bob", "ann"], "amount": [3, 4, 5]})
    >>> to_dataframe(df.run(Totals(), sales=sales), ["who", "total"])
       who  total  time  diff
    0  ann      8     0     1
    1  bob      4     0     1
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ..scheduler.frames import updates_from_frame

__all__ = ["from_dataframe", "to_dataframe"]


def from_dataframe(frame: pd.DataFrame, name: str = "dataframe") -> list[tuple[Any, Any, int]]:
    """The ``(data, time, diff)`` updates a DataFrame stands for (rows in order).

    >>> from_dataframe(pd.DataFrame({"src": [1], "dst": [2], "diff": [-1]}))
    [((1, 2), 0, -1)]
    """
    return updates_from_frame(name, frame)


def _flatten(datum: Any) -> list[Any]:
    if datum.__class__ is not tuple and not isinstance(datum, tuple):
        return [datum]
    out: list[Any] = []
    for part in datum:
        out.extend(_flatten(part))
    return out


def to_dataframe(
    updates: Iterable[tuple[Any, Any, int]], columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Output updates ``(data, time, diff)`` as a DataFrame: the datum's columns (tuples
    flattened), then ``time`` and ``diff``.

    ``columns`` names the datum's columns; without it a datum that is not a tuple is the
    column ``data`` and a tuple's parts are ``c0``, ``c1``, ...

    Raises:
        ValueError: a datum does not flatten into as many values as there are columns.

    >>> to_dataframe([((1, ("a", 2.5)), 3, -1)])
       c0 c1   c2  time  diff
    0   1  a  2.5     3    -1
    """
    rows = []
    width = None if columns is None else len(columns)
    for data, time, diff in updates:
        flat = _flatten(data)
        if width is None:
            width = len(flat)
        if len(flat) != width:
            msg = (
                f"to_dataframe: datum {data!r} has {len(flat)} values, "
                f"not {width} (columns {columns if columns is not None else 'of the first'})"
            )
            raise ValueError(msg)
        rows.append([*flat, time, diff])
    if columns is None:
        columns = ["data"] if width in (None, 1) else [f"c{i}" for i in range(width or 0)]
    return pd.DataFrame(rows, columns=[*columns, "time", "diff"])
