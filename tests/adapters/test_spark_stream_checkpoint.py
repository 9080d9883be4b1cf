"""``dfspark.stream(..., checkpoint_location=L)`` on a real local Spark: the workers' state is
checkpointed under ``L`` with every micro-batch, so a query stopped and restarted on ``L``
(files arriving meanwhile, another worker count each time) goes on as an uninterrupted one:
its sinks end up holding exactly ``df.run``'s output over every file, each file's lines at
its micro-batch's time. Re-runs Spark makes after a stop are neither applied nor sunk twice.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.adapters import spark_pipelines as pipes
from tests.adapters.spark_data import assert_split_tables, split_stream

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")

#: One file per micro-batch: (line, diff) rows; words come back, and some go away.
FILES = [
    [("the cat sat", 1), ("the dog", 1)],
    [("the cat ran", 1)],
    [("a dog", 1), ("the dog", -1)],
    [("cat cat", 2)],
    [("the end", 1), ("a dog", -1)],
    [("dog days", 1)],
    [("the cat sat", -1), ("emu", 3)],
    [("the the", 1)],
]

#: Files' modification times: one second apart, in order (the source reads the oldest first).
_EPOCH = time.time() - 600


def write_file(directory: Path, index: int) -> None:
    """File ``index`` of :data:`FILES`, appearing whole, older than the next one."""
    tmp = directory.parent / f".{directory.name}-{index}.json"
    tmp.write_text("".join(json.dumps({"line": li, "diff": d}) + "\n" for li, d in FILES[index]))
    os.utime(tmp, (_EPOCH + index, _EPOCH + index))
    tmp.rename(directory / f"{index:04d}.json")


def expected(files: int) -> list[tuple[Any, ...]]:
    """``df.run``'s output over the first ``files`` files, file ``b`` at time ``b``, as the
    sinks' rows ``(word, n, time, diff)``: an uninterrupted stream's output."""
    lines = [(li, b, d) for b in range(files) for li, d in FILES[b]]
    return sorted((w, n, t, d) for (w, n), t, d in df.run(pipes.WordCount(), lines=lines))


def counts_of_files(files: int) -> dict[tuple[str, int], int]:
    """Each word's count over the first ``files`` files, as ``{(word, count): 1}``."""
    words: Counter[str] = Counter()
    for b in range(files):
        for line, diff in FILES[b]:
            for w in line.split():
                words[w] += diff
    return {(w, n): 1 for w, n in words.items() if n}


def summed(rows: list[tuple[Any, ...]]) -> dict[tuple[str, int], int]:
    """The sink's diffs summed per ``(word, count)``: the output collection now."""
    total: Counter[tuple[str, int]] = Counter()
    for w, n, _, d in rows:
        total[(w, n)] += d
    return {k: v for k, v in total.items() if v}


class Query:
    """A word count over ``directory``'s files, run on the checkpoint location ``location``
    with a path or table sink; started, fed files and stopped again and again."""

    def __init__(self, spark: Any, tmp_path: Path, **sink: Any) -> None:
        self.spark = spark
        self.directory = tmp_path / "in"
        self.directory.mkdir()
        self.location = str(tmp_path / "query")
        self.sink = sink
        self.files = 0  # written so far

    def start(self, partitions: int) -> Any:
        lines = (
            self.spark.readStream.schema("line string, diff long")
            .option("maxFilesPerTrigger", 1)
            .json(str(self.directory))
        )
        return dfspark.stream(
            pipes.WordCount(),
            self.spark,
            lines=lines,
            schema="word string, n long",
            partitions=partitions,
            checkpoint_location=self.location,
            **self.sink,
        )

    def write(self, count: int) -> None:
        for _ in range(count):
            write_file(self.directory, self.files)
            self.files += 1


def sunk_rows(spark: Any, query: Query) -> list[tuple[Any, ...]]:
    if "path" in query.sink:
        return sorted(tuple(r) for r in spark.read.parquet(query.sink["path"]).collect())
    return sorted(tuple(r) for r in spark.table(query.sink["table"]).collect())


def test_restarts_on_the_checkpoint_location_go_on_as_one_query(spark: Any, tmp_path: Path) -> None:
    """Four runs of one query on its checkpoint location, with 2, 1, 3 and 2 workers, files
    arriving while it runs and while it is stopped: each run resumes at the micro-batch the
    last one ended with, and the parquet sink ends up holding exactly df.run's output over
    all files (its diffs summed: the counts of all files, one live count per word)."""
    query = Query(spark, tmp_path, path=str(tmp_path / "out"))
    done = 0
    for partitions, while_stopped, while_running in [(2, 1, 2), (1, 1, 0), (3, 0, 2), (2, 2, 0)]:
        query.write(while_stopped)
        with query.start(partitions) as running:
            assert running.resumed_at == (done or None)
            running.process_all_available()
            for _ in range(while_running):
                query.write(1)
                running.process_all_available()
            stats = running.statistics()
        assert stats["batches"] == query.files - done
        assert stats["skipped"] == 0
        done = query.files
        got = sunk_rows(spark, query)
        assert got == expected(done), done
    assert done == len(FILES)
    assert summed(got) == counts_of_files(len(FILES))


def test_a_rerun_of_a_checkpointed_micro_batch_is_not_applied_twice(
    spark: Any, tmp_path: Path
) -> None:
    """Spark stopped after the checkpoint held micro-batch 2 but before it committed 2 (its
    commit removed, as a crash there leaves it): the restarted query runs 2 again, the
    workers skip it (neither applied nor sunk again), and the table sink holds df.run's
    output."""
    query = Query(spark, tmp_path, table="checkpointed_counts")
    with query.start(2) as running:
        for _ in range(3):
            query.write(1)
            running.process_all_available()
    commits = Path(query.location) / "commits"
    for name in ("2", ".2.crc"):
        (commits / name).unlink(missing_ok=True)
    with query.start(2) as running:
        assert running.resumed_at == 3
        running.process_all_available()
        assert running.skipped == [2]
        query.write(1)
        running.process_all_available()
        stats = running.statistics()
    assert (stats["batches"], stats["skipped"]) == (1, 1)
    got = sunk_rows(spark, query)
    assert got == expected(4)
    assert summed(got) == counts_of_files(4)


def test_a_micro_batch_sunk_but_not_checkpointed_is_sunk_once(spark: Any, tmp_path: Path) -> None:
    """The checkpoint of micro-batch 2 fails after the sink took it (its manifest's name taken
    by a directory): the query stops with a CheckpointError naming the location. Restarted
    (the fault fixed), the workers resume before micro-batch 2 and apply it again, and the
    parquet sink, holding its changes already, does not append them twice."""
    query = Query(spark, tmp_path, path=str(tmp_path / "out"))
    blocker = Path(query.location) / "deltaflow" / "checkpoint-000003.json"
    with query.start(2) as running:
        for _ in range(2):
            query.write(1)
            running.process_all_available()
        blocker.mkdir()
        query.write(1)
        with pytest.raises(df.CheckpointError, match=r"checkpoint-000003\.json"):
            running.process_all_available()
    assert sunk_rows(spark, query) == expected(3)  # sunk, then the checkpoint failed
    blocker.rmdir()
    with query.start(2) as running:
        assert running.resumed_at == 2
        running.process_all_available()
        query.write(1)
        running.process_all_available()
        assert running.statistics()["batches"] == 2
    assert sunk_rows(spark, query) == expected(4)


def test_another_pipelines_checkpoint_or_a_lost_one_is_refused(spark: Any, tmp_path: Path) -> None:
    """A location holding another pipeline's checkpoint is refused before anything starts,
    naming it; a checkpoint removed while Spark's commits stay stops the query at its first
    micro-batch with a CheckpointError saying which micro-batches' state is missing."""
    query = Query(spark, tmp_path, path=str(tmp_path / "out"))
    with query.start(2) as running:
        query.write(1)
        running.process_all_available()
    words = spark.readStream.schema("word string").json(str(tmp_path / "in"))
    state = f"{query.location}/deltaflow"
    refused = re.escape(f"checkpoint at '{state}' holds a checkpoint of another pipeline")
    with pytest.raises(ValueError, match=refused):
        dfspark.stream(
            pipes.Split(),
            spark,
            words=words,
            schema={"words": "word string", "lengths": "length int, words long"},
            path=str(tmp_path / "split"),
            checkpoint_location=query.location,
        )
    shutil.rmtree(state)
    with query.start(2) as running:
        assert running.resumed_at is None
        query.write(1)
        with pytest.raises(df.CheckpointError, match="micro-batches 0 to 0 is missing"):
            running.process_all_available()
    assert sunk_rows(spark, query) == expected(1)


def test_several_outputs_to_tables_resume_and_are_sunk_once(spark: Any, tmp_path: Path) -> None:
    """A ``build()`` returning a dict, each output to its own table: micro-batch 1 sunk into
    both tables but not checkpointed (the manifest's name taken), then the query restarted
    with another worker count: each table holds df.run's output for its output, once."""
    directory = tmp_path / "in"
    directory.mkdir()
    location = tmp_path / "query"
    tables = {"words": "checkpointed_words", "lengths": "checkpointed_lengths"}
    batches = [["cat", "horse"], ["cat", "dog"], ["emu", "cat"]]

    def start(partitions: int) -> Any:
        return split_stream(
            spark, directory, tables, partitions=partitions, checkpoint_location=str(location)
        )

    def write(b: int) -> None:
        path = tmp_path / f".{b}.json"
        path.write_text("".join(json.dumps({"word": w}) + "\n" for w in batches[b]))
        os.utime(path, (_EPOCH + b, _EPOCH + b))
        path.rename(directory / f"{b}.json")

    blocker = location / "deltaflow" / "checkpoint-000002.json"
    with start(2) as running:
        write(0)
        running.process_all_available()
        blocker.mkdir()
        write(1)
        with pytest.raises(df.CheckpointError):
            running.process_all_available()
    blocker.rmdir()
    with start(1) as running:
        assert running.resumed_at == 1
        running.process_all_available()
        write(2)
        running.process_all_available()
    assert_split_tables(spark, tables, batches)


def test_a_second_query_on_a_location_is_refused_until_the_first_stops(
    spark: Any, tmp_path: Path
) -> None:
    """The driver holds the checkpoint location while its query runs: a second query on it
    (and a ``df.open`` job on its state) is refused before anything starts, naming the
    location and the holder; once the first stops, the second resumes where it ended."""
    query = Query(spark, tmp_path, path=str(tmp_path / "out"))
    state = f"{query.location}/deltaflow"
    with query.start(2) as running:
        query.write(1)
        running.process_all_available()
        with pytest.raises(df.CheckpointError, match=f"{re.escape(state)}.* in use by another"):
            query.start(1)

        async def open_state() -> None:
            async with df.open(pipes.WordCount(), checkpoint=state):
                pass

        with pytest.raises(df.CheckpointError, match=f"pid {os.getpid()}"):
            trio.run(open_state)
    with query.start(1) as running:
        assert running.resumed_at == 1
        query.write(1)
        running.process_all_available()
    assert sunk_rows(spark, query) == expected(2)
