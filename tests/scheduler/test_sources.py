"""Sources against a from-scratch recompute: ``df.run`` over a files source (CSV, JSON lines
and Parquet, with retractions, each file one time) and over an iterable source; a job
following a directory as files appear, stopped, checkpointed and resumed, feeding each file
exactly once; offsets in the checkpoint; bad sources and bad files named."""

from __future__ import annotations

import io
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import accumulate
from tests.reference import assert_matches_oracle
from tests.scheduler.visits import (
    FILES,
    PAGES,
    USERS,
    TypedVisitors,
    Visitors,
    batches_as_collection,
    updates_of,
    visitors,
    write,
)

import deltaflow as df
from deltaflow.framework.durable.manifest import unseal


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


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_files_written_while_a_job_follows_appear_whole(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tests' files appear whole, as a followed directory asks: nothing is ever open for
    writing under a name the files source reads (it would read a file caught empty as no
    rows, and consume it), and each file then holds its rows."""
    opened: list[str] = []
    real_open = io.open

    def watching_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, Path)) and Path(file).parent == tmp_path and "r" not in mode:
            opened.append(Path(file).name)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", watching_open)
    rows = [("ann", "home", 1), ("bob", "cart", 1)]
    path = write(tmp_path, 0, rows, fmt)
    monkeypatch.undo()
    assert opened
    assert all(name.startswith((".", "_")) for name in opened), opened
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    out = df.run(Visitors(), clicks=df.sources.files(tmp_path))
    assert sorted(out) == [(("cart", 1), 0, 1), (("home", 1), 0, 1)]


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


@attrs.define(eq=False)
class Transactions:
    """A :class:`df.sources.MultiSource` over in-process transactions, each a mapping from
    input names to ``(datum, diff)`` pairs: one batch per transaction, for every input."""

    transactions: list[dict[str, list[tuple[Any, int]]]]
    opened: list[Any] = attrs.field(factory=list)
    acknowledged: list[Any] = attrs.field(factory=list)

    async def open(self, input: str, schema: Any, offset: Any) -> Any:
        return await self.open_inputs({input: schema}, offset)

    async def open_inputs(self, inputs: Any, offset: Any) -> Any:
        self.opened.append((sorted(inputs), offset))
        return TransactionsReader(self, list(inputs), offset or 0)


@attrs.define(eq=False)
class TransactionsReader:
    source: Transactions
    inputs: list[str]
    at: int

    async def read(self, wait: bool) -> df.sources.Batch | None:
        while self.at < len(self.source.transactions):
            tx = self.source.transactions[self.at]
            self.at += 1
            parts = {
                name: ([d for d, _ in pairs], [r for _, r in pairs])
                for name, pairs in tx.items()
                if name in self.inputs
            }
            if parts:
                return df.sources.Batch.of_inputs(parts, offset=self.at)
        return None

    def acknowledge(self, offset: Any) -> None:
        self.source.acknowledged.append(offset)

    async def aclose(self) -> None:
        pass


class Owners(df.Pipeline):
    """Pages per owner: clicks ``(user, page)`` joined with owners ``(user, owner)``."""

    def build(self, clicks: df.Collection, owners: df.Collection) -> df.Collection:
        return clicks.join(owners).map(lambda kv: (kv[1][1], kv[1][0])).distinct().count()


def owners_view(txs: list[dict[str, list[tuple[Any, int]]]]) -> dict[Any, int]:
    """From scratch: the distinct pages per owner after ``txs``."""
    clicks: Counter[Any] = Counter()
    owners: Counter[Any] = Counter()
    for tx in txs:
        for d, r in tx.get("clicks", []):
            clicks[d] += r
        for d, r in tx.get("owners", []):
            owners[d] += r
    pages: dict[Any, set[Any]] = {}
    for (user, page), n in clicks.items():
        for (u, owner), m in owners.items():
            if n > 0 and m > 0 and u == user:
                pages.setdefault(owner, set()).add(page)
    return {(owner, len(ps)): 1 for owner, ps in pages.items()}


def transactions_as_collections(
    txs: list[dict[str, list[tuple[Any, int]]]],
) -> list[dict[str, list[tuple[Any, int]]]]:
    """``txs`` with each input's updates made a collection at every time (see
    :func:`batches_as_collection`)."""
    out: list[dict[str, list[tuple[Any, int]]]] = [dict(tx) for tx in txs]
    for name in ("clicks", "owners"):
        fixed = batches_as_collection([tx.get(name, []) for tx in txs])
        for tx, pairs in zip(out, fixed):
            if pairs or name in tx:
                tx[name] = pairs
    return out


TRANSACTIONS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "clicks": st.lists(st.tuples(st.tuples(USERS, PAGES), st.sampled_from([1, 1, -1]))),
            "owners": st.lists(st.tuples(st.tuples(USERS, USERS), st.sampled_from([1, 1, -1]))),
        },
    ).filter(bool),
    max_size=8,
).map(transactions_as_collections)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(txs=TRANSACTIONS, stop=st.integers(0, 8), workers=st.sampled_from([1, 2]))
def test_a_source_of_several_inputs_feeds_each_transaction_at_one_time(
    tmp_path_factory: pytest.TempPathFactory,
    txs: list[dict[str, list[tuple[Any, int]]]],
    stop: int,
    workers: int,
) -> None:
    """One reader for both inputs; each transaction one time in both; the output at every
    time equal to a recompute over the transactions up to it; its offset saved once (under
    ``"clicks+owners"``), a job resumed on the checkpoint continuing after it."""
    state = tmp_path_factory.mktemp("multi") / "state"
    source = Transactions(txs[:stop])

    async def run() -> tuple[df.Job, int | None]:
        sources = {"clicks": source, "owners": source}
        async with df.open(Owners(), workers=workers, checkpoint=state, sources=sources) as job:
            await job.follow(once=True, checkpoint_every=3)
        return job, job.resumed_at

    job, resumed = trio.run(run)
    assert resumed is None
    for t in range(min(stop, len(txs))):
        assert {d: n for d, n in job.output.at(t).items() if n} == owners_view(txs[: t + 1])
    source.transactions = txs
    job, resumed = trio.run(run)
    assert resumed == min(stop, len(txs))
    assert job._sources.offsets == ({"clicks+owners": len(txs)} if txs else {})
    assert [inputs for inputs, _ in source.opened] == [["clicks", "owners"]] * 2
    assert [offset for _, offset in source.opened] == [None, resumed or None]
    for t in range(max(0, (resumed or 0) - 1), len(txs)):
        assert {d: n for d, n in job.output.at(t).items() if n} == owners_view(txs[: t + 1])


def test_a_batch_of_several_inputs_is_checked_whole() -> None:
    """A part an input refuses feeds nothing of the batch (the other part neither); a batch
    for an input the source was not given is refused, naming it."""

    class Both(df.Pipeline):
        schemas = {"clicks": "user string, page string"}

        def build(self, clicks: df.Collection, owners: df.Collection) -> df.Collection:
            return clicks.concat(owners)

    bad = Transactions([{"owners": [(("ann", "bob"), 1)], "clicks": [(("ann", 3), 1)]}])

    async def run(source: Any, names: list[str]) -> df.Job:
        async with df.open(Both(), sources=dict.fromkeys(names, source)) as job:
            with pytest.raises((TypeError, ValueError), match="input 'clicks'"):
                await job.follow(once=True)
            assert job.time == 0
            await job.advance_to(1)
            assert job.output.at(0) == {}  # nor the owners' part
        return job

    trio.run(run, bad, ["clicks", "owners"])
    stray = Transactions([{"clicks": [(("ann", "home"), 1)], "owners": [(("a", "b"), 1)]}])

    class Reader(TransactionsReader):
        async def read(self, wait: bool) -> df.sources.Batch | None:
            batch = await super().read(wait)
            if batch is not None and batch.parts is not None:
                return df.sources.Batch.of_inputs({**batch.parts, "ghost": ([1], [1])}, 1)
            return batch

    class Stray(Transactions):
        async def open_inputs(self, inputs: Any, offset: Any) -> Any:
            return Reader(self, list(inputs), 0)

    async def stray_run() -> None:
        source = Stray(stray.transactions)
        async with df.open(Both(), sources={"clicks": source, "owners": source}) as job:
            with pytest.raises(ValueError, match=r"other inputs \['ghost'\]"):
                await job.follow(once=True)

    trio.run(stray_run)


def test_a_job_without_a_checkpoint_acknowledges_each_batch_once_fed() -> None:
    """Without ``checkpoint=`` a job never resumes from an offset (started again, it reads
    its sources afresh): each batch is acknowledged as soon as it is fed, so a source that
    holds data for its reader (a replication slot) releases it as the job goes."""

    class Same(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    source = Numbered(4)

    async def run() -> None:
        async with df.open(Same(), sources={"xs": source}) as job:
            await job.follow(once=True)

    trio.run(run)
    assert source.acknowledged == [1, 2, 3, 4]


class Pair(df.Pipeline):
    """Distinct pages per owner, as :class:`Owners`, with the clicks and owners concatenated
    with a second input of clicks."""

    def build(
        self, clicks: df.Collection, owners: df.Collection, more: df.Collection
    ) -> df.Collection:
        return Owners().build(clicks.concat(more), owners)


RAW_BATCHES = st.lists(
    st.lists(st.tuples(st.tuples(USERS, PAGES), st.sampled_from([1, 1, -1])), max_size=4),
    min_size=1,
    max_size=4,
)
BATCHES = RAW_BATCHES.map(batches_as_collection)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clicks=RAW_BATCHES.filter(any).map(batches_as_collection),
    more=BATCHES,
    owners=st.lists(st.tuples(USERS, USERS), max_size=4),
)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_source_without_an_offset_never_feeds_a_resumed_state_twice(
    tmp_path_factory: pytest.TempPathFactory,
    workers: int,
    clicks: list[list[tuple[Any, int]]],
    more: list[list[tuple[Any, int]]],
    owners: list[tuple[str, str]],
) -> None:
    """A job fed ``clicks`` and ``owners`` by hand, checkpointed, then resumed with a source
    for ``clicks`` (which has no offset in the checkpoint): refused before anything is fed,
    naming the input and what to do. Resumed with a source for ``more`` (fed nothing before
    the checkpoint) instead: it starts from its beginning, and the output equals a recompute
    over everything fed."""
    state = tmp_path_factory.mktemp("added") / "state"

    async def first() -> int:
        async with df.open(Pair(), workers=workers, checkpoint=state) as job:
            for batch in clicks:
                job.inputs["clicks"].extend([d for d, _ in batch], [r for _, r in batch])
                await job.advance_to(job.time + 1)
            job.inputs["owners"].insert_many(owners)
            await job.advance_to(job.time + 1)
        return job.time

    assert trio.run(first) == len(clicks) + 1
    source = df.sources.iterable(clicks, updates=True)

    async def again(sources: dict[str, Any]) -> df.Job:
        async with df.open(Pair(), workers=workers, checkpoint=state, sources=sources) as job:
            await job.follow(once=True)
        return job

    with pytest.raises(ValueError, match=r"input 'clicks'.*IterableSource.*fresh=True") as info:
        trio.run(again, {"clicks": source})
    assert "counted twice" in str(info.value)
    # Refused before anything was fed or written: the checkpoint is as it was.
    last = sorted(state.glob("checkpoint-*.json"))[-1]
    assert unseal(last.read_bytes(), str(last))["time"] == len(clicks) + 1

    job = trio.run(again, {"more": df.sources.iterable(more, updates=True)})
    assert job.resumed_at == len(clicks) + 1 and job.time == len(clicks) + 1 + len(more)
    fed = [*(c for batch in clicks for c in batch), *(c for batch in more for c in batch)]
    expected = owners_view([{"clicks": fed, "owners": [(o, 1) for o in owners]}])
    assert {d: n for d, n in job.output.at(job.time - 1).items() if n} == expected


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("saved", ["apart", "together"])
def test_sources_grouped_otherwise_than_the_checkpoint_are_refused(
    tmp_path: Path, saved: str, processes: int
) -> None:
    """A checkpoint whose offsets were saved under ``"clicks"`` and ``"owners"`` (a source
    each), resumed with one source feeding both (its offset under ``"clicks+owners"``), or
    the other way round: refused, naming the keys, before anything is fed."""
    state = tmp_path / "state"
    txs = [{"clicks": [(("ann", "home"), 1)], "owners": [(("ann", "bob"), 1)]}] * 2
    one, other = Transactions(txs), Transactions(txs)

    async def run(sources: dict[str, Any]) -> None:
        async with df.open(
            Owners(), workers=processes, processes=processes, checkpoint=state, sources=sources
        ) as job:
            await job.follow(once=True)

    apart = {"clicks": one, "owners": other}
    together = {"clicks": one, "owners": one}
    trio.run(run, apart if saved == "apart" else together)
    opened = len(one.opened) + len(other.opened)
    with pytest.raises(ValueError, match=r"grouped otherwise.*fresh=True") as info:
        trio.run(run, together if saved == "apart" else apart)
    assert "'clicks+owners'" in str(info.value)
    assert len(one.opened) + len(other.opened) == opened  # nothing opened, nothing fed
    trio.run(run, apart if saved == "apart" else together)  # as it was: fine
