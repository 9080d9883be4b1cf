"""Jobs run in processes of their own and killed with SIGKILL at random moments.

Each job runs in a process forked from a server process that imported deltaflow and psycopg
once (``multiprocessing``'s forkserver): a trial costs a fork and the job's start, not a
fresh interpreter's imports, so many trials fit in a test's time. The process is a real one,
killed by a real SIGKILL, wherever the job stands.

A job is a module-level function ``job(started, *args)`` that calls ``started()`` once the
job is open (so the killer does not kill a process still starting) and returns when done.
"""

from __future__ import annotations

import multiprocessing
import random
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import trio
from tests.postgres.shop import Revenue

import deltaflow as df

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["deltaflow", "psycopg", "trio", "tests.postgres.killing"])


def _child(conn: Connection, job: Callable[..., None], args: tuple[Any, ...]) -> None:
    try:
        job(lambda: conn.send("started"), *args)
    except BaseException:
        conn.send(traceback.format_exc())
        raise SystemExit(1) from None
    conn.send("done")


def run_killed(
    job: Callable[..., None],
    args: tuple[Any, ...],
    rng: random.Random,
    *,
    kill: bool,
    pause: float = 0.3,
    during: Callable[[], None] | None = None,
) -> bool:
    """Run ``job(started, *args)`` in a forked process; with ``kill``, SIGKILL it at a random
    moment within ``pause`` seconds after it started (``during()`` run first, while it
    runs), else wait until it finishes. Returns whether it was killed (not: it had finished
    first).

    Raises:
        AssertionError: the job failed (its traceback), or finished before it was killed.
    """
    here, there = CONTEXT.Pipe(duplex=False)
    process = CONTEXT.Process(target=_child, args=(there, job, args))
    process.start()
    there.close()
    try:
        if not here.poll(120):
            raise AssertionError("the job did not start within 120 s")
        try:
            first = here.recv()
        except EOFError:
            first = f"the job's process ended with exit code {process.exitcode}"
        if first != "started":
            raise AssertionError(first)
        if during is not None:
            during()
        if kill:
            time.sleep(rng.uniform(0.0, pause))
            if process.is_alive():
                process.kill()
                process.join()
                try:
                    last = here.recv() if here.poll() else None
                except EOFError:
                    last = None  # killed before it said anything more
                if last is None:
                    return True
                # It ended before the kill reached it.
                if last != "done":
                    raise AssertionError(last)
                return False
        if not here.poll(120):
            raise AssertionError("the job did not finish within 120 s")
        try:
            last = here.recv()
        except EOFError:
            process.join(30)
            last = f"the job's process ended with exit code {process.exitcode}"
        if last != "done":
            raise AssertionError(last)
        return False
    finally:
        if process.is_alive():
            process.kill()
            process.join()
        here.close()


def follow_batches(
    started: Callable[[], None],
    dsn: str,
    table: str,
    location: str,
    batches: list[list[tuple[Any, int]]],
) -> None:
    """Follow ``batches`` (an iterable source) into a changelog table, two workers,
    checkpointing every third batch."""

    async def main() -> None:
        sink = df.sinks.postgres(dsn, table, mode="changelog")
        source = df.sources.iterable(batches, updates=True)
        async with df.open(
            Revenue(),
            workers=2,
            checkpoint=location,
            sources={"orders": source},
            sinks={"output": sink},
        ) as job:
            started()
            await job.follow(checkpoint_every=3)

    trio.run(main)


def follow_table(
    started: Callable[[], None], dsn: str, slot: str, table: str, location: str, once: bool
) -> None:
    """Follow the table ``orders`` into a changelog table, checkpointing every second
    transaction: for ever, or (``once``) what is committed now."""

    async def main() -> None:
        source = df.sources.postgres(dsn, "orders", slot=slot, poll=0.05)
        sink = df.sinks.postgres(dsn, table, mode="changelog")
        async with df.open(
            Revenue(), checkpoint=location, sources={"orders": source}, sinks={"output": sink}
        ) as job:
            started()
            await job.follow(once=once, checkpoint_every=2)

    trio.run(main)
