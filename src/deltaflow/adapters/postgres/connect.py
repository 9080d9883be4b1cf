"""Connections to PostgreSQL, and DSNs safe to show: every message names the server by a DSN
with its password removed, so that credentials never reach a log or an error.

    >>> redact("postgresql://ann:secret@db:5432/shop")
    'postgresql://ann@db:5432/shop'
    >>> redact("host=db user=ann password=secret dbname=shop")
    'host=db user=ann dbname=shop'
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ...errors import DeltaflowError

__all__ = [
    "ConnectionLost",
    "DatabaseError",
    "connect",
    "lost",
    "psycopg",
    "reconnect",
    "redact",
    "retrying",
    "scrub",
]

logger = logging.getLogger("deltaflow")
T = TypeVar("T")

_URL_PASSWORD = re.compile(r"^(postgres(?:ql)?://[^:@/?#]*):[^@/?#]*@")
_KW_PASSWORD = re.compile(r"\s*\bpassword\s*=\s*(?:'(?:[^'\\]|\\.)*'|\S*)", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&])password=[^&#]*&?", re.IGNORECASE)


class DatabaseError(DeltaflowError):
    """A PostgreSQL source or sink could not do its work: the message names the table and
    the server (never a password)."""


def redact(dsn: str) -> str:
    """``dsn`` without its password (URL or ``key=value`` form)."""
    out = _URL_PASSWORD.sub(r"\1@", dsn)
    out = _QUERY_PASSWORD.sub(r"\1", out).rstrip("?&")
    return _KW_PASSWORD.sub("", out).strip()


def psycopg() -> Any:
    """The psycopg 3 module, or an ImportError saying how to install it."""
    try:
        import psycopg as module
    except ImportError:
        msg = "PostgreSQL sources and sinks need psycopg 3: pip install 'deltaflow[postgres]'"
        raise ImportError(msg) from None
    return module


def scrub(text: str, dsn: str) -> str:
    """``text`` (a server or driver message) with any password of ``dsn`` removed."""
    for secret in _secrets(dsn):
        text = text.replace(secret, "***")
    return text


def _secrets(dsn: str) -> list[str]:
    found = []
    m = re.match(r"^postgres(?:ql)?://[^:@/?#]*:([^@/?#]*)@", dsn)
    if m and m.group(1):
        found.append(m.group(1))
    for m2 in re.finditer(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&#]*)", dsn, re.I):
        value = m2.group(1).strip("'")
        if value:
            found.append(value)
    return found


def connect(dsn: str, what: str, **kwargs: Any) -> Any:
    """A psycopg connection to ``dsn`` for ``what`` (``"table 'orders'"``).

    Raises:
        DatabaseError: the server cannot be reached or refuses the login, naming ``what`` and
            the server by its redacted DSN.
    """
    return _open(dsn, what, "connect", DatabaseError, kwargs)


class ConnectionLost(DatabaseError):
    """The connection to the server broke (a restart, a network failure): the work may be
    retried on a new connection."""


def lost(conn: Any, exc: BaseException) -> bool:
    """Whether ``exc``, raised on ``conn``, is the connection breaking."""
    pg = psycopg()
    return isinstance(exc, pg.OperationalError) and bool(conn.closed or conn.broken)


def reconnect(conn: Any, dsn: str, what: str, **kwargs: Any) -> Any:
    """A new connection replacing the broken ``conn``.

    Raises:
        ConnectionLost: the server cannot be reached yet.
    """
    with contextlib.suppress(Exception):
        conn.close()
    return _open(dsn, what, "reconnect", ConnectionLost, kwargs)


def _open(
    dsn: str, what: str, verb: str, error: type[DatabaseError], kwargs: dict[str, Any]
) -> Any:
    """A psycopg connection to ``dsn``, or ``error`` saying ``what`` cannot ``verb`` to the
    server (by its redacted DSN, the driver's message scrubbed of the DSN)."""
    pg = psycopg()
    try:
        return pg.connect(dsn, **kwargs)
    except pg.OperationalError as exc:
        detail = scrub(str(exc).strip(), dsn)
        msg = f"{what}: cannot {verb} to PostgreSQL at {redact(dsn)!r}: {detail}"
        raise error(msg) from None


async def retrying(
    action: Callable[[], Awaitable[T]],
    again: Callable[[], Awaitable[None]],
    what: str,
    patience: float,
) -> T:
    """``action()``, and while it raises :class:`ConnectionLost`, ``again()`` (reconnect)
    and ``action()`` once more, backing off from 0.1 s to 5 s between attempts: a server
    restart is waited out.

    Raises:
        DatabaseError: the connection stayed lost for ``patience`` seconds.
    """
    delay, waited = 0.1, 0.0
    while True:
        try:
            return await action()
        except ConnectionLost as exc:
            if waited >= patience:
                msg = f"{what}: the server stayed unreachable for {waited:.0f} s: {exc}"
                raise DatabaseError(msg) from None
            logger.warning("%s: connection lost, reconnecting in %.1f s: %s", what, delay, exc)
        await trio.sleep(delay)
        waited += delay
        delay = min(delay * 2, 5.0)
        try:
            await again()
        except ConnectionLost as exc:
            logger.info("%s: %s", what, exc)
