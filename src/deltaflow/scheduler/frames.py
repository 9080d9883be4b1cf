"""Tables of updates: the column conventions of DataFrames and of CSV / JSON-lines files.

A table's columns named ``time`` and ``diff`` are optional (default ``0`` and ``1``; other names
can be given for them); its other columns, in order, form the datum: one column gives its
value, several give a tuple. This is how ``df.run`` and input handles read a pandas
DataFrame, how the command line reads files, and how the Spark adapter reads its inputs.

With a declared schema (:attr:`deltaflow.Pipeline.schemas`, a
:class:`~deltaflow.framework.schema.Schema`) the datum is the declared columns, taken by name
in the declared order, each value parsed or checked by its type; a table missing a declared
column, or holding one that is neither declared nor the time or diff, is an error naming it.
Without one, text cells are numbers only when the number prints back as the same text
(:func:`infer`), so no value is changed by reading it.

    >>> updates_from_rows("xs", ["src", "dst", "time"], [(1, 2, 0), (2, 3, 5)])
    [((1, 2), 0, 1), ((2, 3), 5, 1)]
    >>> updates_from_rows("xs", ["word"], [("cat",)])
    [('cat', 0, 1)]
    >>> from deltaflow.framework.schema import Schema
    >>> layout = TableLayout.of("xs", ["ts", "zip"], Schema.parse("zip string, ts long"))
    >>> layout.update(["17", "01234"], text=True, where="line 2")
    (('01234', 17), 0, 1)

Nothing here imports pandas: a DataFrame is recognised by its ``columns`` and
``itertuples``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..operators.values import as_count

if TYPE_CHECKING:
    from ..framework.schema import ColumnType, Schema

__all__ = ["TableLayout", "infer", "is_frame", "updates_from_frame", "updates_from_rows"]

Refuse = Callable[[BaseException, Any, str], None]
"""``refuse(error, record, where)``: what a reader does with a record that does not fit
instead of raising (an input's ``on_bad`` mode, :mod:`deltaflow.scheduler.accounting`)."""

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+")


def infer(text: str) -> Any:
    """A text cell of an undeclared column: an ``int`` or ``float`` when the number prints
    back as exactly this text, else the text itself (``01234``, ``1_000``, ``nan``, ``inf``,
    ``1.50`` stay strings).

    >>> infer("42"), infer("-2.5"), infer("01234"), infer("1_000"), infer("nan"), infer("1e3")
    (42, -2.5, '01234', '1_000', 'nan', '1e3')
    """
    if _INT.fullmatch(text):
        n = int(text)
        return n if str(n) == text else text
    if _FLOAT.fullmatch(text):
        f = float(text)
        return f if repr(f) == text else text
    return text


def is_frame(obj: object) -> bool:
    """True for a pandas-like DataFrame (it has ``columns`` and ``itertuples``).

    >>> is_frame([(1, 0, 1)])
    False
    """
    return hasattr(obj, "columns") and hasattr(obj, "itertuples")


@attrs.frozen
class TableLayout:
    """Where a table's datum, time and diff are, and the declared type of each data column
    (``None`` for every one without a schema)."""

    name: str
    columns: tuple[str, ...]
    data_at: tuple[int, ...]
    types: tuple[ColumnType | None, ...]
    time_at: int | None
    diff_at: int | None
    #: Per data column, whether it is declared ``NOT NULL`` (empty: none is).
    required: tuple[bool, ...] = ()

    @classmethod
    def of(
        cls,
        name: str,
        columns: Sequence[str],
        schema: Schema | None = None,
        *,
        time: str = "time",
        diff: str = "diff",
        where: str = "",
    ) -> TableLayout:
        """The layout of input ``name``'s table with these ``columns``.

        Raises:
            ValueError: no data column, a repeated column, or (with ``schema``) a declared
                column missing or an undeclared one present, naming the input.
        """
        columns = tuple(columns)
        here = f"input {name!r}{where}"
        if len(set(columns)) != len(columns):
            msg = f"{here}: repeated column names in {list(columns)}"
            raise ValueError(msg)
        time_at = columns.index(time) if time in columns else None
        diff_at = columns.index(diff) if diff in columns else None
        if schema is None:
            data_at = tuple(i for i, c in enumerate(columns) if c not in (time, diff))
            if not data_at:
                msg = (
                    f"{here}: no data columns, only {list(columns)} "
                    f"({time} and {diff} are not data)"
                )
                raise ValueError(msg)
            return cls(name, columns, data_at, (None,) * len(data_at), time_at, diff_at)
        missing = [c for c in schema.names if c not in columns]
        if missing:
            msg = (
                f"{here}: no column {missing[0]!r} of the declared {schema.ddl!r} "
                f"(columns: {list(columns)})"
            )
            raise ValueError(msg)
        extra = [c for c in columns if c not in schema.names and c not in (time, diff)]
        if extra:
            msg = (
                f"{here}: column {extra[0]!r} is not declared in {schema.ddl!r} (nor the "
                f"time {time!r} or diff {diff!r} column)"
            )
            raise ValueError(msg)
        data_at = tuple(columns.index(c) for c in schema.names)
        types = tuple(c.type for c in schema.columns)
        required = tuple(not c.nullable for c in schema.columns)
        return cls(name, columns, data_at, types, time_at, diff_at, required)

    def update(self, row: Sequence[Any], *, text: bool, where: str) -> tuple[Any, Any, Any]:
        """The ``(data, time, diff)`` of one row: text cells (``text``, a CSV) are parsed by
        their declared type or :func:`infer`; typed cells are checked by their declared type.

        Raises:
            ValueError: a row of the wrong length, a value that does not fit its type, or a
                time or diff that is not an int, naming the input, ``where`` and the column.
        """
        if len(row) != len(self.columns):
            msg = (
                f"input {self.name!r}, {where}: {len(row)} cells for the columns "
                f"{list(self.columns)}"
            )
            raise ValueError(msg)
        values = []
        for i, kind in zip(self.data_at, self.types):
            cell = row[i]
            if kind is None:
                values.append(infer(cell) if text else cell)
                continue
            try:
                values.append(kind.parse(cell) if text else kind.check(cell))
            except ValueError as exc:
                msg = f"input {self.name!r}, {where}: column {self.columns[i]!r}: {exc}"
                raise ValueError(msg) from None
            if values[-1] is None and self.required and self.required[len(values) - 1]:
                msg = (
                    f"input {self.name!r}, {where}: column {self.columns[i]!r} is null "
                    f"({cell!r}), but it is declared NOT NULL"
                )
                raise ValueError(msg)
        data = values[0] if len(values) == 1 else tuple(values)
        time = (
            0
            if self.time_at is None
            else self._integer(row[self.time_at], self.time_at, where, text)
        )
        diff = (
            1
            if self.diff_at is None
            else self._integer(row[self.diff_at], self.diff_at, where, text)
        )
        return data, time, diff

    def _integer(self, cell: Any, at: int, where: str, text: bool) -> Any:
        if not text:
            n = as_count(cell)
            # Anything else reaches the validation of updates, which names it with its datum.
            return cell if n is None else n
        if _INT.fullmatch(cell.strip()):
            return int(cell)
        col = self.columns[at]
        msg = f"input {self.name!r}, {where}: column {col!r} is {cell!r}, which is not an int"
        raise ValueError(msg)


def updates_from_rows(
    name: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    schema: Schema | None = None,
    refuse: Refuse | None = None,
) -> list[tuple[Any, Any, int]]:
    """``(data, time, diff)`` for each row of a table of typed values with ``columns``;
    with ``refuse``, a row that does not fit is handed to it (``refuse(error, row, where)``)
    and left out instead of raised.

    Raises:
        ValueError: no data column, a repeated column, a row of the wrong length, or a value
            that does not fit its declared type, naming the input ``name`` and the row.
    """
    layout = TableLayout.of(name, columns, schema)
    if refuse is None:
        return [layout.update(row, text=False, where=f"row {i}") for i, row in enumerate(rows)]
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(layout.update(row, text=False, where=f"row {i}"))
        except ValueError as exc:
            refuse(exc, tuple(row), f"row {i}")
    return out


def updates_from_frame(
    name: str, frame: Any, schema: Schema | None = None, refuse: Refuse | None = None
) -> list[tuple[Any, Any, int]]:
    """The updates of a DataFrame (see the module), rows in order (``refuse``: as for
    :func:`updates_from_rows`)."""
    columns = [str(c) for c in frame.columns]
    rows = frame.itertuples(index=False, name=None)
    return updates_from_rows(name, columns, rows, schema, refuse)
