"""Sources against a from-scratch recompute: ``df.run`` over a files source (CSV, JSON lines
and Parquet, with retractions, each file one time) and over an iterable source; a job
following a directory as files appear, stopped, checkpointed and resumed, feeding each file
exactly once; offsets in the checkpoint; bad sources and bad files named."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import accumulate
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework.durable.manifest import unseal

USERS = st.sampled_from(["ann", "bob", "cy"])
PAGES = st.sampled_from(["home", "cart", "faq"])
ROWS = st.lists(st.tuples(USERS, PAGES, st.sampled_from([1, 1, 1, -1])), min_size=0, max_size=6)


def batches_as_collection(batches: list[list[Any]]) -> list[list[Any]]:
    """``batches`` of ``(data, diff)`` (batch ``i`` at time ``i``) with, in the first, as many
    more insertions of each datum as it is ever retracted: no count is negative at any time (a
    collection, as reductions require) and every retraction still retracts.

    >>> batches_as_collection([[("a", 1)], [("b", -1)]])
    [[('a', 1), ('b', 1)], [('b', -1)]]
    """
    fed = nonnegative([(d, i, r) for i, batch in enumerate(batches) for d, r in batch])
    out: list[list[Any]] = [[] for _ in batches]
    for d, i, r in fed:
        out[i].append((d, r))
    return out


def files_as_collection(files: list[tuple[list[Any], str]]) -> list[tuple[list[Any], str]]:
    """``files`` of ``(user, page, diff)`` rows with, in the first, rows inserting each click
    as many times as it is ever retracted (see :func:`batches_as_collection`)."""
    batches = [[((u, p), r) for u, p, r in rows] for rows, _ in files]
    return [
        ([(u, p, r) for (u, p), r in batch], fmt)
        for batch, (_, fmt) in zip(batches_as_collection(batches), files)
    ]


FILES = st.lists(st.tuples(ROWS, st.sampled_from(["csv", "jsonl", "parquet"])), max_size=6).map(
    files_as_collection
)


class Visitors(df.Pipeline):
    """How many distinct users visited each page."""

    def build(self, clicks: df.Collection) -> df.Collection:
        return clicks.map(lambda c: (c[1], c[0])).distinct().count()


class TypedVisitors(Visitors):
    schemas = {"clicks": "user string, page string"}


def visitors(c: dict[str, Counter[Any]]) -> Counter[Any]:
    pages: Counter[Any] = Counter()
    for (_, page), n in c["clicks"].items():
        if n > 0:
            pages[page] += 1
    return Counter(dict.fromkeys(pages.items(), 1))


def write(folder: Path, index: int, rows: list[tuple[str, str, int]], fmt: str) -> Path:
    """File ``index`` of a directory, its rows with a diff column, in ``fmt``."""
    path = folder / f"part-{index:04d}.{fmt}"
    if fmt == "csv":
        body = "".join(f"{u},{p},{r}\n" for u, p, r in rows)
        path.write_text("user,page,diff\n" + body)
    elif fmt == "jsonl":
        path.write_text(
            "".join(json.dumps({"user": u, "page": p, "diff": r}) + "\n" for u, p, r in rows)
        )
    else:
        columns = list(zip(*rows)) if rows else [[], [], []]
        table = pa.table(
            {
                "user": pa.array(columns[0], pa.string()),
                "page": pa.array(columns[1], pa.string()),
                "diff": pa.array(columns[2], pa.int64()),
            }
        )
        pq.write_table(table, path)
    return path


def updates_of(files: list[tuple[list[tuple[str, str, int]], str]]) -> list[Any]:
    """What the files feed, file ``i`` at time ``i`` (a JSON-lines file without rows feeds
    nothing, but is still a time)."""
    return [((u, p), i, r) for i, (rows, _) in enumerate(files) for u, p, r in rows]


@pytest.mark.parametrize("workers", [1, 2, 3])
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=FILES, typed=st.booleans())
def test_run_over_a_files_source_matches_a_recompute(
    files: list[Any], typed: bool, workers: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``df.run`` reads every file there, one per time, whatever the format."""
    folder = tmp_path_factory.mktemp("in")
    for i, (rows, fmt) in enumerate(files):
        write(folder, i, rows, fmt)
        # Oldest first is by modification time: make the order the files' order.
        (folder / f"part-{i:04d}.{fmt}").touch()
    pipe = TypedVisitors() if typed else Visitors()
    out = df.run(pipe, workers=workers, clicks=df.sources.files(folder, max_files=1))
    assert_matches_oracle(out, {"clicks": updates_of(files)}, visitors)
    # All new files in one batch: one time, the whole collection.
    out = df.run(pipe, workers=workers, clicks=df.sources.files(folder))
    final = Counter()
    for d, _, r in out:
        final[d] += r
    assert {d: n for d, n in final.items() if n} == dict(
        visitors({"clicks": Counter(accumulate(updates_of(files), len(files)))})
    )


@settings(max_examples=25)
@given(
    batches=st.lists(st.lists(st.tuples(st.tuples(USERS, PAGES), st.sampled_from([1, -1])))).map(
        batches_as_collection
    ),
    static=st.lists(st.tuples(st.tuples(USERS, PAGES), st.integers(0, 3), st.just(1))),
)
def test_run_over_an_iterable_source(batches: list[Any], static: list[Any]) -> None:
    """Each batch is one time, after the other inputs' last time."""

    class Both(df.Pipeline):
        def build(self, clicks: df.Collection, more: df.Collection) -> df.Collection:
            return Visitors().build(clicks.concat(more))

    out = df.run(Both(), clicks=df.sources.iterable(batches, updates=True), more=static)
    start = max((t for _, t, _ in static), default=-1) + 1
    fed = [(d, start + i, r) for i, batch in enumerate(batches) for d, r in batch]
    assert_matches_oracle(
        out, {"clicks": [*fed, *static]}, lambda c: visitors({"clicks": c["clicks"]})
    )


async def wait_until(job: df.Job, time: int) -> None:
    """Until the job's inputs have reached ``time`` (every file before fed)."""
    with trio.fail_after(30):
        while job.time < time:  # noqa: ASYNC110 - follow() in another task moves it
            await trio.sleep(0.01)


@pytest.mark.parametrize("processes", [1, 2])
def test_follow_picks_files_up_as_they_come_and_resumes_exactly_once(
    tmp_path: Path, processes: int
) -> None:
    """Files written while the job follows are fed, one time each; a job stopped and opened
    again on its checkpoint goes on from the next file, feeding none twice and losing none."""
    folder, state = tmp_path / "in", tmp_path / "state"
    folder.mkdir()
    batches = [
        [("ann", "home", 1), ("bob", "home", 1)],
        [("ann", "cart", 1)],
        [("ann", "home", -1), ("cy", "faq", 1)],
        [("bob", "cart", 1), ("bob", "cart", 1)],
        [("bob", "cart", -1)],
    ]
    source = df.sources.files(folder / "*.csv", poll=0.01, max_files=1)

    async def first() -> int:
        async with df.open(
            Visitors(), workers=2, processes=processes, checkpoint=state, sources={"clicks": source}
        ) as job:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(job.follow)
                for i in range(3):
                    write(folder, i, batches[i], "csv")
                    await wait_until(job, i + 1)
                nursery.cancel_scope.cancel()
            assert job.time == 3
        return job.time

    assert trio.run(first) == 3
    for i in range(3, 5):
        write(folder, i, batches[i], "csv")

    async def second() -> dict[Any, int]:
        async with df.open(
            Visitors(),
            workers=2 * processes,
            processes=processes,
            checkpoint=state,
            sources={"clicks": source},
        ) as job:
            assert job.resumed_at == 3
            assert await job.follow(once=True) == 2
            assert await job.follow(once=True) == 0
            assert job.time == 5
            return job.output.at(4)

    fed = [((u, p), i, r) for i, rows in enumerate(batches) for u, p, r in rows]
    expected = visitors({"clicks": Counter(accumulate(fed, len(batches)))})
    assert trio.run(second) == dict(expected)
    last = sorted(state.glob("checkpoint-*.json"))[-1]
    manifest = unseal(last.read_bytes(), str(last))
    assert [Path(p).name for p in manifest["sources"]["clicks"]] == [
        f"part-{i:04d}.csv" for i in range(5)
    ]


def test_a_bad_file_is_named_and_nothing_of_it_is_fed(tmp_path: Path) -> None:
    """A malformed file stops ``follow`` with an error naming the input, the file and the
    line; the files before it stay fed, and the bad one is read again once fixed."""
    folder = tmp_path / "in"
    folder.mkdir()
    write(folder, 0, [("ann", "home", 1)], "csv")
    bad = folder / "part-0001.csv"
    bad.write_text("user,page,diff\nbob,home,x\n")

    async def main() -> dict[Any, int]:
        source = df.sources.files(folder, max_files=1)
        async with df.open(Visitors(), sources={"clicks": source}) as job:
            with pytest.raises(ValueError, match=r"input 'clicks'.*part-0001.csv.*line 2"):
                await job.follow(once=True)
            assert job.time == 1
            bad.write_text("user,page,diff\nbob,home,1\n")
            assert await job.follow(once=True) == 1
            return job.output.at(1)

    assert trio.run(main) == {("home", 2): 1}


def test_sources_are_checked() -> None:
    """A source for an input the pipeline lacks, something that is not a source, bad
    arguments and ``follow`` without sources are clear errors."""

    async def open_with(sources: Any) -> None:
        async with df.open(Visitors(), sources=sources):
            pass

    with pytest.raises(ValueError, match="no input named 'nope'"):
        trio.run(open_with, {"nope": df.sources.iterable([])})
    with pytest.raises(TypeError, match=r"sources\['clicks'\]: \[1\] is not a source"):
        trio.run(open_with, {"clicks": [1]})
    with pytest.raises(ValueError, match="format must be one of"):
        df.sources.files("x", format="xml")
    with pytest.raises(ValueError, match="max_files must be"):
        df.sources.files("x", max_files=0)
    with pytest.raises(ValueError, match="poll must be a number of seconds"):
        df.sources.files("x", poll=0)

    async def no_sources() -> None:
        async with df.open(Visitors()) as job:
            await job.follow()

    with pytest.raises(ValueError, match="this job has no sources"):
        trio.run(no_sources)


def test_a_schema_holds_for_every_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A declared schema reads every file by name and type: columns in another order are
    taken by name, a column the schema lacks is an error naming it."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"page": "home", "user": "ann"}\n')
    out = df.run(TypedVisitors(), clicks=df.sources.files(folder))
    assert out == [(("home", 1), 0, 1)]
    (folder / "b.csv").write_text("user,page,extra\nbob,home,1\n")
    with caplog.at_level(logging.ERROR), pytest.raises(ValueError, match="'extra' is not declared"):
        df.run(TypedVisitors(), clicks=df.sources.files(folder))


def test_formats_by_extension_or_by_name(tmp_path: Path) -> None:
    """``.json`` and ``.ndjson`` are JSON lines; ``format=`` reads any extension; a file of
    no known format is an error naming it; hidden and ``_`` files are skipped."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text('{"user": "ann", "page": "home"}\n')
    (folder / "b.ndjson").write_text('{"user": "bob", "page": "home"}\n')
    (folder / ".c.csv").write_text("user,page\ncy,home\n")
    (folder / "_d.csv").write_text("user,page\ndan,home\n")
    assert df.run(Visitors(), clicks=df.sources.files(folder)) == [(("home", 2), 0, 1)]
    (folder / "e.txt").write_text("user,page\neve,faq\n")
    with pytest.raises(ValueError, match=r"'.*e\.txt': the format is not known"):
        df.run(Visitors(), clicks=df.sources.files(folder))
    out = df.run(Visitors(), clicks=df.sources.files(folder / "*.txt", format="csv"))
    assert out == [(("faq", 1), 0, 1)]


def test_following_for_ever_raises_a_bad_file_as_itself(tmp_path: Path) -> None:
    """``follow()`` (each source in its own task) raises the error naming the file, not a
    group of one."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("user,page,diff\nbob,home,x\n")

    async def main() -> None:
        source = df.sources.files(folder, poll=0.01)
        async with df.open(Visitors(), sources={"clicks": source}) as job:
            with pytest.raises(ValueError, match=r"a\.csv, line 2: column 'diff'"):
                await job.follow()

    trio.run(main)


class Numbered:
    """A source of its own for the protocol: batch ``i`` is ``[i]``, ``n`` of them, its
    offset the next ``i``; it records the offsets it is opened at and acknowledged."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.opened: list[Any] = []
        self.acknowledged: list[Any] = []

    async def open(self, input: str, schema: Any, offset: Any) -> Numbered.Reader:
        self.opened.append(offset)
        return Numbered.Reader(self, 0 if offset is None else offset)

    class Reader:
        def __init__(self, source: Numbered, at: int) -> None:
            self.source, self.at = source, at

        async def read(self, wait: bool) -> df.sources.Batch | None:
            if self.at >= self.source.n:
                return None
            self.at += 1
            return df.sources.Batch([self.at - 1], [1], offset=self.at)

        def acknowledge(self, offset: Any) -> None:
            self.source.acknowledged.append(offset)

        async def aclose(self) -> None:
            pass


def test_a_source_is_acknowledged_once_its_batches_are_durable(tmp_path: Path) -> None:
    """``acknowledge`` gets the offset a committed checkpoint holds, never one beyond it; a
    resumed job opens the source at that offset and reads on from there."""

    class Same(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    state = tmp_path / "state"
    source = Numbered(7)

    async def run(checkpoint_every: int | None) -> dict[Any, int]:
        async with df.open(Same(), checkpoint=state, sources={"xs": source}) as job:
            await job.follow(once=True, checkpoint_every=checkpoint_every)
            return job.output.at(job.time - 1)

    source.n = 5
    assert trio.run(run, 2) == dict.fromkeys(range(5), 1)
    # Checkpoints after batches 2 and 4 (offsets 2 and 4); the one at the block's end comes
    # after follow() closed its reader, and the next open carries it.
    assert source.opened == [None] and source.acknowledged == [2, 4]
    source.n = 7
    assert trio.run(run, None) == dict.fromkeys(range(7), 1)
    assert source.opened == [None, 5] and source.acknowledged == [2, 4]
