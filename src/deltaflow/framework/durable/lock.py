"""One job per checkpoint location: a lock taken when a job opens it, held for its life.

Two jobs writing one location would each remove the other's files as garbage and commit over
each other's manifests. So the job that owns a location (the job itself, the caller of a job
spread over processes, a Spark stream's driver) takes its lock before reading the location,
and a second job is refused at once, naming the location and the holder.

* **A local directory** (and any path the OS mounts): an OS lock (``flock``) on the file
  ``lock`` there, which holds the holder's pid, host and start time for the message. The OS
  drops the lock when its holder dies, however it dies (``kill -9`` included), so a crashed
  holder never blocks a restart. (On NFS, Linux maps ``flock`` to a lock of the server.)
* **Any other store** (``s3://``...: no OS lock spans them): a *lease*, the file
  ``lease.json`` naming its owner, which renews it every :data:`LEASE_RENEW_S` seconds. A
  lease not renewed for :data:`LEASE_STALE_S` seconds is stale (its holder died) and may be
  taken over. A job takes a lease by writing its own, waiting :data:`LEASE_SETTLE_S`, and
  reading it back: of two jobs racing, the one whose lease was written last reads its own and
  wins, the other reads the winner's and is refused (this relies on the store showing a
  write to every reader once it returns, as S3, GCS and HDFS do). A holder that finds its
  lease taken over (it stalled for longer than the timeout) commits nothing more.

The lock file and lease are never removed (removing a lock file while another job has it open
would let two jobs lock two different files of one name); releasing only unlocks, or marks the
lease released.

    >>> import tempfile
    >>> from deltaflow.framework.durable.store import CheckpointStore
    >>> store = CheckpointStore(tempfile.mkdtemp())
    >>> held = acquire(store)
    >>> try:
    ...     acquire(store)
    ... except CheckpointError as exc:
    ...     print("in use by another job (pid" in str(exc))
    ...
    True
    >>> held.release()
    >>> acquire(store).release()
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from ...errors import CheckpointError

if TYPE_CHECKING:
    from .store import CheckpointStore

__all__ = [
    "LEASE",
    "LEASE_RENEW_S",
    "LEASE_SETTLE_S",
    "LEASE_STALE_S",
    "LOCK",
    "Held",
    "acquire",
]

LOCK = "lock"
LEASE = "lease.json"
#: Seconds between renewals of a lease.
LEASE_RENEW_S = 10.0
#: Seconds after which a lease not renewed is stale: its holder is taken to have died.
LEASE_STALE_S = 60.0
#: Seconds a job waits between writing its lease and reading it back.
LEASE_SETTLE_S = 2.0


_UNKNOWN = "holder unknown"


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}


def _holder(text: bytes) -> str:
    """Who holds a lock, from what its file says (it may be half written: then unknown)."""
    try:
        info = json.loads(text)
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["since"])))
        return f"pid {int(info['pid'])} on {str(info['host'])!r}, since {since}"
    except (ValueError, KeyError, TypeError):
        return _UNKNOWN


class Held:
    """A location's lock, held until :meth:`release` (see the module's doc)."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        #: Set once the lease was found taken over: commit nothing more.
        self.lost: str | None = None

    def check(self) -> None:
        """Raise if the lock was lost (a lease taken over by another job)."""
        if self.lost is not None:
            raise CheckpointError(self.lost)

    def release(self) -> None:
        """Give the location up (idempotent)."""


class _Flock(Held):
    def __init__(self, store: CheckpointStore, fd: int) -> None:
        super().__init__(store)
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # (closing drops the lock)


def _flock(store: CheckpointStore, root: str) -> Held:
    where = store.describe()
    try:
        os.makedirs(root, exist_ok=True)
        fd = os.open(os.path.join(root, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        msg = f"{where} cannot be locked: {exc}"
        raise CheckpointError(msg) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        try:
            # (A holder that has just taken the lock writes who it is a moment later.)
            for _ in range(50):
                holder = _holder(os.pread(fd, 4096, 0))
                if holder != _UNKNOWN:
                    break
                time.sleep(0.01)
        finally:
            os.close(fd)
        msg = f"{where} is in use by another job ({holder}); one job at a time per location"
        raise CheckpointError(msg) from exc
    try:
        body = json.dumps(_owner()).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, body, 0)
    except OSError as exc:
        os.close(fd)
        msg = f"{where} cannot be locked: {exc}"
        raise CheckpointError(msg) from exc
    return _Flock(store, fd)


class _Lease(Held):
    def __init__(self, store: CheckpointStore, token: str, owner: dict[str, Any]) -> None:
        super().__init__(store)
        self.token = token
        self.owner = owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="deltaflow-lease", daemon=True)
        self._thread.start()

    def _write(self, released: bool = False) -> None:
        body = {**self.owner, "token": self.token, "renewed": time.time(), "released": released}
        self.store.files.write(LEASE, [json.dumps(body).encode()])

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_RENEW_S) and self.lost is None:
            self._renew_once()

    def _renew_once(self) -> None:
        """Renew the lease, unless another job took it over (then it is lost)."""
        try:
            current = json.loads(self.store.files.read(LEASE))
            if current.get("token") != self.token:
                self.lost = (
                    f"{self.store.describe()} was taken over by another job "
                    f"({_holder(json.dumps(current).encode())}) after this one did not "
                    f"renew its lease for {LEASE_STALE_S:g} s"
                )
                return
            self._write()
        except (OSError, ValueError, AttributeError):
            pass  # (a store failing for a moment: try again at the next turn)

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        if self.lost is None:
            with contextlib.suppress(OSError, ValueError):
                if json.loads(self.store.files.read(LEASE)).get("token") == self.token:
                    self._write(released=True)


def _read_lease(store: CheckpointStore) -> dict[str, Any] | None:
    try:
        raw = store.files.read(LEASE)
    except (FileNotFoundError, OSError):
        return None
    try:
        lease = json.loads(raw)
    except ValueError:
        return None  # half written by a holder that died: nobody's
    return lease if isinstance(lease, dict) else None


def _lease(store: CheckpointStore) -> Held:
    where = store.describe()

    def refuse(lease: dict[str, Any]) -> CheckpointError:
        msg = (
            f"{where} is in use by another job ({_holder(json.dumps(lease).encode())}; its "
            f"lease is stale {LEASE_STALE_S:g} s after its last renewal); one job at a time "
            "per location"
        )
        return CheckpointError(msg)

    def live(lease: dict[str, Any] | None) -> bool:
        if lease is None or lease.get("released") is True:
            return False
        renewed = lease.get("renewed")
        return isinstance(renewed, (int, float)) and time.time() - renewed < LEASE_STALE_S

    current = _read_lease(store)
    if current is not None and live(current):
        raise refuse(current)
    token = secrets.token_hex(16)
    owner = _owner()
    body = {**owner, "token": token, "renewed": time.time(), "released": False}
    try:
        store.files.makedirs("")
        store.files.write(LEASE, [json.dumps(body).encode()])
    except OSError as exc:
        msg = f"{where} cannot be locked: {exc}"
        raise CheckpointError(msg) from exc
    time.sleep(LEASE_SETTLE_S)
    current = _read_lease(store)
    if current is None or current.get("token") != token:
        raise refuse(current or {})
    return _Lease(store, token, owner)


def acquire(store: CheckpointStore) -> Held:
    """Take the lock of ``store``'s location for this job (see the module's doc). Blocking
    (a lease waits :data:`LEASE_SETTLE_S`): run it in a thread from trio.

    Raises:
        CheckpointError: another job holds it (naming the location and the holder), or it
            cannot be taken.
    """
    root = store.local_root()
    return _flock(store, root) if root is not None else _lease(store)
