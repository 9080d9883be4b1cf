"""Data and sinks the Spark tests share: random edges and the expected rows of a run, the
micro-batch files of a stream and a ``foreach_batch`` sink that keeps them, and a word count
streamed from such files (:class:`WordCounts`) with what ``df.run`` says it outputs."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.adapters import spark_pipelines as pipes

import deltaflow as df


def rows(frame: Any) -> list[tuple[Any, ...]]:
    """A DataFrame's rows as sorted tuples (``None`` sorts first)."""
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def expected(updates: list[tuple[Any, Any, int]]) -> list[tuple[Any, ...]]:
    """``df.run``'s updates as the rows ``dfspark.run`` returns."""
    # Imported here: the module is imported where pyspark may be missing (the tests skip then).
    from deltaflow.adapters.spark._convert import flatten

    return sorted(((*flatten(d), t, r) for d, t, r in updates), key=repr)


def triples(frame_rows: list[tuple[Any, ...]]) -> list[tuple[Any, int, int]]:
    """Rows ``(cols..., time, diff)`` as ``df.run`` inputs (one column: its value)."""
    return [((r[0] if len(r) == 3 else r[:-2]), r[-2], r[-1]) for r in frame_rows]


def random_edges(seed: int, nodes: int, count: int, times: int) -> list[tuple[int, int, int, int]]:
    """Edges ``(src, dst, time, diff)``: insertions at time 0, then changes at later times."""
    rng = random.Random(seed)
    live = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(count)]
    out = [(s, d, 0, 1) for s, d in live]
    for t in range(1, times):
        for _ in range(3):
            s, d = live.pop(rng.randrange(len(live)))
            out.append((s, d, t, -1))
            new = (rng.randrange(nodes), rng.randrange(nodes))
            live.append(new)
            out.append((*new, t, 1))
    return out


class Collected:
    """A ``foreach_batch`` sink that keeps every micro-batch's rows, by batch id; it reads the
    frame twice (a count, then the rows), as a sink may."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        count = frame.count()
        rows = [tuple(r) for r in frame.collect()]
        assert len(rows) == count
        with self.lock:
            self.batches[batch_id] = rows

    def rows(self) -> list[tuple[Any, ...]]:
        """Every micro-batch's rows, together and sorted."""
        with self.lock:
            return sorted(row for rows in self.batches.values() for row in rows)


def write_batch(directory: Path, index: int, rows: list[dict[str, Any]]) -> None:
    """One JSON-lines file: one micro-batch (the source reads one file per trigger)."""
    tmp = directory.parent / f".{directory.name}-{index}.json"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(directory / f"{index:04d}.json")


def source(spark: Any, directory: Path, ddl: str) -> Any:
    return spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).json(str(directory))


BATCHES = [
    [{"line": "the cat sat", "diff": 1}, {"line": "the dog", "diff": 1}],
    [{"line": "the cat ran", "diff": 1}],
    [{"line": "a dog", "diff": 1}, {"line": "the dog", "diff": -1}],
    [{"line": "cat cat", "diff": 2}],
]


LINES = "line string, diff long"
"""The schema of :data:`BATCHES`' rows."""


def line_updates(batches: Sequence[list[dict[str, Any]]], first: int = 0) -> list[Any]:
    """Micro-batches of :data:`BATCHES`' shape, the first one at time ``first``, as the
    ``lines`` input of ``df.run``."""
    return [(r["line"], b, r["diff"]) for b, rs in enumerate(batches, start=first) for r in rs]


def word_counts(updates: list[Any]) -> list[tuple[Any, ...]]:
    """The sorted rows ``(word, n, time, diff)`` of ``df.run``'s word count of ``updates``."""
    return sorted((w, n, t, d) for (w, n), t, d in df.run(pipes.WordCount(), lines=updates))


class WordCounts:
    """A word count streamed from micro-batch files the test writes into ``tmp_path / "in"``
    (one a trigger), its changes kept by a :class:`Collected` sink.

    ``stream(spark)`` starts it (two partitions unless told), ``feed(running, b, rows)`` writes
    micro-batch ``b`` and waits until the stream has processed it, and ``sink.rows()`` should
    then be ``word_counts(line_updates(...))`` of the micro-batches fed."""

    def __init__(self, tmp_path: Path) -> None:
        self.directory = tmp_path / "in"
        self.directory.mkdir()
        self.sink = Collected()

    def lines(self, spark: Any) -> Any:
        """The micro-batch files as a streaming DataFrame of :data:`LINES`."""
        return source(spark, self.directory, LINES)

    def stream(self, spark: Any, lines: Any = None, **options: Any) -> Any:
        """``dfspark.stream`` of the word count of ``lines`` (by default the files) into the
        sink; ``options`` go to ``dfspark.stream``."""
        # Imported here: pyspark may be missing (the Spark tests skip then).
        from deltaflow.adapters import spark as dfspark

        return dfspark.stream(
            pipes.WordCount(),
            spark,
            lines=self.lines(spark) if lines is None else lines,
            schema="word string, n long",
            foreach_batch=self.sink,
            **{"partitions": 2, **options},
        )

    def feed(self, running: Any, index: int, rows: list[dict[str, Any]]) -> None:
        """Write micro-batch ``index`` and wait until ``running`` has processed it."""
        write_batch(self.directory, index, rows)
        running.process_all_available()


def split_stream(spark: Any, directory: Path, tables: dict[str, str], **options: Any) -> Any:
    """``dfspark.stream`` of :class:`~tests.adapters.spark_pipelines.Split` over the files of
    ``{"word": ...}`` rows in ``directory`` (one a trigger), each output into its table of
    ``tables``; ``options`` go to ``dfspark.stream`` (two partitions unless told)."""
    # Imported here: pyspark may be missing (the Spark tests skip then).
    from deltaflow.adapters import spark as dfspark

    return dfspark.stream(
        pipes.Split(),
        spark,
        words=source(spark, directory, "word string"),
        schema={"words": "word string", "lengths": "length int, words long"},
        table=tables,
        **{"partitions": 2, **options},
    )


def assert_split_tables(spark: Any, tables: dict[str, str], batches: list[list[str]]) -> None:
    """The tables of :func:`split_stream` hold ``df.run``'s outputs over ``batches`` of words
    (batch ``b`` at time ``b``)."""
    updates = [(w, b, 1) for b, rows in enumerate(batches) for w in rows]
    want = df.run(pipes.Split(), words=updates)
    got = {name: sorted(tuple(r) for r in spark.table(t).collect()) for name, t in tables.items()}
    assert got["words"] == sorted((w, t, d) for w, t, d in want["words"])
    assert got["lengths"] == sorted((n, k, t, d) for (n, k), t, d in want["lengths"])
