"""``df.sinks.postgres``: keep a PostgreSQL table equal to an output, exactly once.

Each time that closes is written in one transaction together with the sink's progress: a
row of the table ``deltaflow_sink_progress`` (created if missing) holding, for the sink's
name, the last time written. A job stopped at any moment (even killed with SIGKILL) and
resumed on its checkpoint recomputes the times from the checkpoint's on, and the sink writes
only those after the time its progress row holds: no time is written twice or lost (see
:mod:`deltaflow.scheduler.sinks`). The sink owns its table: a job starting afresh (no
checkpoint to resume) that finds a progress row empties the table first.

Two modes:

* ``"upsert"`` (needs ``key=``): the table holds the output collection, one row per key.
  For each time, the rows of every key it retracts or inserts are deleted (one batched
  ``DELETE``), then its inserted rows added. The output's data are tuples in the table's
  column order.
* ``"changelog"``: every update appended as a row: the datum's columns, then ``time`` and
  ``diff`` (the table's last two columns).

A time of at most :data:`PIPELINE_ROWS` rows goes to the server in one round trip (its
statements pipelined, the commit the one wait); a larger one is copied in (``COPY``).

    >>> import deltaflow as df
    >>> df.sinks.postgres("postgresql://ann:secret@db/shop", "revenue", key="region")
    PostgresSink(dsn='postgresql://ann@db/shop', table='revenue', key=('region',), mode='upsert')
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from ..options import check_seconds
from .connect import (
    ConnectionLost,
    DatabaseError,
    connect,
    lost,
    psycopg,
    reconnect,
    redact,
    retrying,
    scrub,
)
from .tables import Table, columns

__all__ = ["PROGRESS_TABLE", "PostgresSink", "PostgresSinkWriter", "postgres"]

#: The table holding, per sink, the last time written.
PROGRESS_TABLE = "deltaflow_sink_progress"
#: A time of at most this many rows is written in one round trip (a pipeline of
#: ``INSERT``s); a larger one by ``COPY``.
PIPELINE_ROWS = 1000
_MODES = ("upsert", "changelog")


@attrs.frozen(repr=False)
class PostgresSink:
    """Writes an output to a PostgreSQL table; make one with :func:`postgres`."""

    dsn: str
    table: Table
    key: tuple[str, ...]
    mode: str
    name: str
    #: How long a lost connection is retried (with backoff) before the job fails.
    patience: float = 60.0

    def __repr__(self) -> str:
        return (
            f"PostgresSink(dsn={redact(self.dsn)!r}, table={str(self.table)!r}, "
            f"key={self.key!r}, mode={self.mode!r})"
        )

    async def open(self, output: str) -> PostgresSinkWriter:
        """Connect, check the table, and read the last time written.

        Raises:
            DatabaseError: the server cannot be reached, the table is missing or its columns
                do not fit the mode and key, naming the table.
        """
        return await trio.to_thread.run_sync(self._open, output)

    def _open(self, output: str) -> PostgresSinkWriter:
        what = f"sink table {str(self.table)!r} (output {output!r})"
        conn = connect(self.dsn, what)
        try:
            cols = [name for name, _ in columns(conn, self.table, what)]
            data = cols
            if self.mode == "changelog":
                if cols[-2:] != ["time", "diff"]:
                    msg = (
                        f"{what}: a changelog table ends with columns time and diff, "
                        f"but its columns are {cols}"
                    )
                    raise DatabaseError(msg)
                data = cols[:-2]
            missing = [k for k in self.key if k not in cols]
            if missing:
                msg = f"{what}: key columns {missing} are not among its columns {cols}"
                raise DatabaseError(msg)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} "
                "(sink text PRIMARY KEY, time bigint NOT NULL)"
            )
            row = conn.execute(
                f"SELECT time FROM {PROGRESS_TABLE} WHERE sink = %s", (self.name,)
            ).fetchone()
            conn.commit()
        except BaseException:
            conn.close()
            raise
        written = None if row is None else int(row[0])
        return PostgresSinkWriter(self, what, conn, cols, data, written)


@attrs.define(eq=False)
class PostgresSinkWriter:
    """An open :class:`PostgresSink`: its connection and the last time written."""

    sink: PostgresSink
    what: str
    conn: Any
    columns: list[str]
    data: list[str]
    written: int | None
    #: After a reconnection: whether the write in flight committed is read first.
    recheck: bool = False

    async def write(self, time: int, updates: list[tuple[Any, int]]) -> None:
        """Write ``time``'s updates and the progress row in one transaction. A lost
        connection is retried with backoff; whether the transaction committed before it
        broke is read from the progress row first."""

        async def attempt() -> None:
            await trio.to_thread.run_sync(self._write, time, updates)

        await retrying(attempt, self._reconnect, self.what, self.sink.patience)
        self.written = time

    async def reset(self) -> None:
        """Empty the table and the progress row (one transaction): the job starts afresh,
        and the table held the output of a run it does not continue."""
        await trio.to_thread.run_sync(self._reset)
        self.written = None

    def _reset(self) -> None:
        pg = psycopg()
        try:
            with self.conn.transaction():
                self.conn.execute(pg.sql.SQL("DELETE FROM {}").format(self.sink.table.sql()))
                self.conn.execute(
                    f"DELETE FROM {PROGRESS_TABLE} WHERE sink = %s", (self.sink.name,)
                )
        except pg.Error as exc:
            detail = scrub(str(exc).strip(), self.sink.dsn)
            msg = f"{self.what}: emptying the table failed: {detail}"
            raise DatabaseError(msg) from None

    async def _reconnect(self) -> None:
        self.conn = await trio.to_thread.run_sync(reconnect, self.conn, self.sink.dsn, self.what)
        self.recheck = True

    async def aclose(self) -> None:
        """Close the connection."""
        await trio.to_thread.run_sync(self.conn.close)

    def _row(self, datum: Any) -> tuple[Any, ...]:
        row = datum if isinstance(datum, tuple) else (datum,)
        if len(row) != len(self.data):
            msg = (
                f"{self.what}: the datum {datum!r} has {len(row)} values, but the table "
                f"takes {len(self.data)} ({self.data})"
            )
            raise ValueError(msg)
        return row

    def _write(self, time: int, updates: list[tuple[Any, int]]) -> None:
        pg = psycopg()
        sql = pg.sql
        table = self.sink.table.sql()
        try:
            if self.recheck:
                row = self.conn.execute(
                    f"SELECT time FROM {PROGRESS_TABLE} WHERE sink = %s", (self.sink.name,)
                ).fetchone()
                self.conn.commit()
                self.recheck = False
                if row is not None and int(row[0]) >= time:
                    return  # it committed before the connection broke
            if self.sink.mode == "changelog":
                touched: list[tuple[Any, ...]] = []
                rows = [(*self._row(d), time, r) for d, r in updates]
            else:
                touched, rows = self._upserted(time, updates)
            # A time of few rows goes in one round trip (a pipeline: its statements sent
            # together, the transaction's end the one wait); a large one by COPY.
            small = len(rows) <= PIPELINE_ROWS and pg.Pipeline.is_supported()
            with contextlib.ExitStack() as stack:
                if small:
                    stack.enter_context(self.conn.pipeline())
                stack.enter_context(self.conn.transaction())
                with self.conn.cursor() as cur:
                    if touched:
                        cur.executemany(self._delete(), touched)
                    if small and rows:
                        cur.executemany(self._insert(), rows)
                if not small:
                    self._copy(table, self.columns, rows)
                self.conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (sink, time) VALUES (%s, %s) "
                        "ON CONFLICT (sink) DO UPDATE SET time = EXCLUDED.time"
                    ).format(sql.Identifier(PROGRESS_TABLE)),
                    (self.sink.name, time),
                )
        except pg.Error as exc:
            detail = scrub(str(exc).strip(), self.sink.dsn)
            if lost(self.conn, exc):
                raise ConnectionLost(detail) from None
            msg = f"{self.what}: writing time {time} failed: {detail}"
            raise DatabaseError(msg) from None

    def _upserted(
        self, time: int, updates: list[tuple[Any, int]]
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The keys ``time`` touches (their rows deleted) and the rows it inserts.

        Raises:
            ValueError: a key that would hold several rows.
        """
        index = [self.columns.index(k) for k in self.sink.key]
        touched: dict[tuple[Any, ...], None] = {}
        inserted: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for datum, diff in updates:
            row = self._row(datum)
            key = tuple(row[i] for i in index)
            touched[key] = None
            if diff > 0:
                if diff != 1 or key in inserted:
                    msg = (
                        f"{self.what}: at time {time} the key {dict(zip(self.sink.key, key))} "
                        f"would hold several rows ({datum!r}); an upsert table holds one per key"
                    )
                    raise ValueError(msg)
                inserted[key] = row
        return list(touched), list(inserted.values())

    def _delete(self) -> Any:
        """``DELETE`` of one key's row."""
        sql = psycopg().sql
        where = sql.SQL(" AND ").join(
            sql.SQL("{} IS NOT DISTINCT FROM %s").format(sql.Identifier(k)) for k in self.sink.key
        )
        return sql.SQL("DELETE FROM {} WHERE {}").format(self.sink.table.sql(), where)

    def _insert(self) -> Any:
        """``INSERT`` of one row (every column)."""
        sql = psycopg().sql
        return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self.sink.table.sql(),
            sql.SQL(", ").join(sql.Identifier(c) for c in self.columns),
            sql.SQL(", ").join(sql.Placeholder() for _ in self.columns),
        )

    def _copy(self, table: Any, cols: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        sql = psycopg().sql
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            table, sql.SQL(", ").join(sql.Identifier(c) for c in cols)
        )
        with self.conn.cursor() as cur, cur.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)


def postgres(
    dsn: str,
    table: str,
    key: str | Sequence[str] | None = None,
    *,
    mode: str = "upsert",
    name: str | None = None,
    patience: float = 60.0,
) -> PostgresSink:
    """A sink keeping the existing PostgreSQL table ``table`` (``"name"`` or
    ``"schema.name"``) of the database at ``dsn`` equal to an output (see the module):
    ``mode="upsert"`` by ``key`` (a column or columns), or ``mode="changelog"`` appending
    ``(columns..., time, diff)``. ``name`` identifies the sink's progress row (default: the
    table's name): give two sinks of one table different names only if they write different
    rows. A lost connection (a server restart) is retried with backoff for ``patience``
    seconds.

    Raises:
        ValueError: an unknown mode, an upsert without a key, or a malformed table name.
    """
    if mode not in _MODES:
        msg = f"sinks.postgres: mode must be one of {list(_MODES)}, not {mode!r}"
        raise ValueError(msg)
    keys: tuple[str, ...] = () if key is None else (key,) if isinstance(key, str) else tuple(key)
    if mode == "upsert" and not keys:
        msg = f"sinks.postgres({table!r}): an upsert table needs key= (its key column or columns)"
        raise ValueError(msg)
    check_seconds(patience, "sinks.postgres", "patience", zero=True)
    parsed = Table.parse(table)
    sink_name = str(parsed) if name is None else name
    return PostgresSink(dsn, parsed, keys, mode, sink_name, float(patience))
