"""``df.sources``: inputs a job feeds itself, resuming from offsets kept in its checkpoints.

* :func:`files` — files as they appear in a directory or match a glob (CSV, JSON lines,
  Parquet), like Spark's file source.
* :func:`iterable` — the batches of an in-process iterable.
* :func:`postgres` — a PostgreSQL table's rows, then its changes (logical replication).
* :class:`Source`, :class:`SourceReader`, :class:`Batch` — the protocol another source (a
  database's change stream, a Kafka topic) implements, and :class:`MultiSource` for one
  that feeds several inputs from one stream; see :mod:`deltaflow.scheduler.sources`.

    >>> import deltaflow as df
    >>> class Same(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs
    >>> df.run(Same(), xs=df.sources.iterable([["a"], ["b"]]))
    [('a', 0, 1), ('b', 1, 1)]
"""

from __future__ import annotations

from .adapters.postgres.source import PostgresSource as PostgresSource, postgres as postgres
from .adapters.sources import (
    FilesSource as FilesSource,
    IterableSource as IterableSource,
    files as files,
    iterable as iterable,
)
from .scheduler.sources import (
    Batch as Batch,
    MultiSource as MultiSource,
    Source as Source,
    SourceReader as SourceReader,
)

__all__ = [
    "Batch",
    "FilesSource",
    "IterableSource",
    "MultiSource",
    "PostgresSource",
    "Source",
    "SourceReader",
    "files",
    "iterable",
    "postgres",
]
