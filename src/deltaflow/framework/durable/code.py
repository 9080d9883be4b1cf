"""Digests of the code a pipeline's operators run, so a resume notices changed code.

A checkpoint's state was made by particular functions: resumed under others (a lambda that
now makes ints where it made strings), the state would silently disagree with everything
computed after. So a checkpoint keeps, per operator, a digest of what the operator runs, and
a resume compares them.

What a digest covers, for a function of the user's code: its bytecode, constants (nested
code objects recursively), the names it uses, its defaults, the values of its closure's
cells, and the globals its code names (functions and classes recursively, modules by name,
plain values, tuples and frozensets by value, any other object, such as a module's dict or
list, by its type: those are caches and registries more often than code): a helper changed,
a module constant changed, a captured parameter or table changed all change the digest. It
is taken when a job opens its location, before any data flows. Values are encoded
structurally: containers element by element (sets and dicts in the order of their elements'
encodings), numbers and strings by value, user objects by their type and attributes, numpy
arrays by dtype, shape and bytes, other objects of libraries by their pickle (or their type
alone if they have none).

What it leaves out, on purpose:

* where code is: file names and line numbers (a function moved, or code added above it,
  resumes), and the names functions are defined under (a docstring, being a constant of
  the code, counts);
* the code of deltaflow and of installed packages (the standard library, anything under
  ``site-packages``): only their qualified names, and the values their closures captured
  (which hold the user's functions). Upgrading a library is not a change of the pipeline;
  a user function installed as a package is named, not read.

It never uses ``id()``, addresses, ``hash()`` or ``repr`` of arbitrary objects, so it is the
same in every process and run, whatever ``PYTHONHASHSEED``; it does depend on the Python
version (bytecode changes between versions: :func:`python_version` is kept beside it, and
a resume under another version says so).

    >>> one, two = (lambda x: x + 1).__code__, (lambda x: x + 2).__code__
    >>> digest(one) == digest((lambda y: y + 1).__code__), digest(one) == digest(two)
    (False, False)
    >>> digest(one) == digest((lambda x: x + 1).__code__)
    True
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import pickle
import re
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["ENCODING", "digest", "functions_digest", "python_version"]

#: The version of the encoding the digests are of: a checkpoint whose digests were made by
#: another cannot be compared (a resume says so, and goes on).
ENCODING = 1

_LINE = re.compile(r":\d+")
#: deltaflow's objects that are the graph's plumbing (wiring already in the structural
#: fingerprint, or state): named by their type alone.
_PLUMBING = frozenset(
    {
        "Antichain",
        "Arranged",
        "Collection",
        "DataflowBuilder",
        "IndexRegistry",
        "InputFeed",
        "LoopScope",
        "OutputStore",
        "ProbeHandle",
        "Scope",
        "Tally",
        "TraceRegistry",
        "Variable",
    }
)


def python_version() -> str:
    """``"3.11"``: the Python whose bytecode the digests are of."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def digest(*values: Any) -> str:
    """The hex SHA-256 of ``values`` (functions, or anything holding them), encoded as the
    module's doc says."""
    return _Encoder().digest(values)


def functions_digest(*values: Any) -> str:
    """The hex SHA-256 of the set of the user's functions reached from ``values`` (each
    digested as :func:`digest` does), whatever holds them: for operators that a layout
    splits into parts (one with one worker, several with more), the same set either way.

    >>> f = lambda x: x
    >>> functions_digest([f], [[f]]) == functions_digest([[f]])
    True
    """
    encoder = _Encoder()
    found: dict[bytes, None] = {}
    for fn in _reached(values, set()):
        found[encoder._sub(fn)] = None
    return hashlib.sha256(b"".join(sorted(found))).hexdigest()


def _reached(value: Any, seen: set[int]) -> list[types.FunctionType]:
    """The user's functions reached from ``value`` through containers, closures, defaults,
    partials, methods and deltaflow's records (not through plumbing, nor into user code)."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    kind = type(value)
    if kind is types.FunctionType:
        if not _is_library(getattr(value, "__module__", None) or ""):
            return [value]
        inner: list[Any] = [c.cell_contents for c in value.__closure__ or () if _full(c)]
        return _reached([inner, value.__defaults__, value.__kwdefaults__], seen)
    if kind in (tuple, list, set, frozenset):
        return [f for v in value for f in _reached(v, seen)]
    if kind is dict:
        return [f for v in value.values() for f in _reached(v, seen)]
    if kind is types.MethodType:
        return _reached([value.__func__, value.__self__], seen)
    if kind is functools.partial:
        return _reached([value.func, value.args, value.keywords], seen)
    module = kind.__module__ or ""
    if module.startswith("deltaflow") and kind.__name__ not in _PLUMBING and attrs.has(kind):
        return _reached([getattr(value, f.name, None) for f in attrs.fields(kind)], seen)
    return []


def _full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


@functools.cache
def _library_paths() -> tuple[str, ...]:
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


@functools.cache
def _is_library(module: str) -> bool:
    """Whether ``module`` is deltaflow, the standard library or an installed package (its
    code named, not read)."""
    top = module.partition(".")[0]
    if top in ("deltaflow", "builtins") or top in getattr(sys, "stdlib_module_names", ()):
        return True
    if module == "__main__":
        return False
    file = getattr(sys.modules.get(module), "__file__", None)
    if not file:
        return top in sys.builtin_module_names
    path = os.path.realpath(file)
    return any(path.startswith(p) for p in _library_paths()) or "site-packages" in path


class _Encoder:
    """Feeds tokens of values into one hash; each container's elements are sub-digests."""

    def __init__(self) -> None:
        self._active: set[int] = set()  # (cycle guard only: never hashed)
        self._memo: dict[int, bytes] = {}
        self._keep: list[Any] = []  # what the memo's ids belong to, alive while it is used

    def digest(self, value: Any) -> str:
        return self._sub(value).hex()

    def _sub(self, value: Any) -> bytes:
        key = id(value)
        done = self._memo.get(key)
        if done is not None:
            return done
        if key in self._active:
            return b"cycle"
        self._active.add(key)
        try:
            h = hashlib.sha256()
            self._encode(value, h.update)
        finally:
            self._active.discard(key)
        out = h.digest()
        self._memo[key] = out
        self._keep.append(value)
        return out

    def _token(self, feed: Callable[[bytes], None], tag: str, text: str | bytes = b"") -> None:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        feed(f"{tag}:{len(data)}:".encode() + data)

    def _part(self, value: Any) -> bytes:
        """``value`` as a self-delimiting piece of its container's encoding: a plain value
        by itself (cheap: tables captured by a function may hold millions), anything else
        by its sub-digest."""
        atom = _atom(value)
        return atom if atom is not None else b"D" + self._sub(value)

    def _items(self, feed: Callable[[bytes], None], tag: str, items: Any) -> None:
        self._token(feed, tag, str(len(items)))
        if len(items) > 16 and set(map(type, items)) <= _ATOMS:
            # (All plain values: marshal's version 2 writes them in order, without the
            # references later versions add for objects seen twice.)
            self._token(feed, "marshal", marshal.dumps(tuple(items), 2))
            return
        for item in items:
            feed(self._part(item))

    def _unordered(self, feed: Callable[[bytes], None], tag: str, parts: list[bytes]) -> None:
        self._token(feed, tag, str(len(parts)))
        for part in sorted(parts):
            feed(part)

    def _encode(self, value: Any, feed: Callable[[bytes], None]) -> None:
        kind = type(value)
        if value is None or kind in (bool, int, float, complex):
            self._token(feed, kind.__name__, repr(value))
        elif kind is str:
            self._token(feed, "str", value)
        elif kind in (bytes, bytearray):
            self._token(feed, "bytes", bytes(value))
        elif kind in (tuple, list):
            self._items(feed, kind.__name__, value)
        elif kind is dict:
            keys = set(map(type, value))
            if (
                len(value) > 16
                and (keys == {int} or keys == {str})
                and set(map(type, value.values())) <= _ATOMS
            ):
                # (A table of plain values, its keys of one orderable type: in key order.)
                self._token(feed, "table", marshal.dumps(tuple(sorted(value.items())), 2))
                return
            pairs = [self._part(k) + self._part(v) for k, v in value.items()]
            self._unordered(feed, "dict", pairs)
        elif kind in (set, frozenset):
            self._unordered(feed, "set", [self._part(v) for v in value])
        elif kind is types.CodeType:
            self._code(value, feed)
        elif kind is types.FunctionType:
            self._function(value, feed)
        elif kind is types.MethodType:
            self._token(feed, "method")
            feed(self._sub(value.__func__))
            feed(self._sub(value.__self__))
        elif kind is functools.partial:
            self._token(feed, "partial")
            self._items(feed, "args", [value.func, value.args, value.keywords])
        elif kind in (staticmethod, classmethod):
            self._token(feed, kind.__name__)
            feed(self._sub(value.__func__))
        elif kind is property:
            self._items(feed, "property", [value.fget, value.fset, value.fdel])
        elif isinstance(value, (types.BuiltinFunctionType, types.ModuleType)):
            self._token(feed, "named", _name_of(value))
        elif isinstance(value, type):
            self._class(value, feed)
        else:
            self._object(value, feed)

    def _code(self, code: types.CodeType, feed: Callable[[bytes], None]) -> None:
        self._token(feed, "code", code.co_code)
        for field in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags"):
            self._token(feed, field, str(getattr(code, field)))
        for field in ("co_names", "co_varnames", "co_freevars", "co_cellvars"):
            self._token(feed, field, "\0".join(getattr(code, field)))
        self._items(feed, "consts", list(code.co_consts))

    def _function(self, fn: types.FunctionType, feed: Callable[[bytes], None]) -> None:
        module = getattr(fn, "__module__", None) or ""
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell
                cells.append(None)
        if _is_library(module):
            # Named; what it captured (the user's functions, parameters) still counts. Its
            # labels carry line numbers of the user's code: left out, as everywhere.
            self._token(feed, "library function", f"{module}.{fn.__qualname__}")
            cells = [_LINE.sub("", c) if isinstance(c, str) else c for c in cells]
        else:
            self._token(feed, "function")
            feed(self._sub(fn.__code__))
            self._items(feed, "globals", _globals_used(fn))
        self._items(feed, "closure", cells)
        self._items(feed, "defaults", [fn.__defaults__, fn.__kwdefaults__])

    def _class(self, cls: type, feed: Callable[[bytes], None]) -> None:
        self._token(feed, "class", _name_of(cls))
        if not _is_library(cls.__module__):
            own = [(k, v) for k, v in vars(cls).items() if not k.startswith("__") or k in (
                "__init__", "__call__")]  # fmt: skip
            own.sort(key=lambda kv: kv[0])
            self._items(feed, "members", [v for kv in own for v in kv])

    def _object(self, value: Any, feed: Callable[[bytes], None]) -> None:
        cls = type(value)
        module = cls.__module__ or ""
        self._token(feed, "object", _name_of(cls))
        if module.startswith("deltaflow"):
            if cls.__name__ in _PLUMBING:
                return
            if attrs.has(cls):
                fields = [f.name for f in attrs.fields(cls)]
                self._items(feed, "fields", [getattr(value, f, None) for f in fields])
            return
        if not _is_library(module):
            state = dict(getattr(value, "__dict__", {}))
            for slot in getattr(cls, "__slots__", ()):
                if isinstance(slot, str) and hasattr(value, slot):
                    state[slot] = getattr(value, slot)
            feed(self._sub(state))
            return
        if module == "numpy" and hasattr(value, "tobytes"):
            self._token(feed, "array", f"{value.dtype}{value.shape}")
            self._token(feed, "data", value.tobytes())
            return
        try:
            self._token(feed, "pickle", pickle.dumps(value, protocol=4))
        except Exception:  # (unpicklable: its type alone, fed above)
            return


_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes})


def _atom(value: Any) -> bytes | None:
    """A plain value as a self-delimiting token, or ``None`` for anything else."""
    kind = type(value)
    if kind is str:
        data: bytes = value.encode("utf-8", "surrogatepass")
        return b"s%d:" % len(data) + data
    if kind is bytes:
        raw: bytes = value
        return b"b%d:" % len(raw) + raw
    if kind in _ATOMS:
        text = f"{kind.__name__}={value!r}".encode()
        return b"n%d:" % len(text) + text
    return None


def _name_of(value: Any) -> str:
    module = getattr(value, "__module__", None) or ""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", "?")
    return f"{module}.{name}" if module else str(name)


def _names_in(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_in(const)
    return names


def _globals_used(fn: types.FunctionType) -> list[Any]:
    """The globals ``fn``'s code (nested code included) names, as ``[name, value, ...]``
    sorted by name (names it uses as attributes only are not in its globals: left out)."""
    scope = fn.__globals__
    out: list[Any] = []
    for name in sorted(_names_in(fn.__code__)):
        if name in scope:
            out += [name, _as_global(scope[name])]
    return out


_CODE_LIKE = (types.FunctionType, type, types.ModuleType, types.BuiltinFunctionType,
              functools.partial)  # fmt: skip


def _as_global(value: Any) -> Any:
    """What of a global counts: code and constants (plain values, tuples, frozensets) as
    they are; any other object by its type alone. A module's dicts, lists and objects are
    state more often than code (a cache filled as the job runs, a registry), and counting
    their contents would refuse every resume after they changed."""
    kind = type(value)
    if isinstance(value, _CODE_LIKE) or kind in _ATOMS or kind in (tuple, frozenset):
        return value
    return ("global of type", _name_of(kind))
