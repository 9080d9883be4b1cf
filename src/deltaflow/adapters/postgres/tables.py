"""What a PostgreSQL table looks like: its name quoted for SQL, and its columns in order.

>>> Table.parse("shop.orders").sql().as_string(None)
'"shop"."orders"'
"""

from __future__ import annotations

from typing import Any

import attrs

from .connect import DatabaseError, psycopg

__all__ = ["Table", "columns"]


@attrs.frozen
class Table:
    """A table named ``name``, optionally in ``schema``, as given by the user."""

    schema: str | None
    name: str

    @classmethod
    def parse(cls, text: str) -> Table:
        """``"orders"`` or ``"shop.orders"`` (names as stored: lower case unless created
        quoted).

        Raises:
            ValueError: an empty name or more than two parts.
        """
        raw: object = text
        if not isinstance(raw, str) or not text or text.count(".") > 1:
            msg = f"a table is named 'name' or 'schema.name', not {text!r}"
            raise ValueError(msg)
        if "." in text:
            schema, name = text.split(".")
            return cls(schema, name)
        return cls(None, text)

    def __str__(self) -> str:
        return self.name if self.schema is None else f"{self.schema}.{self.name}"

    def sql(self) -> Any:
        """The quoted identifier."""
        sql = psycopg().sql
        if self.schema is None:
            return sql.Identifier(self.name)
        return sql.Identifier(self.schema, self.name)


def columns(conn: Any, table: Table, what: str) -> list[tuple[str, str]]:
    """``(name, type)`` of each column of ``table``, in order, read on ``conn``.

    Raises:
        DatabaseError: there is no such table, naming it.
    """
    oid = conn.execute("SELECT to_regclass(%s)::oid", (table.sql().as_string(conn),)).fetchone()
    if oid is None or oid[0] is None:
        msg = f"{what}: there is no table {str(table)!r} in this database"
        raise DatabaseError(msg)
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (oid[0],),
    ).fetchall()
    return [(str(n), str(t)) for n, t in rows]
