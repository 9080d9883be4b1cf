"""The shapes durable state takes: :class:`Rows` and :class:`Groups`, and their Arrow form.

What an operator keeps is, in the end, a few collections of updates. A checkpoint stores each
as one of two shapes, in plain Python lists on the operator's side and as Arrow record
batches on disk:

* :class:`Rows` — named columns of equal length: the updates a buffer holds, the batches of
  a trace. Rows written by several workers together are the table (they add up).
* :class:`Groups` — per distinct key, that key's rows: an in-memory index
  ``{key: [(val, time, diff), ...]}`` as the key column, a count per key, and the rows'
  columns in key order. A *partial* :class:`Groups` holds only the keys changed since the
  previous checkpoint (with their whole current rows) and the keys that disappeared
  (``deleted``): read after the groups it follows, it replaces those keys' rows. A *log*
  (:meth:`Rows.logged`, read with :func:`append_logged`) holds the rows appended to such an
  index since the previous checkpoint, each with its key: read after the groups, in order,
  it extends those keys' lists.

Either way the key of each row decides the worker that owns it (:func:`owners`, the same
routing as the exchanges), so a table written by one number of workers is read back by any
other: each reader keeps the rows its workers own.

A column named ``time`` is written as a dictionary (few distinct times after compaction).

    >>> g = Groups(["a", "b"], [2, 1], {"val": [1, 2, 3]})
    >>> dict(g.items())
    {'a': [(1,), (2,)], 'b': [(3,)]}
    >>> back = Groups.from_batch(g.to_batch())
    >>> back.keys, back.counts, back.columns
    (['a', 'b'], [2, 1], {'val': [1, 2, 3]})
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import accumulate, chain, compress
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..hashing import SELF_HASHED_BELOW, stable_hash
from .columns import (
    arrow_of,
    decode_column,
    encode_column,
    field_of,
    int64_of,
    numpy_of,
    prepared,
    spec_of,
)

if TYPE_CHECKING:
    from ..time_domain import TimeDomain

__all__ = ["Groups", "Rows", "append_logged", "append_rows", "owners"]

#: Columns written as dictionaries (few distinct values).
DICTIONARY_COLUMNS = frozenset({"time"})
#: What the columns of these names hold, whichever table they are in: ints (diffs and
#: counts), times (see :func:`.columns.gather`).
KINDS = {"diff": "int", "count": "int", "time": "time"}


def _record_batch(columns: dict[str, list[Any]], n: int) -> Any:
    import pyarrow as pa

    fields = []
    arrays = []
    for name, values in columns.items():
        col = encode_column(values, dictionary=name in DICTIONARY_COLUMNS)
        fields.append(field_of(name, col))
        arrays.append(col.array)
    if not fields:  # a table of no columns still has a length
        schema = pa.schema([pa.field("_", pa.null())])
        return pa.RecordBatch.from_arrays([pa.nulls(n)], schema=schema)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _columns_of(batch: Any, take: Any = None) -> dict[str, list[Any]]:
    """The Python columns of a record batch written by :func:`_record_batch` (only the rows
    at positions ``take``, when given)."""
    if take is not None:
        batch = batch.take(arrow_of(np.asarray(take, dtype=np.int64)))
    return {
        field.name: decode_column(batch.column(i), spec_of(field))
        for i, field in enumerate(batch.schema)
        if field.name != "_"
    }


@attrs.define
class Rows:
    """Rows as named columns of equal length (module docstring).

    >>> Rows.from_batch(Rows({"key": [1, 2], "time": [0, 0]}).to_batch()).columns
    {'key': [1, 2], 'time': [0, 0]}
    """

    columns: dict[str, list[Any]]

    def __len__(self) -> int:
        for values in self.columns.values():
            return len(values)
        return 0

    def to_batch(self) -> Any:
        """An Arrow record batch of the rows."""
        return _record_batch(self.columns, len(self))

    @classmethod
    def from_batch(cls, batch: Any, take: Any = None) -> Rows:
        """The rows of a record batch from :meth:`to_batch` (those at ``take`` if given)."""
        return cls(_columns_of(batch, take))

    @classmethod
    def logged(
        cls,
        keys: list[Any],
        columns: Sequence[list[Any]],
        names: tuple[str, ...],
        domain: TimeDomain | None = None,
    ) -> Rows:
        """A log of rows appended to an index: column ``key`` (each row's key), then the
        ``columns`` of the rows, named ``names`` (prepared as :meth:`Groups.from_index`
        does, times by ``domain``'s codec).

        >>> Rows.logged(["k", "j"], [[1, 2], [0, 0], [1, -1]], ("val", "time", "diff")).columns
        {'key': ['k', 'j'], 'val': [1, 2], 'time': array([0, 0]), 'diff': array([ 1, -1])}
        """
        prepared_columns: dict[str, Any] = {"key": keys}
        for name, values in zip(names, columns):
            prepared_columns[name] = prepared(values, KINDS.get(name), domain)
        return cls(prepared_columns)

    @classmethod
    def concat(cls, parts: list[Rows]) -> Rows:
        """One table of several with the same columns."""
        if len(parts) == 1:
            return parts[0]
        names: list[str] = []
        for p in parts:
            names = list(p.columns)
            if names:
                break
        return cls({name: [v for p in parts for v in p.columns.get(name, ())] for name in names})


@attrs.define
class Groups:
    """Keys, each with its rows (module docstring).

    Attributes:
        keys: the distinct keys, in the order their rows come.
        counts: how many rows each key has (``>= 1``).
        columns: the rows' columns, the rows of ``keys[0]`` first.
        deleted: keys whose rows are gone (only in a partial snapshot).
        partial: whether this holds only what changed since the previous snapshot.
    """

    keys: list[Any]
    counts: list[int]
    columns: dict[str, list[Any]]
    deleted: list[Any] = attrs.field(factory=list)
    partial: bool = False

    def __len__(self) -> int:
        """How many rows."""
        return sum(self.counts)

    def items(self) -> Iterable[tuple[Any, list[tuple[Any, ...]]]]:
        """Each key with its rows as tuples (in column order).

        >>> list(Groups([7], [2], {"v": [1, 2], "d": [1, -1]}).items())
        [(7, [(1, 1), (2, -1)])]
        """
        return zip(self.keys, self._lists())

    def _lists(self) -> list[list[tuple[Any, ...]]]:
        """Each key's rows, as a list of row tuples."""
        rows = list(zip(*self.columns.values())) if self.columns else [()] * len(self)
        ends = list(accumulate(self.counts))
        return [rows[a:b] for a, b in zip([0, *ends], ends)]

    @classmethod
    def from_index(
        cls,
        index: Mapping[Any, Any],
        names: tuple[str, ...],
        keys: Iterable[Any] | None = None,
        rows: Callable[[Any], Collection[tuple[Any, ...]]] | None = None,
        *,
        single: bool = False,
        domain: TimeDomain | None = None,
    ) -> Groups:
        """The groups of an index ``{key: value}`` whose ``rows(value)`` (default: the value
        itself) are row tuples holding the columns ``names``; of ``keys`` only, when given
        (those missing from the index are ``deleted``, and the groups partial). ``single``:
        each value is the one column of the key's one row. ``domain``: the times' (a column
        ``time`` goes through its codec; by default the first time's shape's).

        >>> g = Groups.from_index({"k": [(1, 0, 1)]}, ("val", "time", "diff"))
        >>> Groups.from_batch(g.to_batch()).columns
        {'val': [1], 'time': [0], 'diff': [1]}
        >>> items = lambda d: list(d.items())
        >>> g = Groups.from_index({"a": {"x": 2}}, ("val", "count"), ["a", "b"], items)
        >>> g.keys, g.columns["val"], g.deleted, g.partial
        (['a'], ['x'], ['b'], True)
        """
        deleted: list[Any] = []
        partial = keys is not None
        lists: list[Any]
        if keys is None:
            keys = list(index)
            lists = list(index.values())
        else:
            # (Looked up in C, one pass per step: a few changed keys of many, or most.)
            keys = list(keys)
            lists = list(map(index.get, keys))
            there = list(map(bool, lists))
            if not all(there):
                gone = [not t for t in there]
                deleted = list(compress(keys, gone))
                keys = list(compress(keys, there))
                lists = list(compress(lists, there))
        if single:
            return cls(keys, [1] * len(keys), {names[0]: lists}, deleted, partial)
        if rows is not None:
            lists = list(map(rows, lists))
        counts = list(map(len, lists))
        # Every row's items in one flat list, each column a slice of it (no list of the rows
        # on the way: a checkpoint takes every changed key's rows).
        items = list(chain.from_iterable(chain.from_iterable(lists)))
        width = len(names)
        if len(items) != width * sum(counts):
            msg = f"rows of {width} columns {names} expected, got {len(items)} items"
            raise ValueError(msg)
        columns = {
            name: prepared(items[j::width], KINDS.get(name), domain) for j, name in enumerate(names)
        }
        return cls(keys, counts, columns, deleted, partial)

    def values(self, name: str) -> dict[Any, Any]:
        """``{key: value}`` of groups of one row each, ``value`` its column ``name``."""
        return dict(zip(self.keys, self.columns[name]))

    def to_index(self) -> dict[Any, list[tuple[Any, ...]]]:
        """``{key: [row tuple, ...]}`` (each list new)."""
        return dict(zip(self.keys, self._lists()))

    def to_batch(self) -> Any:
        """One Arrow record batch: per key (deleted ones too, with no rows) the key and the
        list of its rows (a struct of the row columns)."""
        import pyarrow as pa

        keys = encode_column([*self.keys, *self.deleted])
        counts = int64_of([*self.counts, *([0] * len(self.deleted))])
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        n = int(offsets[-1])
        children = {
            name: encode_column(values, dictionary=name in DICTIONARY_COLUMNS)
            for name, values in self.columns.items()
        }
        if children:
            fields = [pa.field(name, c.array.type) for name, c in children.items()]
            struct = pa.StructArray.from_arrays([c.array for c in children.values()], fields=fields)
        else:
            struct = pa.nulls(n)
        rows = pa.LargeListArray.from_arrays(arrow_of(offsets), struct)
        specs = json.dumps({name: c.spec for name, c in children.items()})
        schema = pa.schema([
            field_of("key", keys),
            pa.field("rows", rows.type, metadata={"deltaflow": json.dumps({"k": "rows"}),
                                                  "columns": specs}),
        ])  # fmt: skip
        return pa.RecordBatch.from_arrays([keys.array, rows], schema=schema)

    @classmethod
    def from_batch(cls, batch: Any, *, partial: bool = False) -> Groups:
        """The groups :meth:`to_batch` wrote (all of them)."""
        return GroupsReader(batch).take(None, partial=partial)


@attrs.define
class GroupsReader:
    """A :class:`Groups` segment as read from disk, decoded only as far as asked: its keys
    first (to find their owners and whether a newer segment replaces them), then the rows
    of the keys kept."""

    batch: Any
    keys: list[Any] = attrs.field(init=False)
    counts: Any = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        batch = self.batch
        self.keys = decode_column(batch.column(0), spec_of(batch.schema.field(0)))
        self.counts = np.diff(numpy_of(batch.column(1).offsets))

    def key_is_int(self) -> bool:
        """Whether the keys were written as plain ints."""
        return spec_of(self.batch.schema.field(0)).get("k") == "int"

    def take(self, mask: Any, *, partial: bool = False) -> Groups:
        """The groups (keys with rows) whose entry in the boolean array ``mask`` is set
        (``None``: all), rows decoded; a deleted key (one with no rows) is left out."""
        counts = self.counts
        live = counts > 0
        keep = live if mask is None else (mask & live)
        batch = self.batch if bool(keep.all()) else self.batch.filter(arrow_of(keep))
        keys = self.keys if batch is self.batch else list(compress(self.keys, keep.tolist()))
        rows = batch.column(1)
        field = batch.schema.field(1)
        specs: dict[str, Any] = json.loads((field.metadata or {})[b"columns"])
        # The rows of the groups kept, as the list column's child: ``flatten`` would do it
        # too, but imports all of pyarrow.compute.
        offsets = numpy_of(rows.offsets)
        first = int(offsets[0]) if len(offsets) else 0
        flat = rows.values.slice(first, int(offsets[-1]) - first if len(offsets) else 0)
        columns = {
            name: decode_column(flat.field(i), spec) for i, (name, spec) in enumerate(specs.items())
        }
        return Groups(keys, counts[keep].tolist(), columns, partial=partial)


def append_logged(index: dict[Any, list[tuple[Any, ...]]], log: Rows, take: Any = None) -> None:
    """Append the rows of ``log`` (:meth:`Rows.logged`; those at positions ``take`` only,
    when given) to their keys' lists in ``index``, in order.

    >>> index = {"k": [(1, 0, 1)]}
    >>> append_logged(index, Rows({"key": ["k", "j"], "val": [2, 3], "d": [1, 1]}))
    >>> index
    {'k': [(1, 0, 1), (2, 1)], 'j': [(3, 1)]}
    """
    columns = log.columns
    keys = columns["key"]
    rows = list(zip(*(values for name, values in columns.items() if name != "key")))
    if take is not None:
        picked = take.tolist()
        keys = [keys[i] for i in picked]
        rows = [rows[i] for i in picked]
    append_rows(index, keys, rows)


def append_rows(index: dict[Any, list[Any]], keys: list[Any], rows: list[Any]) -> None:
    """Append ``rows[i]`` to the list of ``keys[i]`` in ``index`` (made if missing), in order.

    >>> index = {"k": [1]}
    >>> append_rows(index, ["j", "k", "j"], [2, 3, 4])
    >>> index
    {'k': [1, 3], 'j': [2, 4]}
    """
    for key, row in zip(keys, rows):
        have = index.get(key)
        if have is None:
            index[key] = [row]
        else:
            have.append(row)


def owners(keys: list[Any], workers: int, *, ints: bool = False) -> Any:
    """The worker owning each key (``stable_hash(key) % workers``, as exchanges route), as a
    numpy array; ``ints``: the keys are known to be plain ints (computed in numpy).

    >>> owners([5, 6, "cat"], 2).tolist() == [1, 0, stable_hash("cat") % 2]
    True
    """
    if workers == 1:
        return np.zeros(len(keys), dtype=np.int64)
    if ints:
        arr = np.asarray(keys, dtype=np.int64)
        if len(arr) == 0 or (int(arr.min()) >= 0 and int(arr.max()) < SELF_HASHED_BELOW):
            return arr % workers
    below = SELF_HASHED_BELOW
    h = stable_hash
    return np.fromiter(
        ((k if k.__class__ is int and 0 <= k < below else h(k)) % workers for k in keys),
        dtype=np.int64,
        count=len(keys),
    )


def resolve_groups(
    chain: list[GroupsReader], keep: Callable[[GroupsReader], Any] | None = None
) -> Groups:
    """The groups a chain of segments (a full one, then partial ones) stands for: each key's
    rows from the newest segment that holds or deletes it; of those, the keys for which
    ``keep(reader)`` (a boolean array per key of the reader) is set.

    >>> def reader(g):
    ...     return GroupsReader(g.to_batch())
    >>> base = reader(Groups(["a", "b"], [1, 1], {"v": [1, 2]}))
    >>> change = reader(Groups(["b"], [1], {"v": [3]}, deleted=["a"], partial=True))
    >>> resolve_groups([base, change]).to_index()
    {'b': [(3,)]}
    """
    seen: set[Any] = set()
    parts: list[Groups] = []
    for segment in reversed(chain):
        mask = keep(segment) if keep is not None else None
        if seen:
            fresh = np.fromiter((k not in seen for k in segment.keys), dtype=bool)
            mask = fresh if mask is None else (mask & fresh)
        if mask is None or bool(mask.any()):
            parts.append(segment.take(mask))
        if len(chain) > 1:
            seen.update(segment.keys)  # (a deleted key is one with no rows)
    return concat_groups(parts)


def concat_groups(parts: list[Groups]) -> Groups:
    """The groups of several segments with distinct keys, as one."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return Groups([], [], {})
    names: list[str] = []
    for p in parts:
        if p.keys:
            names = list(p.columns)
            break
    return Groups(
        [k for p in parts for k in p.keys],
        [c for p in parts for c in p.counts],
        {name: [v for p in parts for v in p.columns.get(name, ())] for name in names},
    )
