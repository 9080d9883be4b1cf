"""Rows to updates and updates to rows: the DataFrame side of the Spark adapter.

An input DataFrame's columns named ``time`` and ``diff`` are optional (default ``0`` and
``1``); its other columns, in order, form the datum: one column gives its value, several a
tuple. An output datum is flattened (nested tuples too) into the columns of its schema, and
``time`` and ``diff`` follow.

Several inputs travel to the barrier tasks as one DataFrame: :func:`tag_inputs` renames
input ``i``'s columns ``__i_0, __i_1, ...`` beside an ``__input`` column holding ``i``, and
unions them by name (each row has nulls in the other inputs' columns). Several outputs come
back the same way (:class:`OutputLayout`, an ``__output`` column), so one barrier job serves
every input and output.

A ``timestamp`` column's values arrive as ``datetime`` (Arrow's, in the session's time zone),
and a ``datetime`` goes out into a ``timestamp`` column (:func:`to_arrow_schema`).

What is checked where: column types on the driver, before any job (a ``time`` column of
strings, a schema column named ``time``); values in the tasks, each error naming the input or
output, the column, and the row or datum.

    >>> flatten((1, ("a", 2.5)))
    (1, 'a', 2.5)
    >>> flatten("x")
    ('x',)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema as _to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    _parse_datatype_string,
)

from ...scheduler.validation import check_nan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from deltaflow.framework.schema import Schema

__all__ = [
    "InputLayout",
    "OutputLayout",
    "flatten",
    "parse_schema",
    "read_changes_accounted",
    "read_partition",
    "read_partition_accounted",
    "tag_inputs",
]

INPUT = "__input"
OUTPUT = "__output"
#: The column of ``run``'s marker rows (one per task, see :meth:`OutputLayout.report_batch`).
REPORT = "__report"
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_NESTED = (ArrayType, StructType, MapType)


def to_arrow_schema(schema: StructType) -> Any:
    """The Arrow schema of output rows of ``schema``: a ``timestamp`` column is an Arrow
    timestamp in UTC (an instant: Spark reads the microseconds whatever the zone named; a
    ``datetime`` without a zone is taken as UTC)."""
    return _to_arrow_schema(schema, timezone="UTC")


def flatten(datum: Any) -> tuple[Any, ...]:
    """``datum`` as a flat tuple: a tuple's items in order, nested tuples flattened too."""
    if not isinstance(datum, tuple):
        return (datum,)
    if not any(isinstance(x, tuple) for x in datum):
        return tuple(datum)
    out: list[Any] = []
    for x in datum:
        out.extend(flatten(x))
    return tuple(out)


def _hashable(value: Any) -> Any:
    """A nested column's value (Arrow gives lists and dicts) as tuples, so it can be a key."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(_hashable(v) for v in value.values())
    return value


@attrs.frozen
class InputLayout:
    """How one input DataFrame's columns map onto updates, checked on the driver.

    ``data``: the datum's column names in order; ``time``/``diff``: whether those columns are
    there; ``nested``: which data columns hold lists or structs (turned into tuples).
    """

    name: str
    index: int
    data: tuple[str, ...]
    time: bool
    diff: bool
    nested: tuple[bool, ...]
    #: Per data column, the declared type to cast it to (a wider one), or None.
    casts: tuple[str | None, ...] = ()
    #: Per data column, whether the declared schema says ``NOT NULL`` (empty: none declared).
    required: tuple[bool, ...] = ()

    @classmethod
    def of(
        cls,
        name: str,
        index: int,
        schema: StructType,
        *,
        streaming: bool,
        declared: Schema | None = None,
    ) -> InputLayout:
        """The layout of input ``name`` with DataFrame ``schema`` (and the input's declared
        columns, ``Pipeline.schemas``: then the datum is those columns in their order, each
        of the declared type or one that widens to it).

        Raises:
            TypeError: ``time`` or ``diff`` is not an integer column; a declared column of
                another type.
            ValueError: no data column; a declared column missing or an undeclared one
                present; or a ``time`` column on a streaming input (there the micro-batch id
                is the time).
        """
        fields = {f.name: f for f in schema.fields}
        for col in ("time", "diff"):
            field = fields.get(col)
            if field is not None and not isinstance(field.dataType, _INTEGRAL):
                msg = (
                    f"input {name!r}: column {col!r} has type {field.dataType.simpleString()}; "
                    f"{col}s are integers (a bigint or int column)"
                )
                raise TypeError(msg)
        if streaming and "time" in fields:
            msg = (
                f"input {name!r}: a streaming input has no 'time' column: each micro-batch is "
                "one time, its batch id; drop or rename the column"
            )
            raise ValueError(msg)
        data = [f for f in schema.fields if f.name not in ("time", "diff")]
        if not data:
            msg = f"input {name!r}: no data columns (only {[f.name for f in schema.fields]})"
            raise ValueError(msg)
        casts: list[str | None] = [None] * len(data)
        required: tuple[bool, ...] = ()
        if declared is not None:
            data, casts = _declared(name, declared, fields, data)
            required = tuple(not c.nullable for c in declared.columns)
        return cls(
            name,
            index,
            tuple(f.name for f in data),
            "time" in fields,
            "diff" in fields,
            tuple(isinstance(f.dataType, _NESTED) for f in data),
            tuple(casts),
            required,
        )

    def tagged(self, df: DataFrame) -> DataFrame:
        """``df`` with the ``__input`` tag and its columns renamed ``__i_j`` (``time`` is
        ``__i_t``, ``diff`` ``__i_d``)."""
        i = self.index
        cols = [F.lit(i).cast("int").alias(INPUT)]
        casts = self.casts or (None,) * len(self.data)
        cols += [
            (df[c] if cast is None else df[c].cast(cast)).alias(f"__{i}_{j}")
            for j, (c, cast) in enumerate(zip(self.data, casts))
        ]
        if self.time:
            cols.append(df["time"].cast("long").alias(f"__{i}_t"))
        if self.diff:
            cols.append(df["diff"].cast("long").alias(f"__{i}_d"))
        return df.select(*cols)

    def read(self, batch: Any) -> tuple[list[Any], list[int] | None, list[int] | None]:
        """This input's data, times and diffs in an Arrow batch of tagged rows (``None``
        where the column is absent: every time 0, every diff 1).

        Raises:
            ValueError: a null or negative time, a null diff, or a null in a column declared
                ``NOT NULL``, naming the row.
        """
        i = self.index
        rows = batch.filter(pc.equal(batch.column(INPUT), i))
        columns = [rows.column(f"__{i}_{j}").to_pylist() for j in range(len(self.data))]
        for j, nested in enumerate(self.nested):
            if nested:
                columns[j] = [_hashable(v) for v in columns[j]]
        data = columns[0] if len(columns) == 1 else list(zip(*columns))
        for j, required in enumerate(self.required):
            if required and rows.column(f"__{i}_{j}").null_count:
                reason = self._null_in(j, data[columns[j].index(None)])
                raise ValueError(reason)
        times = self._integers(rows, "t", "time", data) if self.time else None
        diffs = self._integers(rows, "d", "diff", data) if self.diff else None
        if times is not None and any(t < 0 for t in times):
            k = next(k for k, t in enumerate(times) if t < 0)
            msg = (
                f"input {self.name!r}: column 'time' is {times[k]} in {self._row(data[k])}; "
                "times are >= 0"
            )
            raise ValueError(msg)
        return data, times, diffs

    def read_lenient(self, batch: Any) -> tuple[list[Any], list[Any]]:
        """This input's data and diffs in an Arrow batch of tagged rows, a null diff kept as
        ``None`` (:meth:`fault` names it)."""
        i = self.index
        rows = batch.filter(pc.equal(batch.column(INPUT), i))
        columns = [rows.column(f"__{i}_{j}").to_pylist() for j in range(len(self.data))]
        for j, nested in enumerate(self.nested):
            if nested:
                columns[j] = [_hashable(v) for v in columns[j]]
        data = columns[0] if len(columns) == 1 else list(zip(*columns))
        diffs = rows.column(f"__{i}_d").to_pylist() if self.diff else [1] * len(data)
        return data, diffs

    def fault(self, datum: Any, diff: Any) -> str | None:
        """Why one row of this input is bad (a null diff, a datum holding a NaN, a null in a
        column declared ``NOT NULL``), or None."""
        if diff is None:
            return f"input {self.name!r}: column 'diff' is null in {self._row(datum)}"
        if any(self.required):
            values = (datum,) if len(self.data) == 1 else datum
            for j, required in enumerate(self.required):
                if required and values[j] is None:
                    return self._null_in(j, datum)
        try:
            check_nan(self.name, datum)
        except ValueError as exc:
            return str(exc)
        return None

    def _integers(self, rows: Any, suffix: str, col: str, data: list[Any]) -> list[int]:
        column = rows.column(f"__{self.index}_{suffix}")
        values: list[Any] = column.to_pylist()
        if column.null_count:
            k = values.index(None)
            msg = f"input {self.name!r}: column {col!r} is null in {self._row(data[k])}"
            raise ValueError(msg)
        return values

    def _null_in(self, j: int, datum: Any) -> str:
        return (
            f"input {self.name!r}: column {self.data[j]!r} is null in {self._row(datum)}, "
            "but the input's schema declares it NOT NULL"
        )

    def _row(self, datum: Any) -> str:
        values = (datum,) if len(self.data) == 1 else datum
        cells = ", ".join(f"{c}={v!r}" for c, v in zip(self.data, values))
        return f"the row ({cells})"


_WIDENS = {
    "smallint": {"tinyint"},
    "int": {"tinyint", "smallint"},
    "bigint": {"tinyint", "smallint", "int"},
    "double": {"tinyint", "smallint", "int", "bigint", "float"},
}


def _declared(
    name: str, declared: Schema, fields: Mapping[str, StructField], data: list[StructField]
) -> tuple[list[StructField], list[str | None]]:
    """The declared data columns of an input DataFrame, and a cast for each whose type widens
    to the declared one.

    Raises:
        ValueError: a declared column missing, or an undeclared one present.
        TypeError: a column of a type that is not (and does not widen to) the declared one.
    """
    missing = [c for c in declared.names if c not in fields]
    if missing:
        msg = (
            f"input {name!r}: no column {missing[0]!r} of the declared {declared.ddl!r} "
            f"(columns: {list(fields)})"
        )
        raise ValueError(msg)
    extra = [f.name for f in data if f.name not in declared.names]
    if extra:
        msg = f"input {name!r}: column {extra[0]!r} is not declared in {declared.ddl!r}"
        raise ValueError(msg)
    out: list[StructField] = []
    casts: list[str | None] = []
    for column in declared.columns:
        field = fields[column.name]
        have, want = field.dataType.simpleString(), column.type.ddl
        if have == want:
            casts.append(None)
        elif have in _WIDENS.get(want, ()):
            casts.append(want)
        else:
            msg = (
                f"input {name!r}: column {column.name!r} is {have}, but {declared.ddl!r} "
                f"declares it {want}"
            )
            raise TypeError(msg)
        out.append(field)
    return out, casts


def tag_inputs(
    spark: SparkSession, layouts: Sequence[InputLayout], frames: Sequence[DataFrame]
) -> DataFrame:
    """One DataFrame of every input's rows, tagged (an empty one when there are no inputs)."""
    if not frames:
        return spark.range(0).select(F.lit(0).cast("int").alias(INPUT))
    tagged = [layout.tagged(df) for layout, df in zip(layouts, frames)]
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged)


def read_partition(
    layouts: Sequence[InputLayout], batches: Iterable[Any]
) -> dict[str, list[tuple[Any, int, int]]]:
    """A task's partition of tagged rows as ``(data, time, diff)`` updates per input."""
    return _read(layouts, batches, {}, timed=True)[0]


def read_changes(
    layouts: Sequence[InputLayout], batches: Iterable[Any]
) -> dict[str, list[tuple[Any, int]]]:
    """A micro-batch's tagged rows as ``(data, diff)`` changes per input (no times)."""
    return _read(layouts, batches, {}, timed=False)[0]


def read_changes_accounted(
    layouts: Sequence[InputLayout],
    batches: Iterable[Any],
    modes: Mapping[str, str],
) -> tuple[dict[str, list[tuple[Any, int]]], dict[str, Any]]:
    """:func:`read_changes`, each row of an input whose ``on_bad`` mode is not ``"fail"``
    checked on its own (a null diff, a datum holding a NaN, a null in a column declared
    ``NOT NULL``): a bad one is left out. Also
    returns, per input, ``{"read": rows, "bad": [[datum, reason, row], ...]}`` (``row``:
    its index in the partition's rows of that input), for the driver's accounts
    (:mod:`deltaflow.scheduler.accounting`); an input in mode ``"fail"`` raises as
    :func:`read_changes` does."""
    return _read(layouts, batches, modes, timed=False)


# -- dfspark.run's bad rows (on_bad) ---------------------------------------------------------
def read_partition_accounted(
    layouts: Sequence[InputLayout],
    batches: Iterable[Any],
    modes: Mapping[str, str],
) -> tuple[dict[str, list[tuple[Any, int, int]]], dict[str, Any]]:
    """:func:`read_partition`, each row of an input whose ``on_bad`` mode is not ``"fail"``
    checked on its own (a null or negative time, a null diff, a datum holding a NaN, a null
    in a column declared ``NOT NULL``): a bad one is left out. Also returns, per input,
    ``{"read": rows, "bad": [[datum, reason, row], ...]}`` as
    :func:`read_changes_accounted` does; an input in mode ``"fail"`` raises as
    :func:`read_partition` does."""
    return _read(layouts, batches, modes, timed=True)


def _read(
    layouts: Sequence[InputLayout],
    batches: Iterable[Any],
    modes: Mapping[str, str],
    *,
    timed: bool,
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The four readers above: per input, ``(data, time, diff)`` updates (``timed``) or
    ``(data, diff)`` changes, and the rows read and left out."""
    feed: dict[str, list[Any]] = {layout.name: [] for layout in layouts}
    report: dict[str, Any] = {layout.name: {"read": 0, "bad": []} for layout in layouts}
    for batch in batches:
        for layout in layouts:
            seen = report[layout.name]
            out = feed[layout.name]
            if modes.get(layout.name, "fail") == "fail":
                data, times, diffs = layout.read(batch)
                seen["read"] += len(data)
                ds = diffs if diffs is not None else [1] * len(data)
                if timed:
                    out.extend(zip(data, times if times is not None else [0] * len(data), ds))
                else:
                    out.extend(zip(data, ds))
                continue
            data, ds = layout.read_lenient(batch)
            ts = _lenient_times(layout, batch, len(data)) if timed else None
            for i, (datum, diff) in enumerate(zip(data, ds)):
                row = seen["read"]
                seen["read"] += 1
                reason = None if ts is None else _time_fault(layout, datum, ts[i])
                if reason is None:
                    reason = layout.fault(datum, diff)
                if reason is not None:
                    seen["bad"].append([datum, reason, row])
                elif ts is None:
                    out.append((datum, diff))
                else:
                    out.append((datum, ts[i], diff))
    return feed, report


def _lenient_times(layout: InputLayout, batch: Any, n: int) -> list[Any]:
    """The times of ``layout``'s ``n`` rows of ``batch`` as they are (none checked)."""
    if not layout.time:
        return [0] * n
    rows = batch.filter(pc.equal(batch.column(INPUT), layout.index))
    return rows.column(f"__{layout.index}_t").to_pylist()  # type: ignore[no-any-return]


def _time_fault(layout: InputLayout, datum: Any, t: Any) -> str | None:
    """Why a row's time is bad (null or negative, as :meth:`InputLayout.read` says), or
    None."""
    if t is None:
        return f"input {layout.name!r}: column 'time' is null in {layout._row(datum)}"
    if t < 0:
        return (
            f"input {layout.name!r}: column 'time' is {t} in {layout._row(datum)}; times are >= 0"
        )
    return None


def parse_schema(output: str, schema: Any) -> StructType:
    """``schema`` (a DDL string or ``StructType``) for ``output``, checked.

    Raises:
        TypeError: not a string or ``StructType``.
        ValueError: a column named ``time`` or ``diff`` (the adapter adds those), or none.
    """
    if isinstance(schema, str):
        parsed: DataType = _parse_datatype_string(schema)
    elif isinstance(schema, StructType):
        parsed = schema
    else:
        msg = f"output {output!r}: schema must be a DDL string or a StructType, not {schema!r}"
        raise TypeError(msg)
    if not isinstance(parsed, StructType) or not parsed.fields:
        msg = f"output {output!r}: schema {schema!r} has no columns"
        raise ValueError(msg)
    taken = [f.name for f in parsed.fields if f.name in ("time", "diff")]
    if taken:
        msg = f"output {output!r}: schema has columns {taken}; the adapter adds 'time' and 'diff'"
        raise ValueError(msg)
    return parsed


@attrs.frozen
class OutputLayout:
    """Every output's schema, and the one schema the barrier tasks return them in.

    With one output (``single``), rows are its columns then ``time`` and ``diff``; with
    several, an ``__output`` column (the output's position) leads and output ``i``'s columns
    are ``__i_j``.
    """

    names: tuple[str, ...]
    schemas: tuple[StructType, ...]
    single: bool
    #: ``run(on_bad=...)``: a nullable ``__report`` column ends the rows, for one marker row
    #: per task carrying its input report (:meth:`report_batch`); the outputs' columns are
    #: then nullable (a marker row has nothing in them).
    report: bool = False

    @classmethod
    def of(cls, schema: Any, *, single: bool, names: Sequence[str]) -> OutputLayout:
        """The layout for ``schema`` (a dict of schemas when ``build()`` returns a dict).

        Raises:
            TypeError: a dict for a single output, or a single schema for several.
            ValueError: a dict whose keys are not the outputs' names.
        """
        if single:
            if isinstance(schema, Mapping):
                msg = "this pipeline has one output: pass one schema, not a dict"
                raise TypeError(msg)
            return cls(("output",), (parse_schema("output", schema),), True)
        if not isinstance(schema, Mapping):
            msg = f"this pipeline has outputs {sorted(names)}: pass a dict of schemas by name"
            raise TypeError(msg)
        if set(schema) != set(names):
            msg = f"schemas given for {sorted(schema)}, but the outputs are {sorted(names)}"
            raise ValueError(msg)
        ordered = sorted(names)
        return cls(tuple(ordered), tuple(parse_schema(n, schema[n]) for n in ordered), False)

    @property
    def combined(self) -> StructType:
        """The schema of the barrier tasks' rows."""
        tail = [StructField("time", LongType(), False), StructField("diff", LongType(), False)]
        if self.report:
            tail.append(StructField(REPORT, StringType(), True))
        if self.single:
            fields = self.schemas[0].fields
            if self.report:
                fields = [StructField(f.name, f.dataType, True, f.metadata) for f in fields]
            return StructType([*fields, *tail])
        fields = [StructField(OUTPUT, IntegerType(), False)]
        for i, schema in enumerate(self.schemas):
            fields += [
                StructField(f"__{i}_{j}", f.dataType, True) for j, f in enumerate(schema.fields)
            ]
        return StructType(fields + tail)

    def reports(self, combined: DataFrame) -> list[str]:
        """The marker rows' reports in ``combined`` (a checkpointed result: reading it runs
        no task again)."""
        return [
            row[0] for row in combined.where(F.col(REPORT).isNotNull()).select(REPORT).collect()
        ]

    def report_batch(self, text: str) -> Any:
        """One marker row (an Arrow batch) carrying ``text``: nulls in the outputs'
        columns, time and diff 0, ``__output`` -1."""
        target = to_arrow_schema(self.combined)
        arrays = [pa.nulls(1, field.type) for field in target]
        if not self.single:
            arrays[0] = pa.array([-1], pa.int32())
        arrays[-3] = pa.array([0], pa.int64())
        arrays[-2] = pa.array([0], pa.int64())
        arrays[-1] = pa.array([text], pa.string())
        return pa.RecordBatch.from_arrays(arrays, schema=target)

    def split(self, combined: DataFrame) -> dict[str, DataFrame]:
        """Each output's DataFrame out of the barrier tasks' rows."""
        if self.report:
            combined = combined.where(F.col(REPORT).isNull()).drop(REPORT)
        if self.single:
            return {"output": combined}
        out = {}
        for i, (name, schema) in enumerate(zip(self.names, self.schemas)):
            cols = [combined[f"__{i}_{j}"].alias(f.name) for j, f in enumerate(schema.fields)]
            out[name] = combined.where(combined[OUTPUT] == i).select(*cols, "time", "diff")
        return out

    def to_arrow(self, results: Mapping[str, Sequence[tuple[Any, Any, int]]]) -> Iterator[Any]:
        """Arrow record batches of ``results`` (each output's ``(data, time, diff)``).

        Raises:
            TypeError: a datum does not fit its output's schema, naming the output, the datum
                and the column.
        """
        target = to_arrow_schema(self.combined)
        for i, name in enumerate(self.names):
            updates = results.get(name, ())
            if not updates:
                continue
            columns = _columns(name, self.schemas[i], updates)
            times = pa.array([u[1] for u in updates], pa.int64())
            diffs = pa.array([u[2] for u in updates], pa.int64())
            if self.single:
                arrays = [*columns, times, diffs]
            else:
                arrays = [pa.array([i] * len(updates), pa.int32())]
                for k, schema in enumerate(self.schemas):
                    if k == i:
                        arrays += columns
                    else:
                        arrays += [
                            pa.nulls(len(updates), target.field(len(arrays)).type)
                            for _ in schema.fields
                        ]
                arrays += [times, diffs]
            if self.report:
                arrays.append(pa.nulls(len(updates), pa.string()))
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


def _columns(output: str, schema: StructType, updates: Sequence[tuple[Any, Any, int]]) -> list[Any]:
    """The Arrow columns of ``updates``' data, flattened into ``schema``."""
    arrow = to_arrow_schema(schema)
    width = len(schema.fields)
    rows = [flatten(u[0]) for u in updates]
    for row, u in zip(rows, updates):
        if len(row) != width:
            names = ", ".join(schema.names)
            msg = (
                f"output {output!r}: datum {u[0]!r} has {len(row)} field(s) but the schema has "
                f"{width} column(s) ({names})"
            )
            raise TypeError(msg)
    arrays = []
    for j, field in enumerate(schema.fields):
        values = [r[j] for r in rows]
        kind = arrow.field(j).type
        try:
            arrays.append(pa.array(values, kind))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            bad = _first_misfit(values, kind)
            msg = (
                f"output {output!r}: datum {updates[bad][0]!r} does not fit column "
                f"{field.name!r} ({field.dataType.simpleString()}): {values[bad]!r}"
            )
            raise TypeError(msg) from None
        if not field.nullable and arrays[-1].null_count:
            bad = values.index(None)
            msg = (
                f"output {output!r}: datum {updates[bad][0]!r} has null for non-null column "
                f"{field.name!r}"
            )
            raise TypeError(msg)
    return arrays


def _first_misfit(values: list[Any], kind: Any) -> int:
    for k, v in enumerate(values):
        try:
            pa.array([v], kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return k
    return 0  # pragma: no cover - the whole column failed, so some value does
