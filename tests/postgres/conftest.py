"""A real PostgreSQL server for the PostgreSQL source and sink tests.

``postgres_server`` (one per test session): ``initdb`` into a fresh temporary directory, then
``postgres`` listening only on a unix socket in that directory, with ``wal_level=logical`` and
room for replication slots, as logical replication needs. Run as root, the server runs as the
``postgres`` user (it refuses to run as root). Skipped, saying why, where the binaries are
not on ``PATH`` nor under ``/usr/lib/postgresql/*/bin``, or where psycopg is not installed.

``pg_dsn``: a database of its own for each test on that server (dropped after it).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator

import attrs
import pytest


def _binaries() -> str | None:
    """The directory holding ``initdb``, ``postgres`` and ``pg_ctl``, if any."""
    found = shutil.which("initdb")
    if found is not None:
        return os.path.dirname(os.path.realpath(found))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(folder, "initdb")):
            return folder
    return None


@attrs.frozen
class Server:
    """A running server: its data directory, socket directory and binaries."""

    bin: str
    root: str
    user: list[str]

    @property
    def data(self) -> str:
        return os.path.join(self.root, "data")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.root} user=df dbname={dbname}"

    def ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on this server (``start``, ``stop``, ``restart``)."""
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={self.root} "
            "-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 "
            "-c fsync=off -c full_page_writes=off"
        )
        command = [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-w", "-t", "60"]
        command += ["-l", os.path.join(self.root, "server.log"), "-o", options, *args]
        subprocess.run([*self.user, *command], check=True, stdout=subprocess.DEVNULL, timeout=120)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """One PostgreSQL server for the whole session (see the module)."""
    pytest.importorskip("psycopg", reason="the postgres tests need psycopg (pip install psycopg)")
    folder = _binaries()
    if folder is None:
        pytest.skip(
            "no PostgreSQL server binaries (initdb, postgres): not on PATH nor under "
            "/usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
        )
    user: list[str] = []
    root = tempfile.mkdtemp(prefix="df-pg-")
    if os.geteuid() == 0:
        # The server refuses to run as root: run it as the postgres user in a directory it owns.
        if shutil.which("runuser") is None:
            pytest.skip("running as root, and no runuser to run the server as another user")
        import pwd

        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, and there is no 'postgres' user to run the server as")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        user = ["runuser", "-u", "postgres", "--"]
    server = Server(folder, root, user)
    initdb = [os.path.join(folder, "initdb"), "-D", server.data, "-U", "df", "--auth=trust"]
    subprocess.run(
        [*user, *initdb, "-E", "UTF8", "--no-sync"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
    server.ctl("start")
    try:
        yield server
    finally:
        try:
            server.ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_dsn(postgres_server: Server) -> Iterator[str]:
    """A fresh database on the session's server, dropped (with its slots) after the test."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_server.dsn(name)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        slots = conn.execute(
            "SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,)
        ).fetchall()
        for (slot,) in slots:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
