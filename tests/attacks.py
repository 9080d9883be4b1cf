"""Strangers on a job's ports: what the security tests send to a mesh or a stream driver.

A :class:`Stranger` connects to a port and sends one of the :data:`ATTACKS`, then holds its
connection open until told to leave (a silent one says nothing at all). The ``pickle``
attack is a frame in the port's own framing whose unpickling would create a marker file:
the file existing afterwards means something on that port decoded a stranger's bytes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deltaflow.scheduler.net.tcp import encode
from deltaflow.scheduler.net.tls import TLS

#: What a stranger sends: a pickle that creates a marker file when loaded, random bytes, a
#: frame header announcing an absurd length, an HTTP request, or nothing.
ATTACKS = ("pickle", "garbage", "huge", "http", "silent")


class _Marker:
    """Unpickling it opens (so creates) ``path``: what a payload of an attacker would do."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


def payload(attack: str, marker: Path, framing: str) -> bytes:
    """The bytes of ``attack`` in ``framing``: ``"mesh"`` (a link's frames) or ``"stream"``
    (the stream driver's length-prefixed pickles)."""
    if attack == "pickle":
        if framing == "mesh":
            return b"".join(bytes(p) for p in encode([_Marker(marker)]))
        body = pickle.dumps(_Marker(marker))
        return struct.pack("!Q", len(body)) + body
    if attack == "garbage":
        return bytes((i * 151 + 7) % 256 for i in range(4096))
    if attack == "huge":
        return struct.pack("<QI", 1 << 62, 1) if framing == "mesh" else struct.pack("!Q", 1 << 62)
    if attack == "http":
        return b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    assert attack == "silent", attack
    return b""


class Stranger:
    """One connection from outside the job, sending ``data`` and then holding on."""

    def __init__(self, address: tuple[str, int], data: bytes) -> None:
        self.sock = socket.create_connection(address, timeout=5)
        #: ``host:port`` of this end, as a refusal's log record names it.
        self.name = "{}:{}".format(*self.sock.getsockname()[:2])
        if data:
            with contextlib.suppress(OSError):  # the other end may have closed already
                self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def strangers(
    addresses: list[tuple[str, int]], attack: str, marker: Path, framing: str
) -> Iterator[list[Stranger]]:
    """A :class:`Stranger` on every address with ``attack``, closed on leaving."""
    crowd = [Stranger(a, payload(attack, marker, framing)) for a in addresses]
    try:
        yield crowd
    finally:
        for s in crowd:
            s.close()


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def silent(address: str, n: int) -> list[Stranger]:
    """``n`` silent strangers on ``address`` (``host:port``), holding on until closed."""
    return [Stranger(split_address(address), b"") for _ in range(n)]


#: The repository, whose tests and sources a script a test starts imports.
ROOT = Path(__file__).resolve().parent.parent


def script_env(**extra: str) -> dict[str, str]:
    """This process's environment and ``extra``, with the repository's tests and sources
    importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]), **extra}


def start_script(script: str, *args: str, **extra: str) -> subprocess.Popen[str]:
    """``python -c script *args`` (the environment :func:`script_env` of ``extra``), its
    stdin, stdout and stderr piped as text: a job the test floods or kills from outside."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=script_env(**extra),
    )


def make_tls(directory: Path, name: str = "peer") -> TLS:
    """A :class:`deltaflow.TLS` of a fresh test CA and a certificate it issued (for both ends
    of a connection), written under ``directory``."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert(f"deltaflow-{name}")
    cert = directory / f"{name}.pem"
    authority = directory / f"{name}-ca.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(authority))
    return TLS(cert, ca=authority)


class FileGather:
    """A Spark barrier task's rendezvous that the test controls: each task writes its mesh
    address to ``directory/address-<partition>`` and waits for ``directory/go`` before the
    ``allGather``, so the test's strangers reach every port before any peer dials."""

    def __init__(self, directory: Path) -> None:
        self.directory = str(directory)

    def __call__(self, ctx: Any, address: str) -> list[str]:
        here = Path(self.directory)
        (here / f".address-{ctx.partitionId()}").write_text(address)
        (here / f".address-{ctx.partitionId()}").rename(here / f"address-{ctx.partitionId()}")
        deadline = time.monotonic() + 60
        while not (here / "go").exists():
            if time.monotonic() > deadline:
                msg = "the test never said go"
                raise TimeoutError(msg)
            time.sleep(0.02)
        return list(ctx.allGather(address))
