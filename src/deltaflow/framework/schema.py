"""Declared input columns: Spark DDL strings (``"user string, page string, ts long"``) parsed
into columns and types, and values read by their declared type.

A pipeline declares its inputs' columns with :attr:`deltaflow.Pipeline.schemas`; the command
line (CSV and JSON-lines files), pandas DataFrames and the Spark adapter read each input by
its declaration: the columns are taken by name, in the declared order, and every value is
parsed (text) or checked (typed sources) against its column's type. A value that does not fit
is an error naming the column and the value; the readers add the file and line.

Types (Spark's names and aliases): ``string``, ``boolean``, ``tinyint``/``byte``,
``smallint``/``short``, ``int``/``integer``, ``bigint``/``long``, ``float``/``real``,
``double``, and ``array<T>`` (read as a tuple). A float column refuses NaN: NaN equals
nothing, so a datum holding it could be neither counted nor retracted; infinities are
numbers. An empty text cell of a non-string column is ``None`` (null).

    >>> schema = Schema.parse("user string, clicks long, score double, tags array<string>")
    >>> schema.names
    ('user', 'clicks', 'score', 'tags')
    >>> [c.type.parse("7") for c in schema.columns[:3]]
    ['7', 7, 7.0]
    >>> schema.columns[1].type.parse("01234")
    1234
    >>> schema.columns[1].type.parse("1.5")
    Traceback (most recent call last):
    ...
    ValueError: '1.5' is not a bigint
    >>> schema.columns[3].type.check(["a", "b"])
    ('a', 'b')
    >>> schema.ddl
    'user string, clicks bigint, score double, tags array<string>'
"""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

import attrs

__all__ = ["Column", "ColumnType", "Schema"]

_ALIASES = {
    "string": "string",
    "varchar": "string",
    "char": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "real": "float",
    "double": "double",
}
_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_INT_TEXT = re.compile(r"[-+]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity)", re.IGNORECASE
)


@attrs.frozen
class ColumnType:
    """One column's type: an atomic Spark type name (canonical: ``bigint``, not ``long``), or
    ``array`` with its ``element`` type."""

    name: str
    element: ColumnType | None = None

    @property
    def ddl(self) -> str:
        """The type in DDL (``array<bigint>``)."""
        if self.element is not None:
            return f"array<{self.element.ddl}>"
        return self.name

    def parse(self, text: str) -> Any:
        """The value of a text cell (a CSV field), or a ``ValueError`` saying why it does not
        fit. Integers are decimal digits with an optional sign; floats are decimal, with an
        exponent, or ``inf``/``infinity``; booleans ``true``/``false``; an array is JSON."""
        name = self.name
        if name == "string":
            return text
        if text == "":
            return None
        if name in _BITS:
            if not _INT_TEXT.fullmatch(text):
                msg = f"{text!r} is not a {name}"
                raise ValueError(msg)
            return self._in_range(int(text), text)
        if name in ("double", "float"):
            if not _FLOAT_TEXT.fullmatch(text):
                if text.lower() == "nan":
                    msg = f"{text!r} is a NaN, which equals nothing"
                else:
                    msg = f"{text!r} is not a {name}"
                raise ValueError(msg)
            return float(text)
        if name == "boolean":
            low = text.lower()
            if low in ("true", "false"):
                return low == "true"
            msg = f"{text!r} is not a boolean (true or false)"
            raise ValueError(msg)
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError:
            msg = f"{text!r} is not a JSON array for {self.ddl}"
            raise ValueError(msg) from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        """A typed value (JSON, pandas, Arrow) as this type's Python value, or a
        ``ValueError`` saying why it does not fit. ``None`` is null and fits any type."""
        if value is None:
            return None
        name = self.name
        if name == "string":
            if isinstance(value, str):
                return str(value)
        elif name in _BITS:
            if not isinstance(value, bool) and isinstance(value, numbers.Integral):
                return self._in_range(int(value), value)
            if isinstance(value, float) and value.is_integer() and math.isfinite(value):
                # pandas stores an int column with nulls as floats
                return self._in_range(int(value), value)
        elif name in ("double", "float"):
            if not isinstance(value, bool) and isinstance(value, numbers.Real):
                f = float(value)
                if f != f:
                    msg = f"{value!r} is a NaN, which equals nothing"
                    raise ValueError(msg)
                return f
        elif name == "boolean":
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                return bool(value)
        elif isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
            assert self.element is not None
            return tuple(self.element.check(v) for v in value)
        msg = f"{value!r} is not a {self.ddl}"
        raise ValueError(msg)

    def _in_range(self, n: int, shown: object) -> int:
        bits = _BITS[self.name]
        if not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
            msg = f"{shown!r} is out of range for a {self.name}"
            raise ValueError(msg)
        return n


def _no_constant(name: str) -> Any:
    msg = f"{name} is not a number"
    raise ValueError(msg)


@attrs.frozen
class Column:
    """One declared column: its name, its type, and whether it may hold null (``None``):
    Spark's rule, nullable unless declared ``NOT NULL``."""

    name: str
    type: ColumnType
    nullable: bool = True

    def check(self, value: Any) -> Any:
        """:meth:`ColumnType.check`, and a null refused in a ``NOT NULL`` column.

        >>> Column("ts", ColumnType("bigint"), nullable=False).check(None)
        Traceback (most recent call last):
        ...
        ValueError: column 'ts' is null, but it is declared NOT NULL
        """
        try:
            out = self.type.check(value)
        except ValueError as exc:
            msg = f"column {self.name!r}: {exc}"
            raise ValueError(msg) from None
        if out is None and not self.nullable:
            msg = f"column {self.name!r} is null, but it is declared NOT NULL"
            raise ValueError(msg)
        return out


def _type_of(text: str, ddl: str) -> ColumnType:
    t = text.strip()
    low = t.lower()
    if low.startswith("array<") and low.endswith(">"):
        return ColumnType("array", _type_of(t[6:-1], ddl))
    name = _ALIASES.get(low)
    if name is None:
        known = ", ".join(sorted(set(_ALIASES.values()))) + ", array<T>"
        msg = f"schema {ddl!r}: unknown type {t!r} (types: {known})"
        raise ValueError(msg)
    return ColumnType(name)


def _split_top(ddl: str) -> list[str]:
    """``ddl`` split at the commas outside ``<...>``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    return parts


@attrs.frozen
class Schema:
    """Declared columns, in order (the datum's order)."""

    columns: tuple[Column, ...]

    @classmethod
    def parse(cls, ddl: object) -> Schema:
        """The columns of a DDL string ``"name type, name type, ..."`` (an optional ``:``
        between name and type, names optionally in backquotes).

        Raises:
            TypeError: not a string.
            ValueError: no column, a repeated name, an unknown type, naming them.
        """
        if not isinstance(ddl, str):
            msg = f"a schema is a DDL string such as 'user string, ts long', not {ddl!r}"
            raise TypeError(msg)
        columns = []
        for part in _split_top(ddl):
            text = part.strip()
            if not text:
                continue
            if text.startswith("`"):
                end = text.find("`", 1)
                if end < 0:
                    msg = f"schema {ddl!r}: unclosed backquote in {text!r}"
                    raise ValueError(msg)
                name, rest = text[1:end], text[end + 1 :]
            else:
                pieces = re.split(r"[\s:]+", text, maxsplit=1)
                if len(pieces) != 2 or not pieces[1].strip():
                    msg = f"schema {ddl!r}: {text!r} is not 'name type'"
                    raise ValueError(msg)
                name, rest = pieces
            rest = rest.strip().lstrip(":").strip()
            nullable = True
            words = rest.rsplit(None, 2)
            if len(words) == 3 and [w.lower() for w in words[1:]] == ["not", "null"]:
                rest, nullable = words[0], False
            columns.append(Column(name, _type_of(rest, ddl), nullable))
        if not columns:
            msg = f"schema {ddl!r} has no columns"
            raise ValueError(msg)
        names = [c.name for c in columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            msg = f"schema {ddl!r}: columns {repeated} appear twice"
            raise ValueError(msg)
        return cls(tuple(columns))

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(c.name for c in self.columns)

    @property
    def ddl(self) -> str:
        """The schema as a DDL string with canonical type names."""
        return ", ".join(
            f"{c.name} {c.type.ddl}" + ("" if c.nullable else " not null") for c in self.columns
        )

    def check_datum(self, datum: Any) -> Any:
        """``datum`` (fed from Python: one column's value, or a tuple of the columns' values
        in order) with each value checked by its column, or a ``ValueError`` saying why it
        does not fit.

        >>> schema = Schema.parse("user string, ts long not null")
        >>> schema.check_datum(("u1", 7))
        ('u1', 7)
        >>> schema.check_datum(("u1", "x"))
        Traceback (most recent call last):
        ...
        ValueError: column 'ts': 'x' is not a bigint
        >>> schema.check_datum("u1")
        Traceback (most recent call last):
        ...
        ValueError: 'u1' is not a tuple of the 2 declared columns (user string, ts bigint not null)
        """
        columns = self.columns
        if len(columns) == 1:
            return columns[0].check(datum)
        if datum.__class__ is not tuple or len(datum) != len(columns):
            msg = f"{datum!r} is not a tuple of the {len(columns)} declared columns ({self.ddl})"
            raise ValueError(msg)
        return tuple(c.check(v) for c, v in zip(columns, datum))
