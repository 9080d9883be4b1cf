"""Reading ``test_decoding``'s change lines and PostgreSQL's text output into Python values.

The source reads the table's snapshot as text too (``column::text``), so that a row reads
the same from the snapshot as from a change: each value goes through :func:`convert` by the
column's type.

    >>> parse_change("table public.o: INSERT: id[integer]:1 name[text]:'a''b' amt[numeric]:1.5")
    ('public.o', 'INSERT', {'id': '1', 'name': "a'b", 'amt': '1.5'}, None)
    >>> convert("numeric(10,2)", "1.50")
    Decimal('1.50')
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from typing import Any

__all__ = ["convert", "parse_change"]

_HEAD = re.compile(r'table ((?:"(?:[^"]|"")*"|[^ ."]+)\.(?:"(?:[^"]|"")*"|[^ :"]+)): (\w+):')
_NAME = re.compile(r' ?("(?:[^"]|"")*"|[^\[ ]+)\[((?:[^\]]|\]\[)*?(?:\[\])*)\]:')


def _value(text: str, i: int) -> tuple[str | None, int]:
    """The value starting at ``text[i]`` and the index after it."""
    if text.startswith("null", i) and (i + 4 == len(text) or text[i + 4] == " "):
        return None, i + 4
    if text[i] == "'" or text.startswith("B'", i):
        i += 1 if text[i] == "'" else 2
        out = []
        while True:
            j = text.index("'", i)
            out.append(text[i:j])
            if text.startswith("''", j):
                out.append("'")
                i = j + 2
                continue
            return "".join(out), j + 1
    j = text.find(" ", i)
    j = len(text) if j < 0 else j
    return text[i:j], j


def _tuple(text: str, i: int, stop: str | None) -> tuple[dict[str, str | None], int]:
    """Columns ``name[type]:value`` from ``text[i]`` up to ``stop`` (or the end)."""
    values: dict[str, str | None] = {}
    while i < len(text):
        if stop is not None and text.startswith(stop, i):
            break
        m = _NAME.match(text, i)
        if m is None:
            msg = f"cannot read the change {text!r} at {i}"
            raise ValueError(msg)
        name = m.group(1)
        if name.startswith('"'):
            name = name[1:-1].replace('""', '"')
        values[name], i = _value(text, m.end())
    return values, i


def parse_change(
    line: str,
) -> tuple[str, str, dict[str, str | None] | None, dict[str, str | None] | None]:
    """``(table, action, new, old)`` of a change line (``action``: INSERT, UPDATE, DELETE,
    TRUNCATE). Columns holding null may be missing from an old tuple."""
    m = _HEAD.match(line)
    if m is None:
        msg = f"cannot read the change {line!r}"
        raise ValueError(msg)
    table, action = m.group(1), m.group(2)
    rest = line[m.end() :].lstrip(" ")
    if action == "INSERT":
        new, _ = _tuple(rest, 0, None)
        return table, action, new, None
    if action == "DELETE":
        old, _ = _tuple(rest, 0, None)
        return table, action, None, old
    if action == "UPDATE":
        before: dict[str, str | None] | None = None
        if rest.startswith("old-key: "):
            before, i = _tuple(rest, len("old-key: "), " new-tuple: ")
            rest = rest[i:].removeprefix(" ")
        new, _ = _tuple(rest.removeprefix("new-tuple: "), 0, None)
        return table, action, new, before
    return table, action, None, None


def _bool(text: str) -> bool:
    return text in ("true", "t")


def _timestamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


_CONVERT: dict[str, Callable[[str], Any]] = {
    "smallint": int,
    "integer": int,
    "bigint": int,
    "real": float,
    "double precision": float,
    "numeric": decimal.Decimal,
    "boolean": _bool,
    "date": datetime.date.fromisoformat,
    "timestamp without time zone": _timestamp,
    "timestamp with time zone": _timestamp,
}


def convert(type_name: str, text: str | None) -> Any:
    """A column's text output as a Python value by its type (``format_type``'s name):
    integers, floats, numerics (``Decimal``), booleans, dates and timestamps; anything else
    (text, varchar, json, arrays...) stays text."""
    if text is None:
        return None
    base = type_name.split("(")[0].strip()
    fn = _CONVERT.get(base)
    return text if fn is None else fn(text)
