"""Durable state's building blocks: columns, tables and the checkpoint store.

Columns must give back exactly the values written (same classes, nested ones too), whatever
codec their values choose; a chain of whole and partial index segments must read back as the
index it stands for (a dict model); rows are routed to workers as the exchanges route them;
the store must switch manifests atomically, find every damaged byte, and clean up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.harness import identical

from deltaflow.errors import CheckpointError
from deltaflow.framework.durable.columns import decode_column, encode_column, prepared
from deltaflow.framework.durable.store import CheckpointStore, _ArrowFiles
from deltaflow.framework.durable.tables import (
    Groups,
    GroupsReader,
    Rows,
    append_logged,
    owners,
    resolve_groups,
)
from deltaflow.framework.hashing import worker_of
from deltaflow.framework.lattice import Product


class Record:
    """A user class: written as a pickle."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other.x == self.x

    def __hash__(self) -> int:
        return hash(self.x)


atoms = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-5, 300),
    st.floats(),
    st.booleans(),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.none(),
    st.just(()),
    st.builds(Record, st.integers()),
)
times = st.recursive(
    st.integers(0, 2**40), lambda inner: st.builds(Product, inner, inner), max_leaves=4
)
values = st.recursive(
    st.one_of(atoms, times), lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=6
)


@settings(max_examples=150)
@given(
    column=st.one_of(
        st.lists(values, max_size=12),
        st.lists(st.sampled_from([0, 5, -3]), max_size=40),
        st.lists(st.tuples(st.integers(0, 9), st.text(max_size=2)), max_size=20),
        st.lists(st.sampled_from([Product(1, 2), Product(3, 0)]), max_size=40),
        st.lists(times, max_size=20),
    ),
    dictionary=st.booleans(),
)
def test_columns_read_back_exactly(column: list[Any], dictionary: bool) -> None:
    """Any column of hashable values decodes to values equal and of the same classes."""
    encoded = encode_column(column, dictionary=dictionary)
    back = decode_column(encoded.array, json.loads(json.dumps(encoded.spec)))
    assert len(back) == len(column)
    assert all(identical(a, b) for a, b in zip(column, back)), (column, back, encoded.spec)


@given(
    column=st.one_of(
        st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20),
        st.lists(st.builds(Product, st.integers(0, 2**40), st.integers(0, 2**40)), min_size=1),
        st.lists(st.builds(Product, st.integers(-5, 5), st.integers(0, 3)), min_size=1),
    ),
    kind=st.sampled_from(["int", "time"]),
)
def test_prepared_columns_read_back_exactly(column: list[Any], kind: str) -> None:
    """Columns of known kinds go through numpy and come back as they were."""
    if kind == "int" and column[0].__class__ is not int:
        kind = "time"
    encoded = encode_column(prepared(column, kind))
    back = decode_column(encoded.array, encoded.spec)
    assert all(identical(a, b) for a, b in zip(column, back))


def _prepared_as_written_before(column: list[Any]) -> Any:
    """How a ``time`` column was prepared before times went through their domain's codec
    (kept here to check that the bytes written are the same)."""
    import struct
    from itertools import chain

    from deltaflow.framework.durable.columns import int64_of

    n = len(column)
    if n:
        first = column[0]
        try:
            if first.__class__ is int:
                return int64_of(column)
            if first.__class__ is Product:
                coordinates = list(chain.from_iterable(column))
                if len(coordinates) == 2 * n:
                    return int64_of(coordinates).reshape(n, 2)
        except struct.error:
            pass
    return column


COORDS = st.one_of(st.integers(0, 50), st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**64))
written_times = st.one_of(
    st.lists(COORDS, max_size=30),
    st.lists(st.builds(Product, COORDS, COORDS), max_size=30),
    st.lists(st.builds(Product, st.integers(0, 3), st.integers(0, 3)), max_size=40),
    st.lists(times, max_size=20),
)


@settings(max_examples=200)
@given(column=written_times, given_domain=st.booleans(), dictionary=st.booleans())
def test_time_columns_are_written_as_before(
    column: list[Any], given_domain: bool, dictionary: bool
) -> None:
    """A time column prepared by its domain's codec (the saving operator's, or the first
    time's shape's) is written byte for byte as before (checkpoints written earlier still
    read, and read back the same times); its history's record batch is the same too."""
    from deltaflow.framework.time_domain import domain_of

    domain = domain_of(column[0]) if column and given_domain else None
    new = prepared(column, "time", domain)
    try:
        old = _prepared_as_written_before(column)
    except TypeError:  # an int after a pair: no checkpoint was written; now kept as objects
        assert new is column
        return
    assert type(new) is type(old)
    a = encode_column(new, dictionary=dictionary)
    b = encode_column(old, dictionary=dictionary)
    assert a.spec == b.spec and a.array.type == b.array.type and a.array.equals(b.array)
    index = {i % 3: [(0, t, 1)] for i, t in enumerate(column)}
    groups = Groups.from_index(index, ("val", "time", "diff"), domain=domain)
    listed = [t for key in groups.keys for _, t, _ in index[key]]
    try:
        old_time = _prepared_as_written_before(listed)
    except TypeError:
        assert groups.columns["time"] == listed
        return
    old_groups = Groups(groups.keys, groups.counts, {**groups.columns, "time": old_time})
    assert (
        groups.to_batch().serialize().to_pybytes() == old_groups.to_batch().serialize().to_pybytes()
    )


def test_a_float_time_is_written_exactly() -> None:
    """A time column holding a float or a string is not an int64 column: it is written as
    the values it holds, and reads back as them."""
    for column in ([3, 0.5, 0], [Product(1, 2), Product(1, 2.0)], [1, "2"], [Product(0, "a")]):
        prepared_column = prepared(column, "time")
        assert prepared_column is column
        encoded = encode_column(prepared_column)
        back = decode_column(encoded.array, encoded.spec)
        assert all(identical(a, b) for a, b in zip(column, back))


def test_repeated_times_read_back_as_shared_objects() -> None:
    """A compacted state's few distinct times come back as one object each."""
    column = [Product(4, i % 3) for i in range(100)]
    for values in (column, prepared(column, "time")):
        encoded = encode_column(values, dictionary=True)
        back = decode_column(encoded.array, encoded.spec)
        assert back == column and len({id(t) for t in back}) == 3


def test_an_unknown_codec_is_an_error() -> None:
    """A codec from a newer version is named, never guessed."""
    encoded = encode_column([1, 2])
    with pytest.raises(ValueError, match="unknown column codec"):
        decode_column(encoded.array, {"k": "zigzag"})


# -- tables ----------------------------------------------------------------------------------
row_strategy = st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(-2, 2))
index_strategy = st.dictionaries(
    st.integers(0, 30), st.lists(row_strategy, min_size=1, max_size=4), max_size=12
)


@settings(max_examples=200)
@given(base=index_strategy, changes=st.lists(index_strategy, max_size=4), data=st.data())
def test_a_chain_of_partial_segments_reads_back_as_the_index(
    base: dict[int, list[Any]], changes: list[dict[int, list[Any]]], data: st.DataObject
) -> None:
    """Whole segment, then partial ones (changed keys with their rows, deleted keys): the
    newest segment holding or deleting a key wins; routed to any worker count, the shares
    are the model's keys each worker owns."""
    names = ("val", "time", "diff")
    model = dict(base)
    chain = [GroupsReader(Groups.from_index(base, names).to_batch())]
    for change in changes:
        gone = data.draw(st.lists(st.sampled_from(sorted(model)), max_size=3)) if model else []
        current = {**model, **change}
        for key in gone:
            current.pop(key, None)
        touched = set(change) | set(gone)
        segment = Groups.from_index(current, names, sorted(touched))
        assert segment.partial and set(segment.deleted) == set(gone)
        chain.append(GroupsReader(segment.to_batch()))
        model = current
    assert resolve_groups(chain).to_index() == model
    workers = data.draw(st.integers(1, 4))
    for w in range(workers):
        share = resolve_groups(chain, lambda r, w=w: owners(r.keys, workers, ints=True) == w)
        assert share.to_index() == {k: v for k, v in model.items() if worker_of(k, workers) == w}


@settings(max_examples=200)
@given(base=index_strategy, logs=st.lists(st.lists(st.tuples(st.integers(0, 30), row_strategy),
                                                   max_size=10), max_size=4))  # fmt: skip
def test_a_history_with_logs_reads_back_as_its_lists(
    base: dict[int, list[Any]], logs: list[list[tuple[int, tuple[int, int, int]]]]
) -> None:
    """Whole segment, then logs of rows appended (each row with its key): read back in
    order, each key's list is its rows then those appended to it, in the order appended."""
    names = ("val", "time", "diff")
    model = {k: list(v) for k, v in base.items()}
    index = Groups.from_batch(Groups.from_index(base, names).to_batch()).to_index()
    for log in logs:
        for key, row in log:
            model.setdefault(key, []).append(row)
        if not log:
            continue
        written = Rows.logged(
            [k for k, _ in log], list(map(list, zip(*(r for _, r in log)))), names
        )
        append_logged(index, Rows.from_batch(written.to_batch()))
    assert index == model


@given(keys=st.lists(st.one_of(st.integers(-5, 2**62), st.text(max_size=3),
                               st.tuples(st.integers(), st.text(max_size=2))), max_size=20),
       workers=st.integers(1, 5))  # fmt: skip
def test_rows_go_to_the_worker_the_exchanges_route_them_to(keys: list[Any], workers: int) -> None:
    """The owner of a saved row is the worker ``stable_hash(key) % workers``."""
    expected = [worker_of(k, workers) for k in keys]
    assert owners(keys, workers).tolist() == expected
    if all(k.__class__ is int for k in keys):
        assert owners(keys, workers, ints=True).tolist() == expected


def test_rows_round_trip() -> None:
    """A table of rows reads back column by column."""
    rows = Rows({"key": ["a", "b"], "time": [Product(1, 0), Product(1, 0)], "diff": [1, -1]})
    assert Rows.from_batch(rows.to_batch()).columns == rows.columns
    assert len(Rows.concat([rows, rows])) == 4


# -- the store --------------------------------------------------------------------------------
#: What a job's manifest says beside its files and nodes (checked when it is read).
JOB = {"time": 0, "workers": 1, "fingerprint": "", "inputs": {}, "outputs": {},
       "code": {"python": "3.11", "operators": {}}}  # fmt: skip


def _commit(store: CheckpointStore, sequence: int, payload: list[int]) -> dict[str, Any]:
    out = store.new_file(sequence, "t")
    ref = out.add([Rows({"x": payload}).to_batch()])
    info = store.write(out)
    table = {"kind": "rows", "key": None, "workers": {"0": [ref]}}
    manifest = {"sequence": sequence, **JOB, "files": {out.name: info},
                "nodes": {"n": {"tables": {"t": table}}}}  # fmt: skip
    store.commit(manifest)
    store.collect_garbage(manifest)
    return manifest


def _read(store: CheckpointStore) -> list[int] | None:
    manifest = store.latest()
    if manifest is None:
        return None
    ref = manifest["nodes"]["n"]["tables"]["t"]["workers"]["0"][0]
    (batch,) = store.reader(manifest).batches(ref)
    values: list[int] = Rows.from_batch(batch).columns["x"]
    return values


def test_the_store_switches_manifests_and_keeps_only_what_they_need(tmp_path: Path) -> None:
    """The highest manifest is current; older ones and unused data files are removed; a
    temporary manifest left by a crash is ignored (and removed later)."""
    store = CheckpointStore(tmp_path)
    assert store.latest() is None
    _commit(store, 1, [1, 2])
    (tmp_path / "checkpoint-000002.json.tmp-dead").write_text("{trunc")
    _commit(store, 2, [3])
    assert _read(store) == [3]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["checkpoint-000002.json", "data", "location.json"]
    assert len(list((tmp_path / "data").iterdir())) == 1


def test_a_checkpoint_without_data_files_makes_its_location(tmp_path: Path) -> None:
    """A manifest naming no data file (a job whose state is all empty) is committed into a
    location that does not exist yet."""
    store = CheckpointStore(tmp_path / "new" / "state")
    store.commit({"sequence": 1, **JOB, "files": {}, "nodes": {}})
    manifest = store.latest()
    assert manifest is not None
    assert manifest["sequence"] == 1


def test_a_torn_temporary_manifest_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    """A crash before the rename: the previous manifest is still the current one."""
    store = CheckpointStore(tmp_path)
    _commit(store, 1, [7])
    (tmp_path / "checkpoint-000002.json.tmp-1234").write_text('{"format": "deltaflow-che')
    assert _read(store) == [7]


def test_every_damaged_byte_is_found(tmp_path: Path) -> None:
    """A data file changed in any byte, or cut short, is an error naming it."""
    store = CheckpointStore(tmp_path)
    _commit(store, 1, list(range(100)))
    (data,) = (tmp_path / "data").iterdir()
    raw = data.read_bytes()
    for i in range(0, len(raw), max(1, len(raw) // 13)):
        damaged = bytearray(raw)
        damaged[i] ^= 0x01
        data.write_bytes(bytes(damaged))
        with pytest.raises(CheckpointError, match=data.name):
            _read(store)
    data.write_bytes(raw[:-1])
    with pytest.raises(CheckpointError, match="corrupted"):
        _read(store)
    data.write_bytes(raw)
    assert _read(store) == list(range(100))


def test_a_store_through_a_pyarrow_filesystem() -> None:
    """Locations pyarrow's filesystems reach (here its in-memory one) work the same way."""
    store = CheckpointStore("mock:///state")
    assert isinstance(store.files, _ArrowFiles)
    _commit(store, 1, [5])
    _commit(store, 2, [6, 7])
    assert _read(store) == [6, 7]
    assert store.sequences() == [2]


def test_an_unknown_scheme_is_a_clear_error() -> None:
    """A URI nothing here can reach says so (and what would reach it)."""
    with pytest.raises(ValueError, match="fsspec"):
        CheckpointStore("nosuchscheme://bucket/state")


def test_numpy_ints_of_every_width_round_trip() -> None:
    """Ints are written in the narrowest type holding them and read back as Python ints."""
    for bound in (100, 30_000, 2_000_000_000, 2**62):
        column = [bound, -bound, 0]
        back = decode_column(*(lambda c: (c.array, c.spec))(encode_column(column)))
        assert back == column and all(v.__class__ is int for v in back)
    assert encode_column(np.array([1, 2])).spec == {"k": "int"}
