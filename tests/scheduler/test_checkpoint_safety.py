"""Checkpoints that cannot lie: damage, a second job, and changed code are refused.

* every single-bit flip and every truncation of a real manifest, and every field of it given
  a value of the wrong type: a ``df.CheckpointError`` naming the location and the file, or a
  resume whose outputs equal an uninterrupted run's;
* each file of a checkpoint deleted in turn: the same;
* two jobs opening one location at once (threads, and processes): exactly one runs, the
  other is refused naming the location and the holder; a holder killed with ``-9`` never
  blocks a restart; a lease (the lock of object stores) likewise, stale after its timeout;
* a pipeline whose code changed: refused naming the operator, resumed with
  ``allow_code_change=True`` and a WARNING; the same code moved to other lines resumes, and
  the digests are the same in processes of other ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import deltaflow as df
from deltaflow.framework.durable import lock as lock_module
from deltaflow.framework.durable.code import digest
from deltaflow.framework.durable.manifest import seal
from deltaflow.framework.durable.store import CheckpointStore, _ArrowFiles
from deltaflow.scheduler.net.processes import ProcessPool

REPO = Path(__file__).resolve().parents[2]


class Counts(df.Pipeline):
    """A reduction and an arrangement kept: a manifest with tables, values and capabilities."""

    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w[0], w)).count()


def _feed(t: int) -> list[str]:
    rng = random.Random(t)
    return [rng.choice("abcde") + str(rng.randrange(4)) for _ in range(5)]


async def _write(location: Path, times: int = 4) -> None:
    """Two checkpoints (the second partly reusing the first's files) at ``times - 2`` and
    ``times``, with two workers."""
    async with df.open(Counts(), 2, checkpoint=location) as job:
        for t in range(times):
            job.inputs["words"].insert_many(_feed(t))
            if t == times - 2:
                job.inputs["words"].remove(_feed(0)[0])
                await job.checkpoint()
            await job.advance_to(t + 1)


class _Done(Exception):
    """Leaves a job's block without the checkpoint leaving it normally writes."""


async def _resume(location: Path, end: int = 7, workers: int = 3) -> tuple[int | None, Any]:
    """Resume and feed what an uninterrupted run would have been fed from there; where it
    resumed, and the output's collection at every time up to ``end`` (the location is left
    as it was)."""
    try:
        async with df.open(Counts(), workers, checkpoint=location) as job:
            start = job.resumed_at
            for t in range(job.time, end):
                job.inputs["words"].insert_many(_feed(t))
                await job.advance_to(t + 1)
            seen = [job.output.at(t) for t in range(max((start or 1) - 1, 0), end)]
            raise _Done
    except _Done:
        return start, seen


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int | None, Any]]:
    """A location holding a checkpoint (kept pristine), and what resuming it gives."""
    location = tmp_path_factory.mktemp("pristine") / "state"
    trio.run(_write, location)
    copy = tmp_path_factory.mktemp("reference") / "state"
    shutil.copytree(location, copy)
    return location, trio.run(_resume, copy)


def _copy(location: Path, into: Path) -> Path:
    target = into / f"copy-{random.randrange(10**9)}"
    shutil.copytree(location, target)
    return target


def _manifest(location: Path) -> Path:
    (manifest,) = location.glob("checkpoint-*.json")
    return manifest


def _resume_or_refuse(location: Path, want: tuple[int | None, Any]) -> str:
    """Resume ``location``: it must be refused with a CheckpointError naming it, or give
    exactly ``want``; which one."""
    try:
        got = trio.run(_resume, location)
    except df.CheckpointError as exc:
        assert str(location) in str(exc), exc
        return "refused"
    assert got == want
    return "resumed"


def test_the_uninterrupted_run_is_what_the_resume_gives(
    written: tuple[Path, tuple[int | None, Any]],
) -> None:
    """(The reference the other tests compare with is right: it resumed at 4 and equals a
    run that never stopped.)"""

    async def straight() -> list[Any]:
        async with df.open(Counts()) as job:
            for t in range(7):
                job.inputs["words"].insert_many(_feed(t))
                if t == 2:
                    job.inputs["words"].remove(_feed(0)[0])
                await job.advance_to(t + 1)
            return [job.output.at(t) for t in range(3, 7)]

    _, (resumed, outputs) = written
    assert resumed == 4
    assert outputs == trio.run(straight)


# -- damage -----------------------------------------------------------------------------------
def test_every_bit_flip_and_truncation_of_the_manifest_is_refused(
    written: tuple[Path, tuple[int | None, Any]], tmp_path: Path
) -> None:
    """Reading the manifest after each of its bits flipped (and each prefix of it): a
    CheckpointError naming the location and the file, or the very manifest; a sample of them
    resumed in full: refused, or the uninterrupted run's outputs."""
    pristine, want = written
    location = _copy(pristine, tmp_path)
    path = _manifest(location)
    raw = path.read_bytes()
    original = CheckpointStore(location).latest()
    rng = random.Random(43)
    flips = len(raw) * 8
    sample = set(rng.sample(range(flips + len(raw)), 12))
    fd = os.open(path, os.O_RDWR)  # (changed in place: rewriting the file is the slow part)
    try:
        # Each damage: bit ``i`` flipped, then (from ``flips`` on) the file cut short,
        # longest prefix first.
        for n in range(flips + len(raw)):
            if n < flips:
                byte = raw[n // 8] ^ (1 << (n % 8))
                os.pwrite(fd, bytes([byte]), n // 8)
            else:
                os.ftruncate(fd, flips + len(raw) - 1 - n)
            try:
                got = CheckpointStore(location).latest()
            except df.CheckpointError as exc:
                assert str(location) in str(exc) and path.name in str(exc), exc
            else:
                assert got == original, n
            if n in sample:
                assert _resume_or_refuse(_copy(location, tmp_path), want) == "refused"
            if n < flips:
                os.pwrite(fd, raw[n // 8 : n // 8 + 1], n // 8)
        os.pwrite(fd, raw, 0)
    finally:
        os.close(fd)
    assert _resume_or_refuse(location, want) == "resumed"


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value in a JSON document (containers included)."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))


def _replaced(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(doc))
    into = copy
    for step in path[:-1]:
        into = into[step]
    into[path[-1]] = new
    return copy


def test_every_field_of_the_wrong_type_is_refused(
    written: tuple[Path, tuple[int | None, Any]], tmp_path: Path
) -> None:
    """Each value of the manifest replaced by one of another type (or a negative number
    for an int), the manifest sealed again (as a faulty writer would): a
    CheckpointError (or the ValueError of another pipeline), never another exception, or
    the uninterrupted run's outputs."""
    pristine, want = written
    location = _copy(pristine, tmp_path)
    path = _manifest(location)
    body = json.loads(path.read_bytes().split(b"\n#sha256=")[0])
    outcomes: dict[str, int] = {}
    rng = random.Random(43)
    for leaf in _leaves(body):
        value = _replaced(body, (), body)
        for step in leaf:
            value = value[step]
        kind = type(value)
        for wrong in ("?", -1, {}, [], None, 1.5):
            if type(wrong) is kind and not (kind is int and wrong == -1):
                continue  # (another value of the same type: not what this test is about)
            path.write_bytes(seal(_replaced(body, leaf, wrong)))
            try:
                CheckpointStore(location).latest()
            except df.CheckpointError as exc:
                assert str(location) in str(exc) and path.name in str(exc), exc
                if rng.random() > 0.05:  # (refused when read: a sample opened in full)
                    outcomes["refused"] = outcomes.get("refused", 0) + 1
                    continue
            try:
                outcome = _resume_or_refuse(location, want)
            except ValueError as exc:
                assert "another pipeline" in str(exc) or "other code" in str(exc), (leaf, exc)
                outcome = "refused"
            except AssertionError as exc:
                raise AssertionError(f"{leaf} = {wrong!r}: resumed with another state") from exc
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes["refused"] > 100, outcomes


def test_each_file_deleted_in_turn_is_refused(
    written: tuple[Path, tuple[int | None, Any]], tmp_path: Path
) -> None:
    """The manifest (the data left: never a fresh start), each data file, the mark: refused,
    or (the mark, the lock) the uninterrupted run's outputs."""
    pristine, want = written
    names = sorted(str(p.relative_to(pristine)) for p in pristine.rglob("*") if p.is_file())
    assert len([n for n in names if n.startswith("data/")]) >= 2, names
    seen = {}
    for name in names:
        location = _copy(pristine, tmp_path)
        if (location / name).exists():
            (location / name).unlink()
        seen[name] = _resume_or_refuse(location, want)
    assert seen.pop("location.json") == "resumed"
    assert seen.pop("lock") == "resumed"
    assert set(seen.values()) == {"refused"}, seen


def test_a_deleted_manifest_and_mark_of_a_later_checkpoint_are_refused(
    written: tuple[Path, tuple[int | None, Any]], tmp_path: Path
) -> None:
    """Data files of a checkpoint after the first, but no manifest and no mark: refused too
    (only a first checkpoint cut short before its manifest leaves data alone)."""
    pristine, _ = written
    location = _copy(pristine, tmp_path)
    _manifest(location).unlink()
    (location / "location.json").unlink()
    with pytest.raises(df.CheckpointError, match="holds no manifest"):
        CheckpointStore(location).latest()
    first = tmp_path / "first"
    (first / "data").mkdir(parents=True)
    (first / "data" / "000001-job-00ff00ff.dfs").write_bytes(b"cut short")
    assert CheckpointStore(first).latest() is None


async def test_fresh_starts_a_damaged_location_over(
    written: tuple[Path, tuple[int | None, Any]], tmp_path: Path
) -> None:
    """``fresh=True``: every checkpoint there removed (a damaged one too), nothing else."""
    pristine, _ = written
    location = _copy(pristine, tmp_path)
    _manifest(location).unlink()
    (location / "notes.txt").write_text("mine")
    with pytest.raises(df.CheckpointError, match="fresh=True"):
        async with df.open(Counts(), checkpoint=location):
            pass
    async with df.open(Counts(), checkpoint=location, fresh=True) as job:
        assert job.resumed_at is None and job.time == 0
        assert sorted(p.name for p in location.iterdir()) == ["data", "lock", "notes.txt"]
        assert list((location / "data").iterdir()) == []
        job.inputs["words"].insert("ab")
        await job.advance_to(1)
    async with df.open(Counts(), checkpoint=location) as job:
        assert job.resumed_at == 1 and job.output.at(0) == {("a", 1): 1}
    with pytest.raises(ValueError, match="checkpoint=LOCATION"):
        df.open(Counts(), fresh=True)


# -- one job per location ----------------------------------------------------------------------
async def _hold(location: Path, attempted: threading.Barrier, outcome: list[str]) -> None:
    try:
        async with df.open(Counts(), checkpoint=location) as job:
            outcome.append("won")
            await trio.to_thread.run_sync(attempted.wait)
            job.inputs["words"].insert("ab")
            await job.advance_to(1)
    except df.CheckpointError as exc:
        outcome.append(str(exc))
        await trio.to_thread.run_sync(attempted.wait)


def test_two_threads_racing_for_a_location_one_wins(tmp_path: Path) -> None:
    """20 times, two jobs open one location at once: one runs (and checkpoints), the other
    is refused naming the location and the holder."""
    for attempt in range(20):
        location = tmp_path / f"race-{attempt}"
        attempted = threading.Barrier(2)
        outcomes: list[list[str]] = [[], []]
        threads = [
            threading.Thread(target=trio.run, args=(_hold, location, attempted, outcomes[i]))
            for i in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        flat = sorted(o[0] for o in outcomes)
        assert flat[1] == "won" and flat[0] != "won", flat
        assert str(location) in flat[0] and f"pid {os.getpid()}" in flat[0], flat[0]
        assert CheckpointStore(location).latest() is not None


RACER = """
import sys, trio
import deltaflow as df
sys.path.insert(0, {repo!r})
from tests.scheduler.test_checkpoint_safety import Counts

async def attempt(location):
    try:
        async with df.open(Counts(), checkpoint=location) as job:
            print("won", flush=True)
            sys.stdin.readline()
            job.inputs["words"].insert("ab")
            await job.advance_to(1)
    except df.CheckpointError as exc:
        print("refused", exc, flush=True)
        sys.stdin.readline()

for line in sys.stdin:
    trio.run(attempt, line.strip())
    print("done", flush=True)
"""


def _child(code: str) -> subprocess.Popen[str]:
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_processes_racing_for_a_location_one_wins(tmp_path: Path) -> None:
    """20 times, two processes open one location at once: one wins, the other is refused
    naming the location and the winner's pid."""
    racers = [_child(RACER.format(repo=str(REPO))) for _ in range(2)]
    try:
        for attempt in range(20):
            location = tmp_path / f"race-{attempt}"
            for r in racers:
                assert r.stdin is not None
                r.stdin.write(f"{location}\n")
                r.stdin.flush()
            said = [r.stdout.readline().strip() for r in racers if r.stdout is not None]
            won = [i for i, s in enumerate(said) if s == "won"]
            assert len(won) == 1, said
            loser = said[1 - won[0]]
            assert loser.startswith("refused") and str(location) in loser, loser
            assert f"pid {racers[won[0]].pid}" in loser, loser
            for r in racers:
                assert r.stdin is not None and r.stdout is not None
                r.stdin.write("\n")
                r.stdin.flush()
                assert r.stdout.readline().strip() == "done"
    finally:
        for r in racers:
            if r.stdin is not None:
                r.stdin.close()
            r.wait(30)
            if r.stdout is not None:
                r.stdout.close()


HOLDER = """
import sys, time, trio
import deltaflow as df
sys.path.insert(0, {repo!r})
from tests.scheduler.test_checkpoint_safety import Counts

async def main():
    async with df.open(Counts(), checkpoint={location!r}) as job:
        job.inputs["words"].insert("ab")
        await job.advance_to(1)
        await job.checkpoint()
        print("holding", flush=True)
        time.sleep(600)

trio.run(main)
"""


async def test_a_holder_killed_with_sigkill_never_blocks_a_restart(tmp_path: Path) -> None:
    """While a process holds the location a job is refused; killed with -9, the location
    opens again at once, at the holder's checkpoint."""
    location = tmp_path / "state"
    holder = _child(HOLDER.format(repo=str(REPO), location=str(location)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(df.CheckpointError, match=f"in use by another job .pid {holder.pid}"):
            async with df.open(Counts(), checkpoint=location):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()
    async with df.open(Counts(), checkpoint=location) as job:
        assert job.resumed_at == 1 and job.output.at(0) == {("a", 1): 1}


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPool]:
    with ProcessPool() as p:
        yield p


async def test_a_job_over_processes_holds_its_location(pool: ProcessPool, tmp_path: Path) -> None:
    """A ``processes=2`` job's caller holds the lock: another job is refused meanwhile, and
    the location is free once it ends; ``fresh=True`` starts it over."""
    location = tmp_path / "state"
    async with df.open(Counts(), 2, processes=2, checkpoint=location) as job:
        job.inputs["words"].insert("ab")
        await job.advance_to(1)
        with pytest.raises(df.CheckpointError, match=f"pid {os.getpid()}"):
            async with df.open(Counts(), checkpoint=location):
                pass
    async with df.open(Counts(), 2, processes=2, checkpoint=location) as job:
        assert job.resumed_at == 1
    async with df.open(Counts(), 2, processes=2, checkpoint=location, fresh=True) as job:
        assert job.resumed_at is None  # (started over by the caller, before the processes)
        job.inputs["words"].insert("cd")
        await job.advance_to(1)
    async with df.open(Counts(), checkpoint=location) as job:
        assert job.resumed_at == 1 and job.output.at(0) == {("c", 1): 1}


def _object_store(location: Path) -> CheckpointStore:
    """A store reached through the filesystem layer of object stores (no OS lock there):
    its lock is a lease."""
    import pyarrow.fs as pafs

    location.mkdir(exist_ok=True)
    store = CheckpointStore(f"mock:///{location.name}")
    store.files = _ArrowFiles(pafs.LocalFileSystem(), str(location))
    return store


def test_a_lease_refuses_a_second_job_and_goes_stale(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A second job is refused while the lease is renewed; released, or not renewed for
    ``LEASE_STALE_S`` (its holder died), it is taken; the holder it was taken from commits
    nothing more."""
    monkeypatch.setattr(lock_module, "LEASE_SETTLE_S", 0.05)
    monkeypatch.setattr(lock_module, "LEASE_RENEW_S", 0.1)
    monkeypatch.setattr(lock_module, "LEASE_STALE_S", 0.6)
    store = _object_store(tmp_path / "bucket")
    first = lock_module.acquire(store)
    time.sleep(0.8)  # renewed meanwhile: still live
    with pytest.raises(df.CheckpointError, match=r"in use by another job \(pid"):
        lock_module.acquire(_object_store(tmp_path / "bucket"))
    first.release()
    second = lock_module.acquire(_object_store(tmp_path / "bucket"))
    assert isinstance(second, lock_module._Lease)
    second._stop.set()  # its holder dies: no more renewals, no release
    second._thread.join()
    with pytest.raises(df.CheckpointError, match="in use by another job"):
        lock_module.acquire(_object_store(tmp_path / "bucket"))
    time.sleep(0.7)
    third = lock_module.acquire(_object_store(tmp_path / "bucket"))
    second._stop.clear()  # the old holder wakes up: its next renewal finds the lease gone
    second._renew_once()
    with pytest.raises(df.CheckpointError, match="taken over by another job"):
        second.check()
    third.release()


# -- changed code -------------------------------------------------------------------------------
PIPELINE = """
import deltaflow as df
{padding}
def first_letter(w):
    return {key}


class Keys(df.Pipeline):
    def build(self, words):
        return words.map(lambda w: (first_letter(w), w)).count()
"""


def _pipeline(tmp_path: Path, key: str, padding: str = "") -> df.Pipeline:
    """The pipeline of a module ``keys`` whose source says ``key``, as a new version of
    the same file (another folder each time: nothing cached)."""
    folder = tmp_path / f"v{random.randrange(10**9)}"
    folder.mkdir()
    source = folder / "keys.py"
    source.write_text(PIPELINE.format(key=key, padding=padding))
    spec = importlib.util.spec_from_file_location("keys", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pipe: df.Pipeline = module.Keys()
    return pipe


async def _run(pipe: df.Pipeline, location: Path, **kw: Any) -> df.Job:
    async with df.open(pipe, checkpoint=location, **kw) as job:
        job.inputs["words"].insert_many(["ab", "ac"])
        await job.advance_to(job.time + 1)
    return job


async def test_a_changed_function_is_refused_unless_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """String keys becoming ints: refused naming the operator; with
    ``allow_code_change=True`` resumed, with a WARNING; the same code on other lines, and
    the new code once accepted, resume silently."""
    location = tmp_path / "state"
    await _run(_pipeline(tmp_path, "w[0]"), location)
    moved = await _run(_pipeline(tmp_path, "w[0]", padding="\n\nX = 1\n\n"), location)
    assert moved.resumed_at == 1
    changed = _pipeline(tmp_path, "ord(w[0])")
    with pytest.raises(ValueError, match=r"other code.*'map\(keys\.Keys\.build") as info:
        await _run(changed, location)
    assert str(location) in str(info.value) and "allow_code_change=True" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        job = await _run(changed, location, allow_code_change=True)
    assert job.resumed_at == 2
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("other code" in r.getMessage() for r in warned), warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="deltaflow"):
        assert (await _run(changed, location)).resumed_at == 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_changed_helper_or_captured_value_is_noticed(tmp_path: Path) -> None:
    """The digest follows the globals a function names and the values its closure holds."""
    location = tmp_path / "state"
    await _run(_pipeline(tmp_path, "w[0] + SUFFIX", padding="SUFFIX = 'x'"), location)
    with pytest.raises(ValueError, match="other code"):
        await _run(_pipeline(tmp_path, "w[0] + SUFFIX", padding="SUFFIX = 'y'"), location)

    def counts(n: int) -> type[df.Pipeline]:
        class Capped(df.Pipeline):
            def build(self, words: df.Collection) -> df.Collection:
                return words.map(lambda w: (w[:n], w)).count()

        return Capped

    other = tmp_path / "other"
    await _run(counts(1)(), other)
    assert (await _run(counts(1)(), other)).resumed_at == 1
    with pytest.raises(ValueError, match="other code"):
        await _run(counts(2)(), other)


DIGESTS = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.scheduler.test_checkpoint import ALL
from tests.jobs import pipeline_of
from deltaflow.scheduler.state_layout import state_layout
from deltaflow.scheduler.local.plan import make_plan

out = {{}}
for name, (build, _) in sorted(ALL.items()):
    for workers, exchange in ((1, False), (3, False), (2, True)):
        b = pipeline_of(build).instantiate(workers, exchange_outputs=exchange)
        layout = state_layout(b, make_plan(b.spec, workers=workers))
        out.setdefault(name, []).append(layout.code)
print(json.dumps(out, sort_keys=True))
"""


def test_code_digests_are_the_same_in_every_process_and_layout() -> None:
    """Two interpreters of other ``PYTHONHASHSEED``: the same digests, for every shape of
    the checkpoint tests, whatever the workers and however outputs are exchanged."""
    seen = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        code = DIGESTS.format(repo=str(REPO))
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.append(json.loads(done.stdout))
    assert seen[0] == seen[1]
    for name, layouts in seen[0].items():
        assert all(layout == layouts[0] for layout in layouts), name
        assert any(entry["digest"] for entry in layouts[0].values()), name


def test_the_lock_file_is_not_inherited_by_child_processes(tmp_path: Path) -> None:
    """(A child started while a job runs must not keep the location locked after the job's
    process dies: the lock's descriptor is not inherited.)"""
    store = CheckpointStore(tmp_path)
    held = lock_module.acquire(store)
    try:
        assert isinstance(held, lock_module._Flock) and held._fd is not None
        assert not os.get_inheritable(held._fd)
    finally:
        held.release()


def test_digests_follow_the_values_functions_capture() -> None:
    """A table (or list, or set) a function captured: the same contents however they were
    built give the same digest, one value changed another; large ones quickly."""

    def reader(table: Any) -> Any:
        return lambda x: table[x]

    table = {i: str(i) for i in range(100_000)}
    backwards = dict(reversed(list(table.items())))
    changed = {**table, 5: "x"}
    started = time.perf_counter()
    assert digest(reader(table)) == digest(reader(backwards)) != digest(reader(changed))
    numbers = list(range(100_000))
    assert digest(reader(numbers)) != digest(reader([*numbers[:-1], -1]))
    words = {f"w{i}" for i in range(50)}
    added_backwards: set[str] = set()
    for w in sorted(words, reverse=True):
        added_backwards.add(w)
    assert digest(reader(words)) == digest(reader(added_backwards))
    assert digest(reader(words)) != digest(reader(words | {"x"}))
    assert digest(reader([1, "a", (2.5, None)])) != digest(reader([1, "a", (2.5, 0)]))
    assert time.perf_counter() - started < 30  # (seconds each element would take a hash of)


CACHED = """
import deltaflow as df
SEEN = {}


def first_letter(w):
    SEEN[w] = True  # (a cache: state, not code)
    return w[0]


class Keys(df.Pipeline):
    def __init__(self):
        self.memo = []

    def build(self, words):
        return words.map(lambda w: (first_letter(w), w, self.memo.append(w))[:2]).count()
"""


async def test_what_functions_fill_as_they_run_is_not_a_code_change(tmp_path: Path) -> None:
    """A module's dict a function fills (a global: counted by its type), and a list on the
    pipeline it appends to (counted by value, but taken when the job opens, before it
    fills): the job run again in the same process, the dict no longer empty, resumes."""
    folder = tmp_path / "cached"
    folder.mkdir()
    (folder / "cached.py").write_text(CACHED)
    spec = importlib.util.spec_from_file_location("cached", folder / "cached.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    location = tmp_path / "state"
    pipe = module.Keys()
    await _run(pipe, location)
    assert module.SEEN and pipe.memo
    assert (await _run(module.Keys(), location)).resumed_at == 1
