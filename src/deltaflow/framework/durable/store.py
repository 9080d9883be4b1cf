"""A checkpoint location: data files of segments, and manifests switched atomically.

Layout of a location (a local directory, or any path pyarrow's filesystem layer reaches:
``s3://``, ``hdfs://``, ``gs://``...; other schemes through fsspec when it is installed)::

    checkpoint-000007.json     the manifest of checkpoint 7: what the job was, and where
                               each piece of its state is (the highest number is current)
    data/000007-p0-1f3a9c.dfs  a data file: Arrow IPC streams (zstd), one after another

Every piece of state is a *segment*: a few record batches, each an IPC stream at an
``[offset, length]`` of one data file. A checkpoint writes one data file per writer (the job,
or each process of a job spread over processes) and reuses the segments of earlier
checkpoints for state that has not changed, so a data file lives as long as some manifest
refers to it.

Atomicity: data files are written first under new names; the manifest is written under a
temporary name and renamed into place (atomic on a local disk and HDFS; on object stores a
single object appears whole or not at all). A process killed at any moment therefore leaves
the previous manifest, and the files it names, untouched: the location stays readable at the
last completed checkpoint. Files no manifest refers to (a checkpoint cut short, a superseded
one) are removed after the next commit.

Safety: the manifest carries a format name and version, and each data file's length and
CRC-32, and ends with its own checksum (:mod:`.manifest`), verified before any field is read;
a file that is missing, shorter, or whose bytes do not match, and a manifest that is damaged,
does not parse or has a field of the wrong type, raise
:class:`~deltaflow.errors.CheckpointError` naming the location and the file. The first commit
also writes ``location.json``, which says the location has held a checkpoint: a location
with no manifest is empty (a fresh start) only if it holds neither that mark nor a data file
(a first checkpoint cut short before its manifest leaves data files alone: a fresh start,
its files removed at the next commit; a manifest deleted leaves the mark: an error).
:meth:`CheckpointStore.clear` removes a checkpoint deliberately (``open(..., fresh=True)``).

    >>> import tempfile
    >>> store = CheckpointStore(tempfile.mkdtemp())
    >>> store.latest() is None
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import zlib
from typing import Any, Protocol

from ...errors import CheckpointError
from ..antichain import Antichain
from ..lattice import Product
from .manifest import check_fields, seal, unseal

__all__ = [
    "FORMAT",
    "MARK",
    "READS",
    "VERSION",
    "CheckpointStore",
    "SegmentReader",
    "SegmentWriter",
    "decode_frontier",
    "decode_time",
    "encode_frontier",
    "encode_time",
]

FORMAT = "deltaflow-checkpoint"
#: The manifest format version this deltaflow writes. Version 2 adds logs of the rows
#: appended to a history (segments marked ``"log"``), which version 1 readers would take for
#: groups; version 3 seals the manifest with its own checksum and adds the digests of the
#: operators' code (``"code"``). It reads every version in :data:`READS`.
VERSION = 3
#: The versions this deltaflow reads (version 1 is version 2 without logs; both unsealed).
READS = frozenset({1, 2, 3})
DATA = "data"
#: Written at a location's first commit: it has held a checkpoint (see the module's doc).
MARK = "location.json"
_MANIFEST = re.compile(r"^checkpoint-(\d+)\.json$")


def encode_time(time: Any) -> Any:
    """A time as JSON: an int, or ``[outer, inner]`` for a product.

    >>> encode_time(Product(Product(1, 2), 3)), decode_time([[1, 2], 3])
    ([[1, 2], 3], Product(outer=Product(outer=1, inner=2), inner=3))
    """
    if time.__class__ is Product:
        return [encode_time(time.outer), encode_time(time.inner)]
    return time


def decode_time(value: Any) -> Any:
    """The time :func:`encode_time` wrote."""
    if isinstance(value, list):
        return Product(decode_time(value[0]), decode_time(value[1]))
    return value


def encode_frontier(frontier: Antichain) -> list[Any]:
    """A frontier as a JSON list of its times."""
    return [encode_time(t) for t in frontier.elements]


def decode_frontier(value: list[Any]) -> Antichain:
    """The frontier :func:`encode_frontier` wrote."""
    return Antichain([decode_time(t) for t in value])


class _Files(Protocol):
    """What a store needs of a filesystem, relative to the location."""

    def names(self, folder: str) -> list[str]: ...

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, pieces: list[Any]) -> None: ...

    def replace(self, source: str, target: str) -> None: ...

    def delete(self, path: str) -> None: ...

    def makedirs(self, folder: str) -> None: ...


class _LocalFiles:
    """A local directory: plain system calls, each file synced before it counts."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _path(self, path: str) -> str:
        return os.path.join(self.root, path)

    def names(self, folder: str) -> list[str]:
        try:
            return os.listdir(self._path(folder))
        except FileNotFoundError:
            return []

    def read(self, path: str) -> bytes:
        with open(self._path(path), "rb") as f:
            return f.read()

    def write(self, path: str, pieces: list[Any]) -> None:
        with open(self._path(path), "wb") as f:
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())

    def replace(self, source: str, target: str) -> None:
        os.replace(self._path(source), self._path(target))
        folder = os.path.dirname(self._path(target))
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself survives a crash of the machine
        finally:
            os.close(fd)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._path(path))

    def makedirs(self, folder: str) -> None:
        os.makedirs(self._path(folder), exist_ok=True)


class _ArrowFiles:
    """A location behind a pyarrow filesystem (S3, HDFS, GCS, or fsspec's)."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")

    def _path(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root

    def names(self, folder: str) -> list[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._path(folder), allow_not_found=True)
        return [info.base_name for info in self.fs.get_file_info(selector)]

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(self._path(path)) as f:
            return bytes(f.read())

    def write(self, path: str, pieces: list[Any]) -> None:
        with self.fs.open_output_stream(self._path(path)) as f:
            for piece in pieces:
                f.write(piece)

    def replace(self, source: str, target: str) -> None:
        self.fs.move(self._path(source), self._path(target))

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError, OSError):
            self.fs.delete_file(self._path(path))

    def makedirs(self, folder: str) -> None:
        self.fs.create_dir(self._path(folder), recursive=True)


def _files_for(location: str) -> _Files:
    """The filesystem behind ``location``: a local directory, a URI pyarrow knows, or one
    fsspec knows."""
    if "://" not in location or location.startswith("file://"):
        path = location.removeprefix("file://")
        return _LocalFiles(os.path.abspath(os.path.expanduser(path)))
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(location)
    except (pa.ArrowInvalid, ValueError) as exc:
        try:
            import fsspec  # type: ignore[import-not-found]
        except ImportError:
            msg = (
                f"checkpoint location {location!r}: pyarrow does not know this filesystem "
                f"({exc}); install fsspec (and its package for the scheme) to reach it"
            )
            raise ValueError(msg) from exc
        fs_any, root = fsspec.core.url_to_fs(location)
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(fs_any))
    if isinstance(fs, pafs.LocalFileSystem):
        return _LocalFiles(root)
    return _ArrowFiles(fs, root)


class SegmentWriter:
    """One data file being built: each :meth:`add` appends a segment (its record batches,
    one compressed IPC stream each) and says where it lies."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pieces: list[Any] = []
        self.size = 0

    def add(self, batches: list[Any]) -> dict[str, Any]:
        """Append a segment of ``batches``; returns its reference for the manifest."""
        import pyarrow as pa

        # (One thread: a checkpoint's segments are small, and handing each buffer to a
        # pool costs more than compressing it on a machine whose cores are busy.)
        options = pa.ipc.IpcWriteOptions(compression="zstd", use_threads=False)
        parts = []
        for batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema, options=options) as w:
                w.write_batch(batch)
            buf = sink.getvalue()
            parts.append([self.size, buf.size])
            self.pieces.append(buf)
            self.size += buf.size
        return {"file": self.name, "parts": parts}


class SegmentReader:
    """Reads segments of one manifest's data files, each file loaded and checked once."""

    def __init__(self, store: CheckpointStore, manifest: dict[str, Any]) -> None:
        self.store = store
        self.files: dict[str, Any] = manifest.get("files", {})
        self._loaded: dict[str, Any] = {}

    def _file(self, name: str) -> Any:
        import pyarrow as pa

        buf = self._loaded.get(name)
        if buf is not None:
            return buf
        info = self.files.get(name)
        where = self.store.describe(f"{DATA}/{name}")
        if info is None:
            msg = f"{where}: the manifest refers to a data file it does not list"
            raise CheckpointError(msg)
        try:
            data = self.store.files.read(f"{DATA}/{name}")
        except OSError as exc:
            msg = f"{where} cannot be read: {exc}"
            raise CheckpointError(msg) from exc
        if len(data) != info["bytes"] or zlib.crc32(data) != info["crc32"]:
            msg = (
                f"{where} is corrupted: {len(data)} bytes where the manifest says "
                f"{info['bytes']}, or their checksum differs"
            )
            raise CheckpointError(msg)
        buf = self._loaded[name] = pa.py_buffer(data)
        return buf

    def batches(self, ref: dict[str, Any]) -> list[Any]:
        """The record batches of the segment ``ref`` (as :meth:`SegmentWriter.add` said)."""
        import pyarrow as pa

        buf = self._file(ref["file"])
        out = []
        try:
            for offset, length in ref["parts"]:
                with pa.ipc.open_stream(buf.slice(offset, length)) as reader:
                    out.append(reader.read_next_batch())
        except (pa.ArrowException, ValueError, KeyError) as exc:
            where = self.store.describe(f"{DATA}/{ref['file']}")
            msg = f"{where} holds an unreadable segment: {exc}"
            raise CheckpointError(msg) from exc
        return out


class CheckpointStore:
    """A checkpoint location (module docstring): read its current manifest and segments,
    write data files, switch to a new manifest, remove what no manifest needs."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        text = os.fspath(location)
        if not text:
            msg = f"checkpoint must be a directory path or URI, not {location!r}"
            raise ValueError(msg)
        self.location = text
        self.files = _files_for(text)

    def local_root(self) -> str | None:
        """The directory of a location on a local (or mounted) filesystem, else ``None``."""
        return self.files.root if isinstance(self.files, _LocalFiles) else None

    def describe(self, path: str = "") -> str:
        """``"checkpoint at 'LOCATION'"`` (and the file in it), for messages."""
        where = f"checkpoint at {self.location!r}"
        return f"{where}, file {path!r}" if path else where

    # -- reading ------------------------------------------------------------------------
    def sequences(self) -> list[int]:
        """The numbers of the manifests present, ascending."""
        found = []
        for name in self.files.names(""):
            m = _MANIFEST.match(name)
            if m:
                found.append(int(m.group(1)))
        return sorted(found)

    def latest(self) -> dict[str, Any] | None:
        """The current manifest (the highest numbered), or ``None`` for an empty location.

        Raises:
            CheckpointError: it cannot be read, is damaged (its checksum), does not parse, has
                a field of the wrong type, or is of another format or a newer version; or
                the location holds data files or the mark of a checkpoint but no manifest.
        """
        seqs = self.sequences()
        if not seqs:
            self._check_empty()
            return None
        name = _manifest_name(seqs[-1])
        where = self.describe(name)
        try:
            raw = self.files.read(name)
        except OSError as exc:
            msg = f"{where} cannot be read: {exc}"
            raise CheckpointError(msg) from exc
        manifest = unseal(raw, where)
        if manifest.get("format") != FORMAT:
            msg = f"{where} is not a deltaflow checkpoint manifest"
            raise CheckpointError(msg)
        version = manifest.get("version")
        if version.__class__ is not int or version not in READS:
            msg = (
                f"{where} is of format version {version!r}; this deltaflow "
                f"reads versions {sorted(READS)} (a newer deltaflow wrote it?)"
            )
            raise CheckpointError(msg)
        check_fields(manifest, seqs[-1], where)
        return manifest

    def _check_empty(self) -> None:
        """A location with no manifest: refuse it if it held a checkpoint (see the module's
        doc), else it is empty."""
        # Data files of a checkpoint after the first mean one was committed too (a
        # location written before the mark existed has them but no mark).
        later = [
            name
            for name in self.files.names(DATA)
            if (m := _DATA_FILE.match(name)) is not None and int(m.group(1)) > 1
        ]
        if MARK in self.files.names("") or later:
            what = f"({MARK!r})" if not later else f"(data file {later[0]!r})"
            msg = (
                f"{self.describe()} holds no manifest, but a checkpoint was committed there "
                f"{what}: was the manifest deleted? Open it with fresh=True (or delete "
                "the folder) to start over"
            )
            raise CheckpointError(msg)

    def clear(self) -> None:
        """Remove every checkpoint here: the manifests, the data files and the mark (nothing
        else: a location given by mistake loses no file deltaflow did not write). Hold the
        location's lock first (:mod:`.lock`)."""
        try:
            for name in self.files.names(""):
                if _MANIFEST.match(name) or ".json.tmp-" in name:
                    self.files.delete(name)
            for name in self.files.names(DATA):
                if _DATA_FILE.match(name):
                    self.files.delete(f"{DATA}/{name}")
            self.files.delete(MARK)  # last: until the manifests are gone it must stay
        except OSError as exc:
            msg = f"{self.describe()} cannot be cleared: {exc}"
            raise CheckpointError(msg) from exc

    def reader(self, manifest: dict[str, Any]) -> SegmentReader:
        """A reader of ``manifest``'s segments."""
        return SegmentReader(self, manifest)

    # -- writing ------------------------------------------------------------------------
    def new_file(self, sequence: int, writer: str) -> SegmentWriter:
        """A data file for checkpoint ``sequence`` by ``writer`` (named uniquely)."""
        return SegmentWriter(f"{sequence:06d}-{writer}-{secrets.token_hex(4)}.dfs")

    def write(self, segments: SegmentWriter) -> dict[str, int]:
        """Write a data file whole (synced on a local disk); its length and CRC-32 for the
        manifest."""
        crc = 0
        for piece in segments.pieces:
            crc = zlib.crc32(piece, crc)
        try:
            self.files.makedirs(DATA)
            self.files.write(f"{DATA}/{segments.name}", segments.pieces)
        except OSError as exc:
            msg = f"{self.describe(DATA + '/' + segments.name)} cannot be written: {exc}"
            raise CheckpointError(msg) from exc
        return {"bytes": segments.size, "crc32": crc}

    def commit(self, manifest: dict[str, Any]) -> None:
        """Make ``manifest`` (with its ``sequence``) the current one, atomically."""
        manifest = {"format": FORMAT, "version": VERSION, **manifest}
        name = _manifest_name(manifest["sequence"])
        temporary = f"{name}.tmp-{secrets.token_hex(4)}"
        body = seal(manifest)
        try:
            self.files.makedirs("")  # a job whose state is all empty wrote no data file
            self.files.write(temporary, [body])
            self.files.replace(temporary, name)
            if MARK not in self.files.names(""):
                self.files.write(MARK, [json.dumps({"format": FORMAT}).encode()])
        except OSError as exc:
            self.files.delete(temporary)
            msg = f"{self.describe(name)} cannot be written: {exc}"
            raise CheckpointError(msg) from exc

    def collect_garbage(self, manifest: dict[str, Any]) -> None:
        """Remove older manifests, temporary files and data files ``manifest`` does not use."""
        keep = set(manifest.get("files", {}))
        current = _manifest_name(manifest["sequence"])
        for name in self.files.names(""):
            m = _MANIFEST.match(name)
            if (m and name != current) or ".json.tmp-" in name:
                self.files.delete(name)
        for name in self.files.names(DATA):
            if name not in keep:
                self.files.delete(f"{DATA}/{name}")


_DATA_FILE = re.compile(r"^(\d{6,})-[^/]*\.dfs$")


def _manifest_name(sequence: int) -> str:
    return f"checkpoint-{sequence:06d}.json"
