"""Files of updates: CSV and JSON lines in, JSON lines out (what the command line reads and
writes).

A file's format follows its extension. In either, the fields other than the time and diff
columns (``time`` and ``diff`` unless named otherwise), in order, form the datum (one field:
its value; several: a tuple); time and diff default to 0 and 1
(:mod:`deltaflow.scheduler.frames`). With a declared schema (``Pipeline.schemas``) the datum
is the declared columns in the declared order, each value parsed by its type.

* Files are UTF-8 (a byte-order mark is skipped); any other bytes are an error naming the file
  and the byte offset.
* ``.jsonl``: one JSON object per line, each with the first line's fields; JSON arrays become
  tuples (nested ones too). ``NaN`` and ``Infinity``, which are not JSON, are refused.
* ``.csv``: a header row names the columns. Without a schema a cell is an ``int`` or a
  ``float`` only when the number prints back as the same text, else the string: ``01234``,
  ``1_000``, ``nan`` and ``inf`` stay strings.

Errors name the input, the file, the line and the column. Output updates are written one per
line as ``{"data": ..., "time": t, "diff": d}``, with ``"output": name`` added for a pipeline
with several outputs; tuples become arrays.

    >>> import io
    >>> read_csv(io.StringIO("src,dst,time\\n1,2,0\\n2,x,1\\n"), "edges")
    [((1, 2), 0, 1), ((2, 'x'), 1, 1)]
    >>> read_jsonl(io.StringIO('{"word": "cat", "tags": [1, 2], "diff": -1}\\n'), "words")
    [(('cat', (1, 2)), 0, -1)]
    >>> out = io.StringIO()
    >>> write_jsonl(out, [(("cat", 3), 0, 1)])
    >>> out.getvalue()
    '{"data": ["cat", 3], "time": 0, "diff": 1}\\n'
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..scheduler.frames import Refuse, TableLayout

if TYPE_CHECKING:
    from ..framework.schema import Schema

__all__ = ["FORMATS", "read_csv", "read_jsonl", "read_updates", "write_jsonl"]

FORMATS = (".csv", ".jsonl")
"""The file extensions :func:`read_updates` reads."""

_BOM = "\ufeff"


def read_csv(
    stream: IO[str],
    name: str,
    schema: Schema | None = None,
    *,
    time: str = "time",
    diff: str = "diff",
    source: str = "",
    refuse: Refuse | None = None,
) -> list[tuple[Any, Any, int]]:
    """The updates of a CSV file with a header row (cells read as the module says);
    ``source`` (the file) prefixes the line numbers of errors. With ``refuse``, a line that
    does not fit is handed to it (``refuse(error, line's cells, where)``) and left out.

    A row is named by the line it starts on; a quoted field left open runs on to the end of
    the file (CSV lets a quoted field hold line breaks), which is said as such:

    >>> read_csv(io.StringIO('a,b\\n1,2\\n3,"4\\n5,6\\n'), "xs")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: input 'xs', line 3: a quoted field opens here and is never closed ...
    """
    # strict: a quote left open is an error at the end of the file, not a cell running on
    reader = csv.reader(stream, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        _not_csv(name, exc, f"{source}, line 1" if source else "line 1")
    if header is None:
        return []
    if header and header[0].startswith(_BOM):
        header[0] = header[0][1:]
    at = f"{source}, " if source else ""
    layout = TableLayout.of(
        name, header, schema, time=time, diff=diff, where=f", {source}" if source else ""
    )
    out = []
    while True:
        first = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            try:
                _not_csv(name, exc, f"{at}line {first}", reader.line_num)
            except ValueError as error:
                if refuse is None:
                    raise
                refuse(error, (), f"{at}line {first}")
                break  # the reader cannot go on past it
        if not row:
            continue
        where = f"{at}line {first}"
        try:
            out.append(layout.update(row, text=True, where=where))
        except ValueError as exc:
            if refuse is None:
                raise
            refuse(exc, tuple(row), where)
    return out


def _not_csv(name: str, exc: csv.Error, where: str, last: int | None = None) -> None:
    """Raise the ``ValueError`` for what the CSV reader refused at ``where``: a quote left
    open (the reader met the end of the file inside a quoted field) said as such."""
    if "unexpected end of data" in str(exc):
        runs = f" (it runs on to line {last})" if last is not None else ""
        msg = (
            f"input {name!r}, {where}: a quoted field opens here and is never closed{runs}; "
            'close the quote, or write a quote inside a quoted field as two ("")'
        )
    else:
        msg = (
            f"input {name!r}, {where}: not CSV ({exc}); a quote inside a field must be in a "
            'quoted field, doubled ("")'
        )
    raise ValueError(msg) from None


def _hashable(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v, where) for v in value)
    if isinstance(value, dict):
        msg = f"{where}: a nested object {value!r} is not a datum (use an array)"
        raise ValueError(msg)
    return value


def _no_constant(token: str) -> Any:
    msg = f"{token} is not JSON (JSON has no NaN or infinities)"
    raise ValueError(msg)


def read_jsonl(
    stream: IO[str],
    name: str,
    schema: Schema | None = None,
    *,
    time: str = "time",
    diff: str = "diff",
    source: str = "",
    refuse: Refuse | None = None,
) -> list[tuple[Any, Any, int]]:
    """The updates of a JSON-lines file: one object per line (blank lines skipped), every one
    with the fields of the first. With ``refuse``, a line that does not fit is handed to it
    (``refuse(error, line, where)``) and left out."""
    out = []
    layout: TableLayout | None = None
    fields: list[str] = []
    at = f"{source}, " if source else ""
    for number, line in enumerate(stream, 1):
        if number == 1 and line.startswith(_BOM):
            line = line[1:]
        if not line.strip():
            continue
        where = f"{at}line {number}"
        try:
            obj = _object(name, line, where)
            # The time and diff may be left out of any row (0 and 1); the data fields may not.
            data = [k for k in obj if k not in (time, diff)]
            if layout is None:
                layout = TableLayout.of(
                    name, [*data, time, diff], schema, time=time, diff=diff, where=f", {where}"
                )
                fields = data
            elif data != fields and set(data) != set(fields):
                _differ(name, where, obj, data, fields)
            values = [_hashable(obj[k], f"input {name!r}, {where}") for k in fields]
            values += [obj.get(time, 0), obj.get(diff, 1)]
            out.append(layout.update(values, text=False, where=where))
        except ValueError as exc:
            if refuse is None:
                raise
            refuse(exc, line.rstrip("\r\n"), where)
    return out


def _object(name: str, line: str, where: str) -> dict[str, Any]:
    """The JSON object on ``line``, or a ``ValueError`` naming the input and ``where``."""
    try:
        obj = json.loads(line, parse_constant=_no_constant)
    except ValueError as exc:
        msg = f"input {name!r}, {where}: not JSON ({exc})"
        raise ValueError(msg) from None
    if not isinstance(obj, dict):
        msg = f"input {name!r}, {where}: expected a JSON object, got {obj!r}"
        raise ValueError(msg)
    return obj


def _differ(name: str, where: str, obj: dict[str, Any], data: list[str], fields: list[str]) -> None:
    missing = [f for f in fields if f not in obj]
    extra = [f for f in data if f not in fields]
    what = " and ".join(
        ([f"lacks {missing}"] if missing else []) + ([f"has {extra}"] if extra else [])
    )
    msg = (
        f"input {name!r}, {where}: the fields differ from the first row's {fields}: this row {what}"
    )
    raise ValueError(msg)


def read_updates(
    path: str | Path,
    name: str,
    schema: Schema | None = None,
    *,
    time: str = "time",
    diff: str = "diff",
    format: str | None = None,
    refuse: Refuse | None = None,
) -> list[tuple[Any, Any, int]]:
    """The updates in the file at ``path``, for the input ``name`` (format by extension, or
    ``format``: ``"csv"`` or ``"jsonl"``), read by ``schema`` when the input declares one;
    ``time`` and ``diff`` name those columns; ``refuse``: as for :func:`read_csv`.

    Raises:
        ValueError: an extension other than ``.csv`` or ``.jsonl``, bytes that are not UTF-8,
            or a malformed line, naming the file.
    """
    path = Path(path)
    suffix = path.suffix.lower() if format is None else f".{format}"
    if suffix not in FORMATS:
        msg = f"input {name!r}: {str(path)!r} is neither .csv nor .jsonl"
        raise ValueError(msg)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        msg = (
            f"input {name!r}: {str(path)!r} is not UTF-8: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} (line {line}); save the file as UTF-8"
        )
        raise ValueError(msg) from None
    if text.startswith(_BOM):
        text = text[1:]
    reader = read_csv if suffix == ".csv" else read_jsonl
    stream = io.StringIO(text, newline="" if suffix == ".csv" else None)
    return reader(stream, name, schema, time=time, diff=diff, source=str(path), refuse=refuse)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"`` (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _NON_FINITE[repr(value)]
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def write_jsonl(
    stream: IO[str], updates: Iterable[tuple[Any, Any, int]], output: str | None = None
) -> None:
    """Write ``updates`` as JSON lines (with ``"output": output`` unless it is None); data
    JSON cannot hold are written as their ``repr``, non-finite floats as the strings
    ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``: every line is JSON.

    >>> out = io.StringIO()
    >>> write_jsonl(out, [(("k", float("inf")), 0, 1)])
    >>> out.getvalue()
    '{"data": ["k", "Infinity"], "time": 0, "diff": 1}\\n'
    """
    for data, time, diff in updates:
        record: dict[str, Any] = {"data": data, "time": time, "diff": diff}
        if output is not None:
            record["output"] = output
        try:
            line = json.dumps(record, default=repr, allow_nan=False)
        except ValueError:
            line = json.dumps(_finite(record), default=repr, allow_nan=False)
        stream.write(line + "\n")
