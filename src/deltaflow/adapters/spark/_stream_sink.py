"""The sink of a :func:`~deltaflow.adapters.spark.stream`: a ``foreachBatch``-style
function, or parquet files or a table it makes one of, with a way to tell what those hold.

    sink, holds = sink_of(spark, output, None, "out/words", None)
    sink(frame, 3)              # appends micro-batch 3's changes
    holds("output", 3)          # True: they are there (at time 3)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._convert import OutputLayout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Holds", "Sink", "sink_of"]

Sink = Callable[[Any, int], object]
"""A ``foreachBatch``-style sink: ``sink(frame, batch_id)``, the frame a DataFrame (a dict of
them for a ``build()`` returning a dict)."""

Holds = Callable[[str, int], bool]
"""``holds(output, time)``: whether a sink already holds changes of ``output`` at ``time``."""


def sink_of(
    spark: SparkSession,
    output: OutputLayout,
    foreach_batch: Sink | None,
    path: str | None,
    table: str | Mapping[str, str] | None,
) -> tuple[Sink, Holds | None]:
    """The one sink given, as a ``foreachBatch``-style function; for the path and table
    sinks, also a function saying whether they hold an output's changes at a time already
    (every change of micro-batch ``b`` is at time ``b``, and each is appended by one Spark
    job, committed whole)."""
    given = [s for s in (foreach_batch, path, table) if s is not None]
    if len(given) != 1:
        msg = "pass exactly one sink: foreach_batch=, path= (parquet) or table="
        raise TypeError(msg)
    if foreach_batch is not None:
        return foreach_batch, None
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    def has_time(frame: DataFrame, at: int) -> bool:
        return bool(frame.where(F.col("time") == at).limit(1).count())

    if path is not None:
        root = path

        def folder(name: str) -> str:
            return root if output.single else f"{root}/{name}"

        def to_parquet(frames: Any, _batch_id: int) -> None:
            if output.single:
                frames.write.mode("append").parquet(root)
            else:
                for name, frame in frames.items():
                    frame.write.mode("append").parquet(folder(name))

        def parquet_holds(name: str, at: int) -> bool:
            try:
                written = spark.read.parquet(folder(name))
            except AnalysisException:
                return False  # nothing written there yet (no such path, or no files)
            return has_time(written, at)

        return to_parquet, parquet_holds
    assert table is not None
    if output.single != isinstance(table, str):
        msg = "table= is one table name for one output, a dict of names by output for several"
        raise TypeError(msg)
    names = table

    def table_of(name: str) -> str:
        return names if isinstance(names, str) else names[name]

    def to_table(frames: Any, _batch_id: int) -> None:
        if isinstance(names, str):
            frames.write.mode("append").saveAsTable(names)
        else:
            for name, frame in frames.items():
                frame.write.mode("append").saveAsTable(names[name])

    def table_holds(name: str, at: int) -> bool:
        t = table_of(name)
        return spark.catalog.tableExists(t) and has_time(spark.table(t), at)

    return to_table, table_holds
