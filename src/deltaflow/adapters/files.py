"""Files of updates: CSV and JSON lines in, JSON lines out (what the command line reads and
writes).

A file's format follows its extension. In either, the fields other than ``time`` and ``diff``,
in order, form the datum (one field: its value; several: a tuple); ``time`` and ``diff``
default to 0 and 1 (:mod:`deltaflow.scheduler.frames`).

* ``.jsonl``: one JSON object per line; JSON arrays become tuples (nested ones too).
* ``.csv``: a header row names the columns; a cell is an ``int`` if it parses as one, else a
  ``float`` if it parses as one, else the string.

Output updates are written one per line as ``{"data": ..., "time": t, "diff": d}``, with
``"output": name`` added for a pipeline with several outputs; tuples become arrays.

    >>> import io
    >>> read_csv(io.StringIO("src,dst,time\\n1,2,0\\n2,x,1.5\\n"), "edges")
    [((1, 2), 0, 1), ((2, 'x'), 1.5, 1)]
    >>> read_jsonl(io.StringIO('{"word": "cat", "tags": [1, 2], "diff": -1}\\n'), "words")
    [(('cat', (1, 2)), 0, -1)]
    >>> out = io.StringIO()
    >>> write_jsonl(out, [(("cat", 3), 0, 1)])
    >>> out.getvalue()
    '{"data": ["cat", 3], "time": 0, "diff": 1}\\n'
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from ..scheduler.frames import updates_from_rows

__all__ = ["FORMATS", "read_csv", "read_jsonl", "read_updates", "write_jsonl"]

FORMATS = (".csv", ".jsonl")
"""The file extensions :func:`read_updates` reads."""


def _cell(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_csv(stream: IO[str], name: str) -> list[tuple[Any, Any, int]]:
    """The updates of a CSV file with a header row (cells typed as the module says)."""
    reader = csv.reader(stream)
    header = next(reader, None)
    if header is None:
        return []
    rows = ([_cell(c) for c in row] for row in reader if row)
    return updates_from_rows(name, header, rows)


def _hashable(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v, where) for v in value)
    if isinstance(value, dict):
        msg = f"{where}: a nested object {value!r} is not a datum (use an array)"
        raise ValueError(msg)
    return value


def read_jsonl(stream: IO[str], name: str) -> list[tuple[Any, Any, int]]:
    """The updates of a JSON-lines file: one object per line (blank lines skipped)."""
    out = []
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        where = f"input {name!r}, line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{where}: not JSON ({exc})"
            raise ValueError(msg) from None
        if not isinstance(obj, dict):
            msg = f"{where}: expected a JSON object, got {obj!r}"
            raise ValueError(msg)
        values = [v if k in ("time", "diff") else _hashable(v, where) for k, v in obj.items()]
        out.extend(updates_from_rows(name, list(obj), [values]))
    return out


def read_updates(path: str | Path, name: str) -> list[tuple[Any, Any, int]]:
    """The updates in the file at ``path``, for the input ``name`` (format by extension).

    Raises:
        ValueError: an extension other than ``.csv`` or ``.jsonl``, or a malformed line.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        msg = f"input {name!r}: {str(path)!r} is neither .csv nor .jsonl"
        raise ValueError(msg)
    with path.open(newline="" if suffix == ".csv" else None, encoding="utf-8") as stream:
        return read_csv(stream, name) if suffix == ".csv" else read_jsonl(stream, name)


def write_jsonl(
    stream: IO[str], updates: Iterable[tuple[Any, Any, int]], output: str | None = None
) -> None:
    """Write ``updates`` as JSON lines (with ``"output": output`` unless it is None); data
    JSON cannot hold are written as their ``repr``."""
    for data, time, diff in updates:
        record: dict[str, Any] = {"data": data, "time": time, "diff": diff}
        if output is not None:
            record["output"] = output
        stream.write(json.dumps(record, default=repr) + "\n")
