"""Sources a job feeds itself (:mod:`deltaflow.scheduler.sources`): files as they appear in a
directory, and the batches of an in-process iterable.

``files(path_or_glob)`` reads every file that appears under a directory or matches a glob,
like Spark's file source: each read takes the files not seen before (oldest first; at most
``max_files``), reads each whole, and gives their rows as one batch, fed at one time. Its
offset is the list of files consumed. A file is read once, when it is first seen, so write it
elsewhere (or under a name starting with ``.`` or ``_``, which are skipped) and rename it
into place when complete.

Rows are the file's records: the columns other than ``diff``, in order, form the datum (the
declared schema's columns, by name, when the input or the source declares one); a ``diff``
column (default 1) may retract. A ``time`` column is data like any other: the batch's time is
the job's.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.csv").write_text("user,page\\nann,home\\nbob,cart\\n")
    >>> import deltaflow as df
    >>> class Pages(df.Pipeline):
    ...     def build(self, clicks):
    ...         return clicks
    >>> df.run(Pages(), clicks=df.sources.files(folder))
    [(('ann', 'home'), 0, 1), (('bob', 'cart'), 0, 1)]
"""

from __future__ import annotations

import glob
import itertools
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from ..framework.schema import Schema
from ..scheduler.frames import TableLayout
from ..scheduler.sources import Batch
from .files import read_updates
from .options import check_seconds

__all__ = ["FilesReader", "FilesSource", "IterableReader", "IterableSource", "files", "iterable"]

logger = logging.getLogger("deltaflow")

# A column name no file has: a source's rows are records, their time the batch's.
_NO_TIME = "\x00time"

_FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_NAMES = {"csv": "csv", "json": "jsonl", "jsonl": "jsonl", "parquet": "parquet"}


def _schema(schema: object) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    return Schema.parse(schema)


@attrs.frozen
class FilesSource:
    """Files appearing under a directory or matching a glob; make one with :func:`files`."""

    path: str
    format: str | None = None
    schema: Schema | None = None
    poll: float = 1.0
    max_files: int | None = None

    @property
    def pattern(self) -> str:
        """The glob listed: the directory's files, or the glob itself."""
        return os.path.join(self.path, "*") if os.path.isdir(self.path) else self.path

    async def open(self, input: str, schema: Schema | None, offset: Any) -> FilesReader:
        """A reader skipping the files in ``offset`` (the list a batch gave)."""
        if offset is not None and (
            not isinstance(offset, list) or not all(isinstance(p, str) for p in offset)
        ):
            msg = f"input {input!r}: the offset {offset!r} is not a list of files consumed"
            raise ValueError(msg)
        consumed = list(offset or [])
        return FilesReader(self, input, self.schema or schema, consumed, set(consumed))


@attrs.define(eq=False)
class FilesReader:
    """Reads the files of a :class:`FilesSource` not consumed yet."""

    source: FilesSource
    input: str
    schema: Schema | None
    consumed: list[str]
    seen: set[str]

    async def read(self, wait: bool) -> Batch | None:
        """The files that appeared since the last batch, read whole, as one batch."""
        while True:
            batch = await trio.to_thread.run_sync(self._next)
            if batch is not None or not wait:
                return batch
            await trio.sleep(self.source.poll)

    def acknowledge(self, offset: Any) -> None:
        """Nothing to release: the files stay where they are."""

    async def aclose(self) -> None:
        """Nothing held between reads."""

    def _new(self) -> list[str]:
        """The files not consumed yet, oldest first (by modification time, then name)."""
        found = []
        for path in glob.glob(self.source.pattern):
            base = os.path.basename(path)
            if path in self.seen or base.startswith((".", "_")):
                continue
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue  # gone since listed: it was never there for this job
            if os.path.isfile(path):
                found.append((stat.st_mtime_ns, path))
        found.sort()
        return [p for _, p in found]

    def _next(self) -> Batch | None:
        new = self._new()
        if self.source.max_files is not None:
            new = new[: self.source.max_files]
        if not new:
            return None
        data: list[Any] = []
        diffs: list[Any] = []
        for path in new:
            for d, _, r in self._read(path):
                data.append(d)
                diffs.append(r)
        self.consumed.extend(new)
        self.seen.update(new)
        return Batch(data, diffs, offset=list(self.consumed))

    def _read(self, path: str) -> list[tuple[Any, Any, Any]]:
        """The updates of one file, by its format."""
        fmt = self.source.format or _FORMATS.get(Path(path).suffix.lower())
        if fmt is None:
            msg = (
                f"input {self.input!r}: {path!r}: the format is not known from its extension; "
                f"give files(..., format=) one of {sorted(_NAMES)}"
            )
            raise ValueError(msg)
        if fmt != "parquet":
            return read_updates(path, self.input, self.schema, time=_NO_TIME, format=fmt)
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:
            msg = f"input {self.input!r}: {path!r} is not a readable Parquet file: {exc}"
            raise ValueError(msg) from None
        layout = TableLayout.of(
            self.input, table.column_names, self.schema, time=_NO_TIME, where=f", {path}"
        )
        rows = zip(*(column.to_pylist() for column in table.columns))
        return [
            layout.update(row, text=False, where=f"{path}, row {i}") for i, row in enumerate(rows)
        ]


def files(
    path: str | os.PathLike[str],
    format: str | None = None,
    schema: str | Schema | None = None,
    *,
    poll: float = 1.0,
    max_files: int | None = None,
) -> FilesSource:
    """A source of the files appearing under the directory ``path`` or matching the glob
    ``path`` (see the module): CSV, JSON lines or Parquet, by extension or ``format``
    (``"csv"``, ``"jsonl"``, ``"parquet"``), read by ``schema`` (a DDL string; default: the
    input's declared schema). Following, it looks for new files every ``poll`` seconds; each
    batch takes at most ``max_files`` files (``None``: all the new ones).

    Raises:
        ValueError: an unknown format, a malformed schema, or a bad ``poll`` / ``max_files``.
    """
    if format is not None and format not in _NAMES:
        msg = f"files: format must be one of {sorted(_NAMES)} or None, not {format!r}"
        raise ValueError(msg)
    check_seconds(poll, "files", "poll")
    if max_files is not None and (max_files.__class__ is not int or max_files < 1):
        msg = f"files: max_files must be a positive int or None, not {max_files!r}"
        raise ValueError(msg)
    return FilesSource(
        os.fspath(path),
        None if format is None else _NAMES[format],
        _schema(schema),
        float(poll),
        max_files,
    )


@attrs.frozen
class IterableSource:
    """The batches of an iterable, in order; make one with :func:`iterable`."""

    batches: Iterable[Iterable[Any]]
    updates: bool = False

    async def open(self, input: str, schema: Schema | None, offset: Any) -> IterableReader:
        """A reader past the first ``offset`` batches (``None``: none)."""
        skip = 0 if offset is None else offset
        if skip.__class__ is not int or skip < 0:
            msg = f"input {input!r}: the offset {offset!r} is not a number of batches"
            raise ValueError(msg)
        it = iter(self.batches)
        for _ in itertools.islice(it, skip):
            pass
        return IterableReader(self, input, it, skip)


@attrs.define(eq=False)
class IterableReader:
    """Reads the batches of an :class:`IterableSource`."""

    source: IterableSource
    input: str
    batches: Iterator[Iterable[Any]]
    taken: int

    async def read(self, wait: bool) -> Batch | None:
        """The next batch (``None``: the iterable is exhausted)."""
        for items in self.batches:
            self.taken += 1
            if not self.source.updates:
                data = list(items)
                return Batch(data, [1] * len(data), offset=self.taken)
            pairs = list(items)
            for pair in pairs:
                if not isinstance(pair, tuple) or len(pair) != 2:
                    msg = f"input {self.input!r}: {pair!r} is not a (datum, diff) pair"
                    raise ValueError(msg)
            return Batch([p[0] for p in pairs], [p[1] for p in pairs], offset=self.taken)
        return None

    def acknowledge(self, offset: Any) -> None:
        """Nothing to release."""

    async def aclose(self) -> None:
        """Nothing held."""


def iterable(batches: Iterable[Iterable[Any]], *, updates: bool = False) -> IterableSource:
    """A source of the batches of ``batches``, in order: each an iterable of data (inserted),
    or of ``(datum, diff)`` pairs with ``updates``. It ends with the iterable. Its offset is
    how many batches were fed: a resumed job skips that many, so give a re-iterable (a list)
    for it to resume exactly.

    >>> import deltaflow as df
    >>> class Same(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs
    >>> df.run(Same(), xs=df.sources.iterable([[("a", 1)], [("a", -1), ("b", 2)]], updates=True))
    [('a', 0, 1), ('a', 1, -1), ('b', 1, 2)]
    """
    return IterableSource(batches, updates)
