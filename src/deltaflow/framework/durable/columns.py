"""Python values as Arrow columns and back: how durable state is written.

A checkpoint holds the keys, values, times and diffs an operator keeps, as columns. Each list
of Python values is written with the narrowest codec its values allow, chosen by looking at
every value's exact class:

* ``int`` (within 64 bits: in the narrowest integer type holding the column), ``float``,
  ``bool``: numpy-backed Arrow columns;
* ``str`` and ``bytes``: Arrow string and binary columns (strings with a lone surrogate,
  not UTF-8, are pickled);
* ``None`` only, or ``()`` only: a null column (no bytes at all);
* tuples of one length, and :class:`~deltaflow.framework.lattice.Product` times: a struct of
  one column per position, each with its own codec (so ``(int, str)`` pairs are two typed
  columns);
* anything else (mixed classes, big ints, user records): one pickle per value (loading it
  runs code, as loading the pipeline does: a checkpoint is trusted like the code).

A column with few distinct values (times, after compaction) can be written as a dictionary:
its distinct values once, and an ``int32`` code per row; read back, the rows share one Python
object per distinct value.

The codec travels in the field's metadata (``deltaflow``: a small JSON tree), so a column
reads back with no schema on the side, and a codec this version does not know is an error,
not a guess.

    >>> col = encode_column([(1, "a"), (2, "b")])
    >>> col.type
    StructType(struct<0: int8, 1: large_string>)
    >>> decode_column(col.array, col.spec)
    [(1, 'a'), (2, 'b')]
    >>> from deltaflow.framework.lattice import Product
    >>> times = encode_column([Product(3, 0), Product(3, 1), Product(3, 0)], dictionary=True)
    >>> decode_column(times.array, times.spec)
    [Product(outer=3, inner=0), Product(outer=3, inner=1), Product(outer=3, inner=0)]
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import attrs
import cloudpickle  # type: ignore[import-untyped]
import numpy as np

from ..kernels import use_kernel
from ..lattice import Product, new_tuple
from ..time_domain import TimeDomain, domain_of
from ..tuning import DICTIONARY_RATIO, PACK_CHUNK, VECTOR_MIN

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Column",
    "arrow_of",
    "columns_of",
    "decode_column",
    "encode_column",
    "field_of",
    "int64_of",
    "numpy_of",
    "prepared",
    "spec_of",
]


def _arrow() -> Any:
    """pyarrow, imported when state is first written or read (``import deltaflow`` stays
    free of it)."""
    import pyarrow

    return pyarrow


# Arrays are made from (and read into) numpy through their buffers: ``pyarrow.array`` and
# ``Array.to_numpy`` would import pandas when it is installed, a third of a second.
_ARROW_TYPES = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float64": "float64",
}


def arrow_of(values: np.ndarray[Any, Any]) -> Any:
    """An Arrow array of a one-dimensional numpy array of ints (8 to 64 bits), ``float64``
    or ``bool`` (no copy but for booleans, which Arrow packs into bits).

    >>> arrow_of(np.array([True, False])).to_pylist(), arrow_of(np.arange(2)).type
    ([True, False], DataType(int64))
    """
    pa = _arrow()
    n = len(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    kind = getattr(pa, _ARROW_TYPES[values.dtype.name])()
    data = np.ascontiguousarray(values)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(data)])


def numpy_of(array: Any) -> np.ndarray[Any, Any]:
    """The values of an Arrow array of ints, floats or booleans (with no nulls) as numpy.

    >>> numpy_of(arrow_of(np.array([3, 4, 5])).slice(1)).tolist()
    [4, 5]
    """
    n = len(array)
    buffer = array.buffers()[1]
    if str(array.type) == "bool":
        if buffer is None:
            return np.zeros(0, dtype=np.bool_)
        bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
        return bits[array.offset : array.offset + n].astype(np.bool_)
    dtype = np.dtype(str(array.type).replace("double", "float64"))
    if buffer is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buffer, dtype=dtype, count=n, offset=array.offset * dtype.itemsize)


def _narrowest(ints: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``ints`` in the narrowest integer type holding them all (fewer bytes to compress,
    write and read; read back, they are Python ints all the same)."""
    if not len(ints):
        return ints
    lo, hi = int(ints.min()), int(ints.max())
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return ints.astype(dtype)
    return ints


def _text(values: Sequence[Any], kind: Any, encode: bool) -> Any:
    """A large string (``encode``: of ``str``) or binary Arrow array of ``values``."""
    pa = _arrow()
    raw = [v.encode("utf-8") for v in values] if encode else list(values)
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)), out=offsets[1:])
    data = pa.py_buffer(b"".join(raw))
    return pa.Array.from_buffers(kind, len(raw), [None, pa.py_buffer(offsets), data])


def _text_at_once(values: Sequence[str]) -> Any:
    """A large string Arrow array of ``values`` made in a few passes over them in C, not an
    encoding per value: their concatenation, when ASCII, is the array's data as it is, and
    each string's length its length in bytes; ``None`` when some string is not ASCII (the
    general path, :func:`_text`, encodes those one by one).

    >>> _text_at_once(["ab", "", "c"]).to_pylist(), _text_at_once(["é"])
    (['ab', '', 'c'], None)
    """
    joined = "".join(values)
    if not joined.isascii():
        return None
    pa = _arrow()
    n = len(values)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=offsets[1:])
    data = pa.py_buffer(joined.encode("ascii"))
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), data])


@attrs.frozen
class Column:
    """An encoded column: the Arrow array and the codec (``spec``) that reads it back."""

    array: Any
    spec: dict[str, Any]

    @property
    def type(self) -> Any:
        """The Arrow type of the column."""
        return self.array.type


def columns_of(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The ``width`` columns of row tuples, each a list: the rows' items as one flat list,
    each column a slice of it (copies in C: no tuple is built per row, and in a large heap
    each pass over the rows costs a cache miss per row whatever it does).

    >>> columns_of([(1, "a"), (2, "b")], 2)
    [[1, 2], ['a', 'b']]
    """
    if width == 1:
        return [[row[0] for row in rows]]
    flat = list(chain.from_iterable(rows))
    if len(flat) != width * len(rows):
        msg = f"rows of {width} columns expected, got {len(flat)} items in {len(rows)} rows"
        raise ValueError(msg)
    return [flat[j::width] for j in range(width)]


def int64_of(values: Sequence[Any]) -> np.ndarray[Any, Any]:
    """Python ints as an ``int64`` array (``struct.pack`` converts an int in a third of the
    instructions ``numpy.asarray`` takes, and refuses floats and strings where numpy would
    truncate or parse them).

    Raises:
        struct.error: a value is not an int, or not within 64 bits.

    >>> int64_of([1, -2, 3]).tolist()
    [1, -2, 3]
    """
    n = len(values)
    out = np.empty(n, dtype=np.int64)
    for lo in range(0, n, PACK_CHUNK):
        part = values[lo : lo + PACK_CHUNK]
        k = len(part)
        out[lo : lo + k] = np.frombuffer(struct.pack(f"{k}q", *part), dtype=np.int64)
    return out


def prepared(column: list[Any], kind: str | None, domain: TimeDomain | None = None) -> Any:
    """A column whose values the caller knows the shape of (``kind``) straight into numpy:
    ``"int"`` (diffs and counts, ints by the operators' invariants) an ``int64`` array,
    ``"time"`` the times' columns by their domain's codec (:meth:`TimeDomain.to_columns`:
    an ``int64`` array of int times, an ``(n, 2)`` one of ``Product(int, int)`` times; a
    state's own times, whose classes the inputs checked); ``domain`` is the saving
    operator's, else the domain of the first time's shape (one test per column). A column
    that turns out otherwise (big ints, nested products, a time of another class), or of
    no known kind, stays the list it is.

    >>> from deltaflow.framework.lattice import Product
    >>> prepared([Product(2, 3), Product(5, 6)], "time").tolist()
    [[2, 3], [5, 6]]
    >>> prepared(["a"], None)
    ['a']
    """
    if kind is None or not column:
        return column
    if kind == "time":
        codec = domain_of(column[0]) if domain is None else domain
        times = codec.to_columns(column, own=True)
        return column if times is None else times
    if column[0].__class__ is int:
        try:
            return int64_of(column)
        except struct.error:
            pass  # (not all of them: the list)
    return column


def encode_column(
    values: Sequence[Any] | np.ndarray[Any, Any], *, dictionary: bool = False
) -> Column:
    """``values`` as an Arrow array with the narrowest codec they allow (module docstring).

    ``values`` may be a numpy array from :func:`prepared`: ``int64`` (ints), or ``(n, 2)``
    (``Product(int, int)`` times).

    ``dictionary``: write the distinct values once and a code per row when there are few
    (at most one per :data:`DICTIONARY_RATIO` rows).

    >>> encode_column([1, 2, 3]).spec, encode_column([1, "a"]).spec
    ({'k': 'int'}, {'k': 'pickle'})
    """
    pa = _arrow()
    if isinstance(values, np.ndarray):
        return _encode_array(pa, values)
    n = len(values)
    first = values[0] if n else None
    listed = values if isinstance(values, list) else list(values)
    if first.__class__ is tuple and not first and listed.count(()) == n:
        return Column(pa.nulls(n), {"k": "unit"})
    classes = set(map(type, values))
    if dictionary and n >= DICTIONARY_RATIO and len(classes) == 1:
        # (Values of one class only: a set would merge ``1`` and ``True``.)
        try:
            distinct = list(set(values))
        except TypeError:  # an unhashable value: no dictionary
            distinct = list(values)
        if len(distinct) * DICTIONARY_RATIO <= n:
            codes = {v: i for i, v in enumerate(distinct)}
            index = np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=n)
            words = encode_column(distinct)
            array = pa.DictionaryArray.from_arrays(arrow_of(index), words.array)
            return Column(array, {"k": "dict", "v": words.spec})
    if len(classes) == 1:
        cls = next(iter(classes))
        encoded = _encode_uniform(pa, cls, values)
        if encoded is not None:
            return encoded
    elif not classes:
        return Column(pa.nulls(0), {"k": "none"})
    return _pickled(pa, values)


def _encode_array(pa: Any, values: np.ndarray[Any, Any]) -> Column:
    """A column :func:`prepared` made into numpy: ints, or product times as pairs of ints."""
    if values.ndim == 1:
        return Column(arrow_of(_narrowest(values)), {"k": "int"})
    parts = [Column(arrow_of(_narrowest(values[:, j])), {"k": "int"}) for j in range(2)]
    return Column(_struct(pa, parts, ("outer", "inner")), {"k": "product", "c": _specs(parts)})


def _encode_uniform(pa: Any, cls: type, values: Sequence[Any]) -> Column | None:
    """``values``, all of class ``cls``, in that class's codec (``None``: it has none)."""
    if cls is int:
        try:
            ints = int64_of(values)
        except struct.error:
            return None
        return Column(arrow_of(_narrowest(ints)), {"k": "int"})
    if cls is float:
        return Column(arrow_of(np.asarray(values, dtype=np.float64)), {"k": "float"})
    if cls is bool:
        return Column(arrow_of(np.asarray(values, dtype=np.bool_)), {"k": "bool"})
    if cls is str:
        at_once = _text_at_once(values) if use_kernel(len(values), threshold=VECTOR_MIN) else None
        if at_once is not None:
            return Column(at_once, {"k": "str"})
        try:
            return Column(_text(values, pa.large_string(), True), {"k": "str"})
        except UnicodeEncodeError:
            return None  # a lone surrogate: not UTF-8, so not an Arrow string (a pickle)
    if cls is bytes:
        return Column(_text(values, pa.large_binary(), False), {"k": "bytes"})
    if cls is type(None):
        return Column(pa.nulls(len(values)), {"k": "none"})
    if cls is Product:
        parts = [
            encode_column([t[0] for t in values]),
            encode_column([t[1] for t in values]),
        ]
        return Column(_struct(pa, parts, ("outer", "inner")), {"k": "product", "c": _specs(parts)})
    if cls is tuple:
        lengths = set(map(len, values))
        if len(lengths) != 1:
            return None
        arity = lengths.pop()
        if arity == 0:
            return Column(pa.nulls(len(values)), {"k": "unit"})
        if use_kernel(len(values), threshold=VECTOR_MIN):
            parts = _sliced_parts(values, arity)
        else:
            parts = _int_parts(values, arity) or [
                encode_column(part) for part in columns_of(values, arity)
            ]
        names = tuple(str(i) for i in range(arity))
        return Column(_struct(pa, parts, names), {"k": "tuple", "c": _specs(parts)})
    return None


def _int_parts(values: Sequence[tuple[Any, ...]], arity: int) -> list[Column] | None:
    """Tuples of ``arity`` plain ints (keys of pairs, say) as one int column per position,
    read off one flat list of their items (a transposition costs a pass per row and
    position); ``None`` when an item is not a plain int within 64 bits.

    >>> [c.array.to_pylist() for c in _int_parts([(1, 2), (3, 4)], 2)]
    [[1, 3], [2, 4]]
    >>> _int_parts([(1, True)], 2) is None
    True
    """
    flat = list(chain.from_iterable(values))
    if set(map(type, flat)) != {int}:
        return None
    try:
        ints = int64_of(flat).reshape(len(values), arity)
    except struct.error:
        return None
    return [Column(arrow_of(_narrowest(ints[:, j])), {"k": "int"}) for j in range(arity)]


def _sliced_parts(values: Sequence[tuple[Any, ...]], arity: int) -> list[Column]:
    """Tuples of ``arity`` items each as one column per position: one flat list of all
    their items, and each position a slice of it (copies in C, no loop over the rows in
    Python); positions all of plain ints go to :func:`int64_of` at once.

    >>> [c.array.to_pylist() for c in _sliced_parts([(1, "a"), (2, "b")], 2)]
    [[1, 2], ['a', 'b']]
    """
    flat = list(chain.from_iterable(values))
    if all(v.__class__ is int for v in values[0]) and set(map(type, flat)) == {int}:
        try:
            ints = int64_of(flat).reshape(len(values), arity)
        except struct.error:
            pass  # (an int beyond 64 bits: each position finds its own codec)
        else:
            return [Column(arrow_of(_narrowest(ints[:, j])), {"k": "int"}) for j in range(arity)]
    return [encode_column(flat[j::arity]) for j in range(arity)]


def _specs(parts: list[Column]) -> list[dict[str, Any]]:
    return [p.spec for p in parts]


def _struct(pa: Any, parts: list[Column], names: tuple[str, ...]) -> Any:
    fields = [pa.field(name, p.array.type) for name, p in zip(names, parts)]
    return pa.StructArray.from_arrays([p.array for p in parts], fields=fields)


def _pickled(pa: Any, values: Sequence[Any]) -> Column:
    # cloudpickle: a value of a class defined in the user's script (``__main__``) reads
    # back in any process, as the pipeline itself does.
    dumps = cloudpickle.dumps
    return Column(_text([dumps(v, 5) for v in values], pa.large_binary(), False), {"k": "pickle"})


def decode_column(array: Any, spec: dict[str, Any]) -> list[Any]:
    """The Python values of a column written by :func:`encode_column` with codec ``spec``.

    Raises:
        ValueError: ``spec`` names a codec this version does not know.

    >>> c = encode_column([(), ()])
    >>> decode_column(c.array, c.spec)
    [(), ()]
    """
    pa = _arrow()
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = spec.get("k")
    n = len(array)
    if kind in ("int", "float", "bool"):
        values: list[Any] = numpy_of(array).tolist()
        return values
    if kind in ("str", "bytes"):
        return array.to_pylist()  # type: ignore[no-any-return]
    if kind == "none":
        return [None] * n
    if kind == "unit":
        return [()] * n
    if kind == "pickle":
        loads = pickle.loads
        return [loads(b) for b in array.to_pylist()]
    if kind == "dict":
        distinct = decode_column(array.dictionary, spec["v"])
        return [distinct[i] for i in numpy_of(array.indices).tolist()]
    if kind == "product":
        specs = spec["c"]
        if specs == [_INT, _INT]:
            return _products(numpy_of(array.field(0)), numpy_of(array.field(1)))
        outer, inner = (decode_column(array.field(i), s) for i, s in enumerate(specs))
        return [new_tuple(Product, pair) for pair in zip(outer, inner)]
    if kind == "tuple":
        parts = [decode_column(array.field(i), s) for i, s in enumerate(spec["c"])]
        if len(parts) == 1:
            return [(v,) for v in parts[0]]
        return list(zip(*parts)) if n else []
    msg = f"unknown column codec {json.dumps(spec)} (written by a newer deltaflow?)"
    raise ValueError(msg)


_INT = {"k": "int"}


def _products(outer: np.ndarray[Any, Any], inner: np.ndarray[Any, Any]) -> list[Any]:
    """``Product(outer[i], inner[i])`` for each row, one object per distinct pair (the times
    of a compacted state are few: the rows share them, as they did when saved).

    >>> ps = _products(np.array([1, 1, 2]), np.array([0, 0, 5]))
    >>> ps, ps[0] is ps[1]
    ([Product(outer=1, inner=0), Product(outer=1, inner=0), Product(outer=2, inner=5)], True)
    """
    n = len(outer)
    if not n:
        return []
    o = outer.astype(np.int64)
    i = inner.astype(np.int64)
    if (
        int(o.min()) >= 0
        and int(o.max()) < 1 << 31
        and int(i.min()) >= 0
        and int(i.max()) < 1 << 32
    ):
        keys = (o << 32) | i
        distinct, where = np.unique(keys, return_inverse=True)
        made = [new_tuple(Product, (k >> 32, k & 0xFFFFFFFF)) for k in distinct.tolist()]
        return list(map(made.__getitem__, where.tolist()))
    cache: dict[tuple[int, int], Any] = {}
    return [cache.setdefault(p, new_tuple(Product, p)) for p in zip(o.tolist(), i.tolist())]


def field_of(name: str, column: Column) -> pa.Field:
    """The Arrow field for ``column`` named ``name``, its codec in the field's metadata."""
    pa = _arrow()
    return pa.field(name, column.array.type, metadata={"deltaflow": json.dumps(column.spec)})


def spec_of(field: pa.Field) -> dict[str, Any]:
    """The codec :func:`field_of` put in ``field``'s metadata.

    Raises:
        ValueError: the field carries none (not written by deltaflow).
    """
    meta = field.metadata or {}
    raw = meta.get(b"deltaflow")
    if raw is None:
        msg = f"column {field.name!r} carries no deltaflow codec"
        raise ValueError(msg)
    spec: dict[str, Any] = json.loads(raw)
    return spec
