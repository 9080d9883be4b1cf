"""A checkpoint's manifest as bytes: sealed with its own checksum, and checked field by field.

A manifest is the one file that says what every other file of a checkpoint is: a flipped bit
in it (a time ``12`` read as ``10``, a table renamed) would resume a job at the wrong time, or
with the wrong state, silently. So a manifest protects itself: its JSON body is followed by a
trailer line holding the body's SHA-256, verified before any field is read::

    {"format":"deltaflow-checkpoint","version":3,...}
    #sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08

and once it is verified, every field the resume reads is checked to be of its type (a
manifest written by hand, or by a faulty writer, is an error naming the field, never a
``KeyError`` deep inside a resume); of the values operators keep, those deltaflow's operators
write (``upper``, a frontier; ``layout``, a delta rule's split) are checked too. Manifests of
versions 1 and 2 carry no trailer; they are read as before, their fields checked all the same.

    >>> body = {"format": "x", "version": 3}
    >>> unseal(seal(body), "m") == body
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ...errors import CheckpointError

__all__ = ["SEALED", "check_fields", "seal", "unseal"]

#: The first manifest version that ends with its own checksum (every later one does).
SEALED = 3
_TRAILER = b"\n#sha256="


def seal(manifest: dict[str, Any]) -> bytes:
    """``manifest`` as the bytes of a manifest file: its JSON and the trailer line."""
    body = json.dumps(manifest, separators=(",", ":")).encode()
    return body + _TRAILER + hashlib.sha256(body).hexdigest().encode() + b"\n"


def unseal(raw: bytes, where: str) -> dict[str, Any]:
    """The manifest whose file (``where``, for messages) holds ``raw``, its checksum verified
    first (a manifest of a version before :data:`SEALED` has none).

    Raises:
        CheckpointError: the checksum is missing or differs, or the body does not parse.
    """
    cut = raw.rfind(_TRAILER)
    if cut >= 0:
        body, digest = raw[:cut], raw[cut + len(_TRAILER) :]
        if digest != hashlib.sha256(body).hexdigest().encode() + b"\n":
            msg = f"{where} is damaged: its checksum does not match its contents"
            raise CheckpointError(msg)
    else:
        body = raw
    try:
        manifest = json.loads(body)
    except ValueError as exc:
        msg = f"{where} cannot be read: {exc}"
        raise CheckpointError(msg) from exc
    if not isinstance(manifest, dict):
        msg = f"{where} is not a deltaflow checkpoint manifest"
        raise CheckpointError(msg)
    version = manifest.get("version")
    if cut < 0 and (version.__class__ is not int or version >= SEALED):
        # (What the format says is only known once the checksum is; with none, a version
        # of a sealed format means the trailer was cut off.)
        msg = f"{where} is damaged: its checksum is missing (the file was cut short?)"
        raise CheckpointError(msg)
    return manifest


# -- the fields ------------------------------------------------------------------------------
class _Bad(Exception):
    """A field is not what it must be: its path in the manifest, and what it must be."""


def _int(value: Any, path: str, low: int = 0) -> int:
    if value.__class__ is not int or value < low:
        raise _Bad(f"{path} must be an int >= {low}, not {value!r}")
    return int(value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{path} must be a string, not {value!r}")
    return value


def _dict(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{path} must be an object, not {value!r}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"{path} must be a list, not {value!r}")
    return value


def _field(entry: dict[str, Any], key: str, path: str) -> Any:
    if key not in entry:
        raise _Bad(f"{path}.{key} is missing")
    return entry[key]


def _time(value: Any, path: str) -> None:
    """A time as :func:`~deltaflow.framework.durable.store.encode_time` writes it."""
    if isinstance(value, list):
        if len(value) != 2:
            raise _Bad(f"{path} must be a time (an int, or a pair of times), not {value!r}")
        _time(value[0], path)
        _time(value[1], path)
    else:
        _int(value, path)


def _each(value: Any, path: str, check: Callable[[Any, str], None]) -> None:
    for key, item in _dict(value, path).items():
        check(item, f"{path}[{key!r}]")


def _ref(ref: Any, path: str, files: dict[str, Any]) -> None:
    ref = _dict(ref, path)
    name = _str(_field(ref, "file", path), f"{path}.file")
    if name not in files:
        raise _Bad(f"{path}.file {name!r} is not among the manifest's files")
    parts = _list(_field(ref, "parts", path), f"{path}.parts")
    if not parts:
        raise _Bad(f"{path}.parts is empty")
    for part in parts:
        if not isinstance(part, list) or len(part) != 2:
            raise _Bad(f"{path}.parts must hold [offset, length] pairs, not {part!r}")
        _int(part[0], f"{path}.parts offset")
        _int(part[1], f"{path}.parts length", 1)
    for key in ("keys", "log"):
        if key in ref:
            _int(ref[key], f"{path}.{key}")
    if "partial" in ref and ref["partial"].__class__ is not bool:
        raise _Bad(f"{path}.partial must be true or false, not {ref['partial']!r}")


def _table(table: Any, path: str, files: dict[str, Any]) -> None:
    table = _dict(table, path)
    kind = _field(table, "kind", path)
    if kind not in ("index", "rows"):
        raise _Bad(f"{path}.kind must be 'index' or 'rows', not {kind!r}")
    key = table.get("key")
    if key is not None:
        _str(key, f"{path}.key")
    for worker, refs in _dict(_field(table, "workers", path), f"{path}.workers").items():
        if not worker.isdigit():
            raise _Bad(f"{path}.workers has {worker!r} where a worker number goes")
        for i, ref in enumerate(_list(refs, f"{path}.workers[{worker!r}]")):
            _ref(ref, f"{path}.workers[{worker!r}][{i}]", files)


def _node(entry: Any, path: str, files: dict[str, Any]) -> None:
    entry = _dict(entry, path)
    for name, table in _dict(entry.get("tables", {}), f"{path}.tables").items():
        _table(table, f"{path}.tables[{name!r}]", files)
    values = _dict(entry.get("values", {}), f"{path}.values")
    if "upper" in values:  # an arrangement's or a reduction's frontier
        _output({"frontier": values["upper"]}, f"{path}.values.upper")
    if "layout" in values:  # a delta rule's split: [its operator, of how many]
        layout = _list(values["layout"], f"{path}.values.layout")
        if len(layout) != 2:
            raise _Bad(f"{path}.values.layout must be [operator, operators], not {layout!r}")
        _int(layout[0], f"{path}.values.layout")
        _int(layout[1], f"{path}.values.layout", 1)
    for cap in _list(entry.get("caps", []), f"{path}.caps"):
        if not isinstance(cap, list) or len(cap) != 2:
            raise _Bad(f"{path}.caps must hold [port, time] pairs, not {cap!r}")
        _int(cap[0], f"{path}.caps port")
        _time(cap[1], f"{path}.caps time")


def _account(value: Any, path: str) -> None:
    if value is not None:
        entry = _dict(value, path)
        for field, n in _dict(_field(entry, "counts", path), f"{path}.counts").items():
            _int(n, f"{path}.counts[{field!r}]")
        _str(_field(entry, "rejected", path), f"{path}.rejected")


def _file(info: Any, path: str) -> None:
    info = _dict(info, path)
    _int(_field(info, "bytes", path), f"{path}.bytes")
    crc = _int(_field(info, "crc32", path), f"{path}.crc32")
    if crc >= 1 << 32:
        raise _Bad(f"{path}.crc32 must be a CRC-32, not {crc!r}")


def _input(info: Any, path: str) -> None:
    closed = _dict(info, path).get("closed", False)
    if closed.__class__ is not bool:
        raise _Bad(f"{path}.closed must be true or false, not {closed!r}")


def _output(info: Any, path: str) -> None:
    for t in _list(_field(_dict(info, path), "frontier", path), f"{path}.frontier"):
        _time(t, f"{path}.frontier")


def _code(code: Any, path: str) -> None:
    code = _dict(code, path)
    _str(_field(code, "python", path), f"{path}.python")
    for node, entry in _dict(_field(code, "operators", path), f"{path}.operators").items():
        where = f"{path}.operators[{node!r}]"
        entry = _dict(entry, where)
        _str(_field(entry, "name", where), f"{where}.name")
        _str(_field(entry, "digest", where), f"{where}.digest")


def check_fields(manifest: dict[str, Any], sequence: int, where: str) -> None:
    """Check that every field a resume reads is there and of its type (``sequence``: the
    number in the manifest's file name, ``where`` names it in messages).

    Raises:
        CheckpointError: a field is missing or of another type (naming it).
    """
    try:
        if _int(_field(manifest, "sequence", "manifest"), "manifest.sequence") != sequence:
            raise _Bad(f"manifest.sequence is {manifest['sequence']!r}, its name says {sequence}")
        _int(_field(manifest, "time", "manifest"), "manifest.time")
        _int(_field(manifest, "workers", "manifest"), "manifest.workers", 1)
        _str(_field(manifest, "fingerprint", "manifest"), "manifest.fingerprint")
        files = _dict(_field(manifest, "files", "manifest"), "manifest.files")
        _each(files, "manifest.files", _file)
        _each(_field(manifest, "inputs", "manifest"), "manifest.inputs", _input)
        _each(_field(manifest, "outputs", "manifest"), "manifest.outputs", _output)
        nodes = _field(manifest, "nodes", "manifest")
        _each(nodes, "manifest.nodes", lambda entry, path: _node(entry, path, files))
        if "code" in manifest or manifest["version"] >= SEALED:
            _code(_field(manifest, "code", "manifest"), "manifest.code")
        if "sources" in manifest:  # (each offset is the source's own JSON value)
            _dict(manifest["sources"], "manifest.sources")
        for key in ("accounts", "spark_inputs"):  # each input's counts (a Spark driver's)
            if key in manifest:
                _each(manifest[key], f"manifest.{key}", _account)
    except _Bad as exc:
        msg = f"{where} is damaged: {exc}"
        raise CheckpointError(msg) from None
