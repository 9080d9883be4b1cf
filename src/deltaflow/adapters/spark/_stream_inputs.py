"""The inputs and arguments of a :func:`~deltaflow.adapters.spark.stream`, checked before
anything starts: the streaming DataFrames (read every micro-batch), the static ones and the
Python lists (fed once, with the first micro-batch).

    given = StreamInputs.of(WordCount(), {"lines": lines_df, "stop": ["a", "the"]})
    given.layouts          # the streaming inputs' layouts: [lines]
    given.lists            # {"stop": ["a", "the"]}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ...operators.pipeline import Pipeline
from ._batch import check_inputs
from ._convert import InputLayout

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame

__all__ = ["StreamInputs", "worker_count"]


@attrs.frozen
class StreamInputs:
    """A stream's pipeline, its dataflow builder and its inputs by kind."""

    pipeline: Pipeline
    builder: Any
    #: Every input fed by DataFrames (streaming and static), in the pipeline's order.
    every: list[InputLayout]
    #: The streaming inputs' layouts and DataFrames.
    layouts: list[InputLayout]
    frames: list[DataFrame]
    #: The static DataFrames' layouts and DataFrames.
    static_layouts: list[InputLayout]
    static_frames: list[DataFrame]
    #: The inputs given as Python lists of data, by name.
    lists: dict[str, list[Any]]

    @classmethod
    def of(cls, pipeline: object, inputs: dict[str, Any]) -> StreamInputs:
        """``inputs`` sorted by kind and checked against ``pipeline``.

        Raises:
            TypeError: not a pipeline, an unknown input, an input neither a DataFrame nor a
                list, no streaming input.
        """
        from pyspark.sql import DataFrame

        lists = {n: list(v) for n, v in inputs.items() if isinstance(v, list | tuple)}
        static = {n for n, v in inputs.items() if isinstance(v, DataFrame) and not v.isStreaming}
        framed = {n: v for n, v in inputs.items() if n not in lists}
        checked, every, all_frames, builder = check_inputs(
            pipeline, framed, streaming=True, static=static, lists=lists
        )
        unknown = sorted(set(lists) - set(checked.input_names()))
        if unknown:
            msg = f"unknown input(s) {unknown}; {type(checked).__name__}.build() takes "
            raise TypeError(msg + str(checked.input_names()))
        layouts: list[InputLayout] = []
        static_layouts: list[InputLayout] = []
        frames: list[DataFrame] = []
        static_frames: list[DataFrame] = []
        for layout, f in zip(every, all_frames, strict=True):
            (static_layouts if layout.name in static else layouts).append(layout)
            (static_frames if layout.name in static else frames).append(f)
        if not frames:
            given = sorted([*static, *lists])
            msg = "stream() needs at least one streaming input"
            if given:
                msg += f" (inputs {given} are static: dfspark.run() takes static inputs alone)"
            raise TypeError(msg)
        return cls(checked, builder, every, layouts, frames, static_layouts, static_frames, lists)


def worker_count(sc: SparkContext, partitions: object, allow_code_change: object) -> int:
    """How many workers a stream runs (``partitions``, by default the context's default
    parallelism minus one, leaving a slot for the micro-batches), ``allow_code_change``
    checked too.

    Raises:
        ValueError: ``partitions`` not a positive int, ``allow_code_change`` not a bool.
    """
    n = max(1, sc.defaultParallelism - 1) if partitions is None else partitions
    if n.__class__ is not int or n < 1:
        msg = f"partitions must be a positive int, not {partitions!r}"
        raise ValueError(msg)
    if allow_code_change.__class__ is not bool:
        msg = f"allow_code_change must be True or False, not {allow_code_change!r}"
        raise ValueError(msg)
    return int(n)
