"""Authenticating a connection: both ends prove they hold the job's secret before anything on
it is decoded.

Every connection between a job's processes (the mesh of ``processes=`` and of Spark tasks, a
Spark stream's workers dialing the driver) opens with this exchange, the *dialer* ``D``
being the end that connected and the *listener* ``L`` the end that accepted::

    L -> D   hello(L)              magic, 32 fresh random bytes, L's index, a context
    D -> L   hello(D), proof(D)    proof(D) = HMAC-SHA256(secret, "dial" hello(D) hello(L))
    L -> D   proof(L)              proof(L) = HMAC-SHA256(secret, "listen" hello(L) hello(D))

Every piece has a fixed size, so nothing is parsed before the proofs are checked but the
magic; proofs are compared with :func:`hmac.compare_digest`. Each side's nonce makes the
other's proof fresh (a recorded exchange replays nothing), the role label keeps a proof from
being reflected back, and the index and context (which peer, which job or plan) are inside
what is proved, so a peer cannot claim another's place. The listener proves itself only to a
dialer that has proved itself. On the wire a hello's index and context are sealed: XORed
with ``HMAC-SHA512(secret, "hello" nonce)``, a pad fresh with every nonce, so only an end
holding the secret reads them (:meth:`Hello.seal`): a stranger learns a random nonce and
nothing else, not which peer it reached nor which plan runs there.

A dialer whose connection is closed before the listener's hello arrives (a listener out of
file descriptors, or turning away its oldest waiting connection in a flood of strangers:
:mod:`deltaflow.scheduler.net.door`) dials again, for up to :data:`HANDSHAKE_TIMEOUT_S`
(:func:`dial`).

The exchange proves who is at the other end, not that the bytes after it are untouched: on a
network where someone can alter traffic in flight, run the connection over TLS
(:class:`~deltaflow.scheduler.net.tls.TLS`), which this exchange then runs inside.

    >>> secret = new_secret()
    >>> mine, theirs = Hello.fresh(0, b"plan"), Hello.fresh(1, b"plan")
    >>> check_proof(secret, DIAL, theirs, mine, proof(secret, DIAL, theirs, mine))
    >>> check_proof(new_secret(), DIAL, theirs, mine, proof(secret, DIAL, theirs, mine))
    Traceback (most recent call last):
    ...
    deltaflow.scheduler.net.handshake.HandshakeError: the other end does not hold the job's secret
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import ssl
import struct
import sys
from collections.abc import Callable

import attrs
import trio

if sys.version_info < (3, 11):  # pragma: no cover - trio brings the backport there
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "DIAL",
    "HANDSHAKE_TIMEOUT_S",
    "HELLO_SIZE",
    "LISTEN",
    "PROOF_SIZE",
    "REFUSED",
    "HandshakeError",
    "Hello",
    "TurnedAway",
    "accept",
    "authenticate",
    "authenticate_socket",
    "check_proof",
    "check_secret",
    "dial",
    "new_secret",
    "proof",
    "reason",
    "secured",
]

#: Seconds a connection has to complete the exchange; past it, it is closed as a stranger.
HANDSHAKE_TIMEOUT_S = 10.0
#: Opens every hello: a version of this protocol, and a quick "not one of ours" for anything
#: else that connects (a port scanner, an HTTP client). Version 2 seals the hello: a peer
#: of version 1 is refused as not one of ours, not as one without the secret.
MAGIC = b"dflow02\n"
#: The context field's size: what both ends must agree on besides the secret.
CONTEXT_SIZE = 32
_HELLO = struct.Struct(f"<{len(MAGIC)}s32sI{CONTEXT_SIZE}s")
HELLO_SIZE = _HELLO.size
PROOF_SIZE = hashlib.sha256().digest_size
DIAL = b"dial"
LISTEN = b"listen"
#: The shortest secret accepted (a user's own; a job's own has 32 bytes).
MIN_SECRET = 16


class HandshakeError(Exception):
    """A connection failed the exchange: it is closed and logged, never decoded."""


class TurnedAway(HandshakeError):
    """The listener closed the connection before its hello: it is out of file descriptors,
    or turned the connection away in a flood (a dialer tries again), or it is not one of
    ours."""


def new_secret() -> bytes:
    """A fresh secret for one job: 32 bytes from :mod:`secrets`.

    >>> len(new_secret())
    32
    """
    return secrets.token_bytes(32)


def check_secret(secret: object, what: str = "secret") -> bytes:
    """``secret`` as bytes (a ``str`` is UTF-8 encoded), at least 16 of them.

    Raises:
        TypeError: neither ``bytes`` nor ``str``.
        ValueError: shorter than 16 bytes.

    >>> check_secret("correct horse battery staple")[:7]
    b'correct'
    >>> check_secret(b"short")
    Traceback (most recent call last):
    ...
    ValueError: secret must hold at least 16 bytes, not 5
    """
    if isinstance(secret, str):
        secret = secret.encode()
    if not isinstance(secret, (bytes, bytearray)):
        msg = f"{what} must be bytes or str, not {type(secret).__name__}"
        raise TypeError(msg)
    if len(secret) < MIN_SECRET:
        # The length only: a secret never appears in a message.
        msg = f"{what} must hold at least {MIN_SECRET} bytes, not {len(secret)}"
        raise ValueError(msg)
    return bytes(secret)


@attrs.frozen
class Hello:
    """What one end says of itself: a fresh ``nonce``, its ``index`` (which peer or worker it
    is) and a ``context`` (what it runs: a plan's digest, a service's name), at most
    :data:`CONTEXT_SIZE` bytes.

    >>> hello = Hello.fresh(3, b"stream")
    >>> Hello.unpack(hello.pack()) == hello
    True
    """

    nonce: bytes
    index: int
    context: bytes

    @classmethod
    def fresh(cls, index: int, context: bytes) -> Hello:
        """A hello with a new random nonce."""
        if len(context) > CONTEXT_SIZE:
            msg = f"a handshake context holds at most {CONTEXT_SIZE} bytes, not {len(context)}"
            raise ValueError(msg)
        return cls(secrets.token_bytes(32), index, context.ljust(CONTEXT_SIZE, b"\0"))

    def pack(self) -> bytes:
        """The hello's :data:`HELLO_SIZE` bytes in the clear (what a proof covers)."""
        return _HELLO.pack(MAGIC, self.nonce, self.index, self.context)

    @classmethod
    def unpack(cls, data: bytes) -> Hello:
        """The hello of :data:`HELLO_SIZE` bytes in the clear.

        Raises:
            HandshakeError: the bytes do not open with the magic (not one of ours).
        """
        _check_magic(data[: len(MAGIC)])
        _, nonce, index, context = _HELLO.unpack(data)
        return cls(nonce, index, context)

    def seal(self, secret: bytes) -> bytes:
        """The hello's bytes on the wire: its index and context sealed with ``secret``, so
        that the hello tells an end without it nothing but a random nonce.

        >>> secret = new_secret()
        >>> hello = Hello.fresh(3, b"plan-digest")
        >>> b"plan-digest" in hello.seal(secret)
        False
        >>> Hello.unseal(hello.seal(secret), secret) == hello
        True
        """
        return _sealed(self.pack(), secret)

    @classmethod
    def unseal(cls, data: bytes, secret: bytes) -> Hello:
        """The hello of sealed bytes read off the wire (with a wrong secret, a hello of
        garbage, which then fails the proof).

        Raises:
            HandshakeError: the bytes do not open with the magic (not one of ours).
        """
        _check_magic(data[: len(MAGIC)])
        return cls.unpack(_sealed(data, secret))


#: Where a hello's sealed part (its index and context) begins.
_SEALED_AT = len(MAGIC) + 32


def _sealed(data: bytes, secret: bytes) -> bytes:
    """``data`` (a hello's bytes) with its index and context XORed with a pad made from
    ``secret`` and its nonce: sealing and unsealing are one operation."""
    nonce = data[len(MAGIC) : _SEALED_AT]
    pad = hmac.new(secret, b"hello" + nonce, hashlib.sha512).digest()
    body = data[_SEALED_AT:]
    opened = bytes(a ^ b for a, b in zip(body, pad, strict=False))
    return data[:_SEALED_AT] + opened


def _check_magic(opening: bytes) -> None:
    if opening != MAGIC:
        msg = f"not a deltaflow handshake (it opened with {opening!r})"
        raise HandshakeError(msg)


def proof(secret: bytes, role: bytes, prover: Hello, verifier: Hello) -> bytes:
    """The ``prover``'s proof, in ``role`` (:data:`DIAL` or :data:`LISTEN`), that it holds
    ``secret``, bound to both ends' hellos."""
    return hmac.new(secret, role + prover.pack() + verifier.pack(), hashlib.sha256).digest()


def check_proof(secret: bytes, role: bytes, prover: Hello, verifier: Hello, got: bytes) -> None:
    """Accept ``got`` as the ``prover``'s proof, or raise.

    Raises:
        HandshakeError: the proof is wrong: the other end does not hold ``secret``.
    """
    if not hmac.compare_digest(proof(secret, role, prover, verifier), got):
        msg = "the other end does not hold the job's secret"
        raise HandshakeError(msg)


# -- over a trio stream --------------------------------------------------------------------
async def _receive_exactly(stream: trio.abc.Stream, size: int) -> bytes:
    """Exactly ``size`` bytes, never more: what follows the exchange stays in the stream."""
    got = bytearray()
    while len(got) < size:
        chunk = await stream.receive_some(size - len(got))
        if not chunk:
            msg = f"the connection closed after {len(got)} of {size} bytes"
            raise HandshakeError(msg)
        got += chunk
    return bytes(got)


async def authenticate(
    stream: trio.abc.Stream,
    secret: bytes,
    mine: Hello,
    *,
    dialer: bool,
    proved: Callable[[], None] | None = None,
) -> Hello:
    """Run the exchange on ``stream`` as the dialer or the listener; the other end's hello.

    The caller bounds it in time (:data:`HANDSHAKE_TIMEOUT_S`) and closes the stream when it
    fails. The magic is checked as soon as it has arrived, so most strangers are refused
    at once rather than at the deadline. A listener calls ``proved()`` once the dialer's
    proof holds, before sending its own (its door must not turn the connection away after
    that: the dialer would count itself in).

    Raises:
        TurnedAway: (a dialer) the listener closed the connection before its hello, or
            reset it (a listener's door turns a connection away with a reset, refuses one
            with a plain close).
        HandshakeError: the other end is not one of the job's (wrong magic, wrong proof, or
            it closed the connection midway).
    """
    if not dialer:
        await stream.send_all(mine.seal(secret))
    try:
        opening = await _receive_exactly(stream, len(MAGIC))
    except (HandshakeError, trio.BrokenResourceError) as exc:
        if dialer and not _began(exc):
            msg = "it closed the connection before saying hello"
            raise TurnedAway(msg) from exc
        raise
    _check_magic(opening)
    rest = await _receive_exactly(stream, HELLO_SIZE - len(MAGIC))
    theirs = Hello.unseal(opening + rest, secret)
    if dialer:
        await stream.send_all(mine.seal(secret) + proof(secret, DIAL, mine, theirs))
        try:
            answer = await _receive_exactly(stream, PROOF_SIZE)
        except trio.BrokenResourceError as exc:
            if _reset(exc):
                msg = "it turned the connection away (reset) before proving itself"
                raise TurnedAway(msg) from exc
            raise
        check_proof(secret, LISTEN, theirs, mine, answer)
        return theirs
    check_proof(secret, DIAL, theirs, mine, await _receive_exactly(stream, PROOF_SIZE))
    if proved is not None:
        proved()
    await stream.send_all(proof(secret, LISTEN, mine, theirs))
    return theirs


def _began(exc: BaseException) -> bool:
    """Whether the other end sent anything before the failure ``exc`` of a first read."""
    return isinstance(exc, HandshakeError) and "closed after 0 of" not in str(exc)


def _reset_connecting(exc: OSError) -> bool:
    """Whether every attempt of a failed ``open_tcp_stream`` was reset by the other end."""
    group = exc.__cause__
    if isinstance(group, BaseExceptionGroup):
        return all(isinstance(e, ConnectionResetError) for e in group.exceptions)
    return isinstance(exc, ConnectionResetError)


def _reset(exc: BaseException) -> bool:
    """Whether ``exc`` (trio's) says the other end reset the connection."""
    return isinstance(exc.__cause__, ConnectionResetError)


#: What a connection that fails the exchange raises: all of it is caught, logged, refused.
REFUSED = (
    HandshakeError,
    trio.TooSlowError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
    ssl.SSLError,
)


def reason(exc: BaseException) -> str:
    """What went wrong with a connection, in a few words for a log record or an error."""
    if isinstance(exc, trio.TooSlowError):
        return f"no answer within {HANDSHAKE_TIMEOUT_S} s"
    if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ is not None:
        exc = exc.__cause__  # trio wraps what TLS or the socket said
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed: {exc}"
    return str(exc) or type(exc).__name__


async def secured(
    stream: trio.SocketStream, tls: ssl.SSLContext | None, *, server: bool
) -> trio.abc.Stream:
    """``stream``, or TLS over it (the TLS handshake done) when ``tls`` is a context."""
    if tls is None:
        return stream
    secure = trio.SSLStream(stream, tls, server_side=server)
    await secure.do_handshake()
    return secure


async def dial(
    host: str,
    port: int,
    secret: bytes,
    mine: Hello,
    tls: ssl.SSLContext | None = None,
    *,
    patience: float = HANDSHAKE_TIMEOUT_S,
) -> tuple[trio.abc.Stream, Hello]:
    """Connect to ``host:port`` and run the exchange as the dialer (inside TLS with a client
    ``tls`` context), within :data:`HANDSHAKE_TIMEOUT_S`: the authenticated stream and the
    listener's hello. The caller checks the hello's index and context.

    A listener that closes the connection before its hello, or resets it at any point of
    the exchange (:class:`TurnedAway`: its door making room in a flood of strangers), is
    dialed again, waiting longer each time, for up to ``patience`` seconds.

    Raises:
        OSError: ``host:port`` could not be reached.
        TurnedAway: the listener closed every connection before its hello, for
            ``patience`` seconds.
        One of :data:`REFUSED` (the connection is closed).
    """
    deadline = trio.current_time() + patience
    wait, tries = 0.05, 0
    while True:
        tries += 1
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            if not _reset_connecting(exc):
                raise
            # Reset as it was accepted (a door making room at once): turned away too.
            turned: BaseException = exc
        else:
            try:
                with trio.fail_after(HANDSHAKE_TIMEOUT_S):
                    secure = await _secured_dialing(stream, tls)
                    hello = await authenticate(secure, secret, mine, dialer=True)
            except TurnedAway as exc:
                await trio.aclose_forcefully(stream)
                turned = exc
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
            else:
                return secure, hello
        if trio.current_time() + wait > deadline:
            msg = (
                f"it turned the connection away (closed or reset it before proving "
                f"itself), {tries} times in {patience:g} s (is its port flooded by strangers, "
                "or is another program listening there?)"
            )
            raise TurnedAway(msg) from turned
        await trio.sleep(wait)
        wait = min(2 * wait, 1.0)
        mine = attrs.evolve(mine, nonce=secrets.token_bytes(32))


async def _secured_dialing(
    stream: trio.SocketStream, tls: ssl.SSLContext | None
) -> trio.abc.Stream:
    """:func:`secured` for a dialer: the listener closing the connection before its side of
    the TLS handshake is :class:`TurnedAway`."""
    try:
        return await secured(stream, tls, server=False)
    except trio.BrokenResourceError as exc:
        if isinstance(exc.__cause__, (ssl.SSLEOFError, ConnectionResetError)):
            msg = "it closed the connection before saying hello"
            raise TurnedAway(msg) from exc
        raise


async def accept(
    stream: trio.SocketStream,
    secret: bytes,
    mine: Hello,
    tls: ssl.SSLContext | None = None,
    proved: Callable[[], None] | None = None,
) -> tuple[trio.abc.Stream, Hello]:
    """Run the exchange as the listener on an accepted ``stream`` (inside TLS with a server
    ``tls`` context), within :data:`HANDSHAKE_TIMEOUT_S`: the authenticated stream and the
    dialer's hello. The caller checks the hello, and logs and closes a refused stream;
    ``proved`` is as for :func:`authenticate`.

    Raises:
        One of :data:`REFUSED`.
    """
    with trio.fail_after(HANDSHAKE_TIMEOUT_S):
        secure = await secured(stream, tls, server=True)
        hello = await authenticate(secure, secret, mine, dialer=False, proved=proved)
    return secure, hello


# -- over a blocking socket ----------------------------------------------------------------
def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            msg = f"the connection closed after {len(got)} of {size} bytes"
            raise HandshakeError(msg)
        got += chunk
    return bytes(got)


def authenticate_socket(
    sock: socket.socket,
    secret: bytes,
    mine: Hello,
    *,
    dialer: bool,
    proved: Callable[[], None] | None = None,
) -> Hello:
    """:func:`authenticate` over a blocking socket (or an ``ssl.SSLSocket``); the caller sets
    its timeout.

    Raises:
        HandshakeError: as :func:`authenticate`.
        OSError: the socket failed or timed out.
    """
    if not dialer:
        sock.sendall(mine.seal(secret))
    opening = _recv_exactly(sock, len(MAGIC))
    _check_magic(opening)
    theirs = Hello.unseal(opening + _recv_exactly(sock, HELLO_SIZE - len(MAGIC)), secret)
    if dialer:
        sock.sendall(mine.seal(secret) + proof(secret, DIAL, mine, theirs))
        check_proof(secret, LISTEN, theirs, mine, _recv_exactly(sock, PROOF_SIZE))
        return theirs
    check_proof(secret, DIAL, theirs, mine, _recv_exactly(sock, PROOF_SIZE))
    if proved is not None:
        proved()
    sock.sendall(proof(secret, LISTEN, mine, theirs))
    return theirs
