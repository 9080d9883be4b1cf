"""The dashboard's HTTP server: h11's HTTP/1.1 state machine over trio sockets, in the job's
own trio loop.

It serves four things, to ``GET`` (and ``HEAD``) only: the page (``/``), its script and style
(``/dashboard.js``, ``/dashboard.css``), the laid-out graph (``/api/graph``) and the live
state (``/api/stats``), both JSON (see :mod:`.views`). Anything else is a 404; another method
a 405.

Who may read it. On a loopback address (the default, ``127.0.0.1``) anyone on the machine
may, as with any local service, but only through a loopback ``Host`` (a web page elsewhere
cannot read it through a name it rebinds to ``127.0.0.1``). Bound to any other address it
requires a token (``secrets.token_urlsafe``) as the ``token`` query parameter of every
request, the JSON endpoints included, compared in constant time; the URL given to the user
(``job.dashboard_url``) carries it. The token is never logged.

A stranger or a slow client never stalls the job: each connection gets
:attr:`Dashboard.TIMEOUT_S` for its whole exchange (request and response, one per
connection), a request head larger than :attr:`Dashboard.MAX_REQUEST_BYTES` is refused, and
beyond :attr:`Dashboard.MAX_CONNECTIONS` open connections a new one is closed at once. Every
error of a connection ends that connection only.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import secrets
import socket
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import attrs
import h11
import trio

from .views import LiveView, graph_view

if TYPE_CHECKING:
    from ..runtime import Job

__all__ = ["Dashboard", "check_dashboard"]

logger = logging.getLogger("deltaflow.dashboard")

LOOPBACK = "127.0.0.1"

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}

_HEADERS = [
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
]


def check_dashboard(dashboard: object) -> tuple[str, int] | None:
    """``dashboard=`` as ``(host, port)``: a port alone binds to loopback; ``None``: none.

    >>> check_dashboard(8050), check_dashboard(("0.0.0.0", 0)), check_dashboard(None)
    (('127.0.0.1', 8050), ('0.0.0.0', 0), None)

    Raises:
        ValueError: not a port (an int from 0 to 65535; 0 picks a free one) or a
            ``(host, port)`` pair.
    """
    if dashboard is None:
        return None
    host: object = LOOPBACK
    port = dashboard
    if isinstance(dashboard, tuple) and len(dashboard) == 2:
        host, port = dashboard
    if (
        not isinstance(host, str)
        or not host
        or isinstance(port, bool)
        or not isinstance(port, int)
        or not 0 <= port <= 65535
    ):
        msg = (
            f"dashboard must be a port (an int from 0 to 65535; 0 picks a free one) or a "
            f"(host, port) pair, not {dashboard!r}"
        )
        raise ValueError(msg)
    return host, port


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()  # reachable from elsewhere by the machine's name
    return f"[{host}]" if ":" in host else host


@attrs.define(eq=False)
class Dashboard:
    """A job's live dashboard, served on ``host:port`` until cancelled.

    Usage: ``listeners = await dashboard.bind()`` (raises ``OSError`` if the address is
    taken), then ``nursery.start_soon(dashboard.serve, listeners)``; ``dashboard.url`` is
    the address to open.
    """

    #: Connections served at once; a new one beyond is closed without a word.
    MAX_CONNECTIONS = 16
    #: Seconds a connection may take for its request and response together.
    TIMEOUT_S = 5.0
    #: The largest request head (line and headers) taken, in bytes.
    MAX_REQUEST_BYTES = 16 * 1024

    job: Job
    host: str = LOOPBACK
    port: int = 0
    #: The token every request needs (``None``: served on loopback, no token).
    token: str | None = None
    url: str = ""
    #: Connections open now.
    connections: int = 0
    _view: LiveView | None = None
    _graph: bytes | None = None

    def __attrs_post_init__(self) -> None:
        self.job.advances.listened = True  # the lags it shows need every advance's moment
        if self.token is None and not is_loopback(self.host):
            self.token = secrets.token_urlsafe(32)

    async def bind(self) -> list[trio.SocketListener]:
        """Listen on the address; :attr:`port` and :attr:`url` become the actual ones."""
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self._view = LiveView(self.job)  # its clock starts with the job
        self.port = listeners[0].socket.getsockname()[1]
        self.url = f"http://{_url_host(self.host)}:{self.port}/"
        if self.token is not None:
            self.url += f"?token={self.token}"
        logger.info("dashboard served at http://%s:%d/", _url_host(self.host), self.port)
        return listeners

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        """Accept and answer connections until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                for listener in listeners:
                    nursery.start_soon(self._accept, listener, nursery)
        finally:
            close(listeners)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError:  # out of descriptors and such: try again shortly
                await trio.sleep(0.1)
                continue
            if self.connections >= self.MAX_CONNECTIONS:
                await stream.aclose()
                continue
            self.connections += 1
            nursery.start_soon(self._connection, stream)

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(self.TIMEOUT_S):
                await self._exchange(stream)
        except Exception as exc:  # the client's trouble, never the job's
            logger.debug("dashboard connection ended: %r", exc)
        finally:
            self.connections -= 1
            await stream.aclose()

    async def _exchange(self, stream: trio.SocketStream) -> None:
        """Read one request head and answer it (the connection then closes)."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.MAX_REQUEST_BYTES)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                await self._send(stream, conn, None, 400, _json({"error": "bad request"}))
                return
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(4096))
                continue
            if isinstance(event, h11.Request):
                status, kind, body = self.respond(event)
                await self._send(stream, conn, event.method, status, body, kind)
            return

    async def _send(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        method: bytes | None,
        status: int,
        body: bytes,
        kind: str = "application/json",
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [
            ("content-type", kind),
            ("content-length", str(len(body))),
            ("connection", "close"),
            *_HEADERS,
        ]
        data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
        if method != b"HEAD":
            data += conn.send(h11.Data(data=body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(data)

    def respond(self, request: h11.Request) -> tuple[int, str, bytes]:
        """The status, content type and body answering ``request``."""
        parts = urlsplit(request.target.decode("ascii", "replace"))
        if not self._authorized(request, parts.query):
            return 403, "application/json", _json({"error": "forbidden"})
        if request.method not in (b"GET", b"HEAD"):
            return 405, "application/json", _json({"error": "method not allowed"})
        path = parts.path
        if path == "/api/stats":
            if self._view is None:
                self._view = LiveView(self.job)
            return 200, "application/json", _json(self._view.snapshot())
        if path == "/api/graph":
            if self._graph is None:
                self._graph = _json(graph_view(self.job))
            return 200, "application/json", self._graph
        if path in _STATIC:
            name, kind = _STATIC[path]
            body = resources.files(__name__.rpartition(".")[0]).joinpath("static", name)
            page = body.read_bytes()
            if name == "index.html":  # its script and style are asked for with the token too
                query = "" if self.token is None else f"?token={self.token}"
                page = page.replace(b"{{query}}", query.encode())
            return 200, kind, page
        return 404, "application/json", _json({"error": "not found", "path": path})

    def _authorized(self, request: h11.Request, query: str) -> bool:
        """With a token: the request carries it. On loopback: its ``Host`` is loopback."""
        if self.token is not None:
            given = parse_qs(query).get("token", [""])[0]
            return secrets.compare_digest(given.encode(), self.token.encode())
        hosts = [v for k, v in request.headers if k == b"host"]
        if len(hosts) != 1:
            return False
        host = hosts[0].decode("ascii", "replace")
        name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
        return is_loopback(name)


def close(listeners: list[trio.SocketListener]) -> None:
    """Stop listening (at once, cancelled or not)."""
    for listener in listeners:
        listener.socket.close()


def _json(value: Any) -> bytes:
    return json.dumps(value, default=str, separators=(",", ":")).encode()
