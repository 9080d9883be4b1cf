"""``df.sources.postgres``: a table's rows, then its changes, through logical replication.

Opened afresh, the source creates its replication slot (``test_decoding``) on a replication
connection, which exports the snapshot the slot starts at; it reads the whole table in that
snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``) as its first batch. Every
change after the snapshot is then in the slot, and none before it: nothing missed, nothing
twice. Then each committed transaction that touched the table is one batch (one time of the
job): inserts ``+1``, deletes ``-1``, updates a retraction of the old row and an insertion of
the new one. Rows are tuples in the table's column order.

The changes are read with ``pg_logical_slot_peek_changes`` over an ordinary connection, which
leaves the slot where it is; the offset after a batch is the LSN of its transaction's commit,
and the slot is moved past it (``pg_replication_slot_advance``) only when the job
acknowledges it, that is once a checkpoint holding it is durable. The server keeps every
change after the slot's position, so a job killed at any moment and resumed on its
checkpoint reads exactly the transactions after the checkpoint's offset.

**Several tables, consistent times.** One source may read several tables of a database
through its one slot (``postgres(dsn, ["orders", "customers"], slot=...)``), each feeding
an input: the job opens it once for all of them (:class:`~deltaflow.sources.MultiSource`).
The first batch holds every table's rows read in the one exported snapshot, and each later
batch one transaction's changes to any of them, a part per input: a transaction touching
two tables is one time in both inputs, so a join of them never sees half a transaction.

The table must have ``REPLICA IDENTITY FULL`` (``ALTER TABLE t REPLICA IDENTITY FULL``) so
that deletes and updates carry the whole old row, and the server ``wal_level = logical``.

    >>> import deltaflow as df
    >>> df.sources.postgres("postgresql://ann:secret@db/shop", "orders", slot="orders_job")
    PostgresSource(dsn='postgresql://ann@db/shop', table='orders', slot='orders_job')
"""

from __future__ import annotations

import functools
import logging
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from ...framework.schema import Schema
from ...scheduler.sources import Batch
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
from .decoding import convert, parse_change
from .tables import Table, columns

__all__ = ["PostgresReader", "PostgresSource", "postgres"]

logger = logging.getLogger("deltaflow")

_SLOT = re.compile(r"^[a-z0-9_]{1,63}$")


def lsn_value(lsn: str) -> int:
    """An LSN (``"16/B374D848"``) as a number, for ordering."""
    high, low = lsn.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@attrs.frozen
class Watched:
    """One table a reader follows: the input it feeds, its columns, and its name as
    ``test_decoding`` writes it (``public.orders``)."""

    input: str
    table: Table
    what: str
    columns: list[tuple[str, str]]
    decoded: str

    @property
    def prefix(self) -> str:
        """How the change lines of this table start."""
        return f"table {self.decoded}: "

    def row(self, values: dict[str, str | None]) -> tuple[Any, ...]:
        """A change's column values as a row of the table.

        Raises:
            DatabaseError: a column the table did not have when the source opened.
        """
        unknown = [n for n in values if all(n != c for c, _ in self.columns)]
        if unknown:
            names = [n for n, _ in self.columns]
            msg = (
                f"{self.what}: a change has columns {unknown} the table did not have when "
                f"the source opened ({names}): its schema changed"
            )
            raise DatabaseError(msg)
        return tuple(convert(t, values.get(n)) for n, t in self.columns)


@attrs.frozen(repr=False)
class PostgresSource:
    """The rows and changes of PostgreSQL tables; make one with :func:`postgres`.

    ``tables`` pairs each table with the input it feeds: ``None`` for a source of one table
    (it feeds whichever input it is given for)."""

    dsn: str
    tables: tuple[tuple[str | None, Table], ...]
    slot: str
    schema: Schema | None = None
    poll: float = 0.2
    #: How long a lost connection is retried (with backoff) before the job fails.
    patience: float = 60.0
    #: Drop the slot when the reader closes (a one-off read: nothing resumes from it).
    temporary: bool = False

    @property
    def table(self) -> Table:
        """The (first) table read."""
        return self.tables[0][1]

    def __repr__(self) -> str:
        if len(self.tables) == 1 and self.tables[0][0] is None:
            read = f"table={str(self.table)!r}"
        else:
            read = f"tables={ {name: str(t) for name, t in self.tables}!r}"
        return f"PostgresSource(dsn={redact(self.dsn)!r}, {read}, slot={self.slot!r})"

    def table_of(self, input: str) -> Table:
        """The table read for the input ``input``.

        Raises:
            ValueError: a source of several tables given for an input it has no table for.
        """
        for name, table in self.tables:
            if name is None or name == input:
                return table
        names = [name for name, _ in self.tables]
        msg = (
            f"input {input!r}: this PostgreSQL source reads tables for the inputs {names}, "
            f"none for {input!r}"
        )
        raise ValueError(msg)

    async def open(self, input: str, schema: Schema | None, offset: Any) -> PostgresReader:
        """A reader after ``offset`` (``{"lsn": ...}``; ``None``: a new slot and snapshot).

        Raises:
            DatabaseError: the server cannot be reached, the table is missing, not
                ``REPLICA IDENTITY FULL`` or not of the declared columns, or the slot a
                checkpoint continues from was dropped, naming the table.
        """
        return await self._open_reader({input: schema}, offset, several=False)

    async def open_inputs(self, inputs: Mapping[str, Schema | None], offset: Any) -> PostgresReader:
        """One reader for the tables of the inputs ``inputs``, through the one slot: each
        transaction is one batch, its changes in a part per input (``Batch.parts``), and the
        first batch the rows of every table in one snapshot.

        Raises:
            DatabaseError: as :meth:`open`, naming the table.
            ValueError: an input this source reads no table for.
        """
        return await self._open_reader(inputs, offset, several=True)

    async def _open_reader(
        self, inputs: Mapping[str, Schema | None], offset: Any, *, several: bool
    ) -> PostgresReader:
        names = list(inputs)
        if offset is not None and (not isinstance(offset, dict) or "lsn" not in offset):
            msg = f"inputs {names}: the offset {offset!r} is not a PostgreSQL position"
            raise ValueError(msg)
        tables = [(name, self.table_of(name), inputs[name]) for name in names]
        return await trio.to_thread.run_sync(self._open, tables, offset, several)

    def _open(
        self, tables: list[tuple[str, Table, Schema | None]], offset: Any, several: bool
    ) -> PostgresReader:
        whats = [f"input {input!r} (table {str(table)!r})" for input, table, _ in tables]
        conn = connect(self.dsn, ", ".join(whats), autocommit=True)
        try:
            watched = [
                self._watch(conn, input, table, self.schema or schema, what)
                for (input, table, schema), what in zip(tables, whats)
            ]
            reader = PostgresReader(self, ", ".join(whats), conn, watched, several)
            if offset is None:
                reader.start()
            else:
                reader.resume(str(offset["lsn"]))
        except BaseException:
            conn.close()
            raise
        return reader

    def _watch(
        self, conn: Any, input: str, table: Table, schema: Schema | None, what: str
    ) -> Watched:
        """``table`` checked: there, of the declared columns, ``REPLICA IDENTITY FULL``."""
        cols = columns(conn, table, what)
        names = [n for n, _ in cols]
        if schema is not None and list(schema.names) != names:
            msg = f"{what}: the declared columns {list(schema.names)} are not the table's {names}"
            raise DatabaseError(msg)
        ident = conn.execute(
            "SELECT c.relreplident, quote_ident(n.nspname) || '.' || quote_ident(c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass(%s)",
            (table.sql().as_string(conn),),
        ).fetchone()
        if ident[0] != "f":
            msg = (
                f"{what}: the table needs REPLICA IDENTITY FULL for its deletes and updates "
                f"to carry the old rows (ALTER TABLE {table} REPLICA IDENTITY FULL)"
            )
            raise DatabaseError(msg)
        return Watched(input, table, what, cols, str(ident[1]))


@attrs.define(eq=False)
class PostgresReader:
    """An open :class:`PostgresSource`: its connection, position and unread transactions."""

    source: PostgresSource
    what: str
    conn: Any
    watched: list[Watched]
    #: Batches with a part per input (``open_inputs``), or plain (``open``: one table).
    several: bool
    lsn: str = "0/0"
    acknowledged: str | None = None
    acked: str | None = None
    ready: deque[Batch] = attrs.field(factory=deque)

    def start(self) -> None:
        """A new slot (replacing one of the same name) and the tables' rows in its snapshot
        as the first batch."""
        pg = psycopg()
        slot = self.source.slot
        self.conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s AND database = current_database()",
            (slot,),
        )
        repl = connect(self.source.dsn, self.what, autocommit=True, replication="database")
        try:
            result = repl.pgconn.exec_(
                f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL test_decoding EXPORT_SNAPSHOT'.encode()
            )
            if result.status != pg.pq.ExecStatus.TUPLES_OK:
                detail = (result.error_message or b"").decode(errors="replace").strip()
                msg = f"{self.what}: cannot create the replication slot {slot!r}: {detail}"
                raise DatabaseError(scrub(msg, self.source.dsn))
            consistent = result.get_value(0, 1).decode()
            snapshot = result.get_value(0, 2).decode()
            sql = pg.sql
            # Every table read in the one snapshot the slot starts at: a transaction is in
            # all the snapshots or in the changes of all.
            with self.conn.transaction():
                self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                self.conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
                rows = []
                for w in self.watched:
                    select = sql.SQL("SELECT {} FROM {}").format(
                        sql.SQL(", ").join(
                            sql.SQL("{}::text").format(sql.Identifier(n)) for n, _ in w.columns
                        ),
                        w.table.sql(),
                    )
                    rows.append(self.conn.execute(select).fetchall())
        finally:
            repl.close()
        self.lsn = consistent
        parts: dict[str, tuple[list[Any], list[int]]] = {}
        for w, found in zip(self.watched, rows):
            types = [t for _, t in w.columns]
            data = [tuple(convert(t, v) for t, v in zip(types, row)) for row in found]
            parts[w.input] = (data, [1] * len(data))
        self.ready.append(self._batch(parts, {"lsn": consistent}))

    def _batch(self, parts: dict[str, tuple[list[Any], list[int]]], offset: Any) -> Batch:
        if self.several:
            return Batch.of_inputs(parts, offset)
        ((data, diffs),) = parts.values()
        return Batch(data, diffs, offset=offset)

    def resume(self, lsn: str) -> None:
        """Continue after ``lsn`` (a durable checkpoint's): the slot must still be there."""
        found = self.conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s "
            "AND database = current_database()",
            (self.source.slot,),
        ).fetchone()
        if found is None:
            msg = (
                f"{self.what}: the replication slot {self.source.slot!r} the checkpoint "
                "continues from was dropped, and the changes it held are gone; start the "
                "job afresh (a new checkpoint location) to read the table again"
            )
            raise DatabaseError(msg)
        self.lsn = lsn
        self.acknowledge({"lsn": lsn})

    async def read(self, wait: bool) -> Batch | None:
        """The next committed transaction that touched the table."""
        while True:
            if not self.ready:
                await retrying(self._fetch_async, self._reconnect, self.what, self.source.patience)
            if self.ready:
                batch = self.ready.popleft()
                self.lsn = batch.offset["lsn"]
                return batch
            if not wait:
                return None
            await trio.sleep(self.source.poll)

    def acknowledge(self, offset: Any) -> None:
        """The slot may move past ``offset``: done at the next read."""
        self.acknowledged = str(offset["lsn"])

    async def aclose(self) -> None:
        """Close the connection. The slot stays, for a resumed job, unless the source is
        ``temporary``."""
        await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        pg = psycopg()
        try:
            if self.acknowledged != self.acked and not self.conn.closed:
                # Acknowledged since the last read: the slot moves now, not at the next
                # job's first read (a job without a checkpoint acknowledges its last batch
                # just before it closes the reader).
                try:
                    self._advance()
                except pg.Error as exc:
                    logger.warning(
                        "%s: the slot could not be moved: %s",
                        self.what,
                        scrub(str(exc).strip(), self.source.dsn),
                    )
            if self.source.temporary and not self.conn.closed:
                self.conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s AND database = current_database()",
                    (self.source.slot,),
                )
        finally:
            self.conn.close()

    async def _fetch_async(self) -> None:
        await trio.to_thread.run_sync(self._fetch)

    async def _reconnect(self) -> None:
        """A new connection after the server went away: the slot is where it was, so the
        next peek reads the same transactions again (those fed already are skipped)."""
        self.conn = await trio.to_thread.run_sync(
            functools.partial(reconnect, self.conn, self.source.dsn, self.what, autocommit=True)
        )
        self.acked = None
        logger.info("%s: reconnected", self.what)

    def _advance(self) -> None:
        """Move the slot to the last acknowledged position (if it is not there yet)."""
        # Read once: this runs in a thread while the job may acknowledge a later position.
        target = self.acknowledged
        if target is not None and target != self.acked:
            self.conn.execute(
                "SELECT pg_replication_slot_advance(slot_name, %s::pg_lsn) "
                "FROM pg_replication_slots WHERE slot_name = %s "
                "AND confirmed_flush_lsn < %s::pg_lsn",
                (target, self.source.slot, target),
            )
            self.acked = target

    def _fetch(self) -> None:
        """Advance the slot to the last acknowledged position, then peek at what follows."""
        pg = psycopg()
        slot = self.source.slot
        try:
            self._advance()
            rows = self.conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_peek_changes(%s, NULL, NULL, "
                "'include-xids', '0', 'skip-empty-xacts', '1')",
                (slot,),
            ).fetchall()
        except pg.Error as exc:
            detail = scrub(str(exc).strip(), self.source.dsn)
            if lost(self.conn, exc):
                raise ConnectionLost(detail) from None
            if "does not exist" in detail and "slot" in detail:
                msg = (
                    f"{self.what}: the replication slot {slot!r} was dropped while the job "
                    "ran; the changes it held are gone"
                )
            else:
                msg = f"{self.what}: reading the changes failed: {detail}"
            raise DatabaseError(msg) from None
        self._collect(rows)

    def _collect(self, rows: list[tuple[str, str]]) -> None:
        """The transactions committed after the position that touched a table read, one
        batch each."""
        after = lsn_value(self.lsn)
        watched = self.watched
        prefixes = [(w.prefix, w) for w in watched]
        parts: dict[str, tuple[list[Any], list[int]]] = {}
        for lsn, line in rows:
            if line.startswith("BEGIN"):
                parts = {}
            elif line.startswith("COMMIT"):
                if parts and lsn_value(lsn) > after:
                    self.ready.append(self._batch(parts, {"lsn": lsn}))
            else:
                for prefix, w in prefixes:
                    if line.startswith(prefix):
                        self._change(w, line, parts)
                        break

    def _change(self, w: Watched, line: str, parts: dict[str, tuple[list[Any], list[int]]]) -> None:
        """One change line of the table ``w`` into its input's part."""
        _, action, new, old = parse_change(line)
        if action == "TRUNCATE":
            msg = f"{w.what}: the table was truncated; a source reads no TRUNCATE"
            raise DatabaseError(msg)
        part = parts.get(w.input)
        if part is None:
            part = parts[w.input] = ([], [])
        for values, diff in ((old, -1), (new, 1)):
            if values is not None:
                part[0].append(w.row(values))
                part[1].append(diff)


def postgres(
    dsn: str,
    table: str | Sequence[str] | Mapping[str, str],
    *,
    slot: str,
    schema: str | Schema | None = None,
    poll: float = 0.2,
    patience: float = 60.0,
    temporary: bool = False,
) -> PostgresSource:
    """A source of the PostgreSQL table ``table`` (``"name"`` or ``"schema.name"``) of the
    database at ``dsn``: its rows, then each committed transaction's changes (see the
    module), through the replication slot ``slot`` (created by the source; one per source
    and job). ``schema``: the columns expected (a DDL string; default the input's declared
    schema), checked against the table's. Following, it looks for changes every ``poll``
    seconds.

    Several tables of the database, through one slot, with consistent times: ``table`` a
    list of names (each feeding the input of the table's name) or a mapping from input
    names to tables; give the source under each of those inputs' names (``sources={"orders":
    shop, "customers": shop}``): a transaction touching several tables is one time in all
    their inputs, and their first time holds every table's rows in one snapshot.

    >>> shop = postgres("postgresql://db/shop", ["orders", "crm.customers"], slot="shop")
    >>> shop
    PostgresSource(dsn='postgresql://db/shop', tables={'orders': 'orders', 'customers': \
'crm.customers'}, slot='shop')

    Raises:
        ValueError: a malformed table or slot name, schema or ``poll``; several tables
            feeding one input, or ``schema=`` with several tables.
    """
    named: object = slot
    if not isinstance(named, str) or not _SLOT.match(named):
        msg = f"sources.postgres: slot must be 1-63 of a-z, 0-9 and _, not {slot!r}"
        raise ValueError(msg)
    check_seconds(poll, "sources.postgres", "poll")
    parsed = None if schema is None or isinstance(schema, Schema) else Schema.parse(schema)
    check_seconds(patience, "sources.postgres", "patience", zero=True)
    tables = _tables(table)
    if parsed is not None and len(tables) > 1:
        msg = (
            "sources.postgres: schema= declares one table's columns; with several tables "
            "declare each input's schema on the pipeline (Pipeline.schemas)"
        )
        raise ValueError(msg)
    return PostgresSource(dsn, tables, slot, parsed, float(poll), float(patience), bool(temporary))


def _tables(table: object) -> tuple[tuple[str | None, Table], ...]:
    """``postgres``'s ``table`` as ``(input, table)`` pairs (input ``None``: the one table)."""
    if isinstance(table, str):
        return ((None, Table.parse(table)),)
    if isinstance(table, Mapping):
        pairs = [(str(k), Table.parse(v)) for k, v in table.items()]
    elif isinstance(table, (list, tuple)):
        parsed = [Table.parse(t) for t in table]
        pairs = [(t.name, t) for t in parsed]
    else:
        msg = (
            f"sources.postgres: table must be a name, a list of names or a mapping from "
            f"input names to tables, not {table!r}"
        )
        raise ValueError(msg)
    inputs = [name for name, _ in pairs]
    if not pairs or len(set(inputs)) != len(inputs):
        msg = f"sources.postgres: the tables {table!r} must feed distinct inputs, at least one"
        raise ValueError(msg)
    return tuple(pairs)


def from_url(url: str) -> tuple[str, str]:
    """``(dsn, table)`` of a URL naming a table: the database's URL with the table as its
    last path segment.

    >>> from_url("postgresql://ann@db:5432/shop/orders?sslmode=require")
    ('postgresql://ann@db:5432/shop?sslmode=require', 'orders')

    Raises:
        ValueError: no database and table in the path.
    """
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if len(segments) != 2 or not all(segments):
        msg = f"{redact(url)!r}: a table is given as postgresql://[user@]host[:port]/database/table"
        raise ValueError(msg)
    dsn = urllib.parse.urlunsplit(parts._replace(path="/" + segments[0]))
    return dsn, urllib.parse.unquote(segments[1])
