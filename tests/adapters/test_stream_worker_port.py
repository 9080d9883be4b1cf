"""A Spark stream worker's data port serves on when its process runs short of file
descriptors: the worker (:class:`deltaflow.adapters.spark._stream_tasks._Worker`, with a real
peer of its dataflow) runs in a child process whose ``RLIMIT_NOFILE`` is lowered, strangers
flood its port from this process, and a micro-batch's feeding and fetching tasks (their own
code, :func:`~deltaflow.adapters.spark._stream_tasks._request`) still reach it.

No Spark session: the worker's port is the part under test, and a child process is the only
way to lower one process's descriptor limit."""

from __future__ import annotations

import textwrap
import time

import pytest
import trio
from tests.adapters import spark_pipelines as pipes
from tests.attacks import Stranger, silent, start_script

import deltaflow as df
from deltaflow.scheduler.net.handshake import new_secret

pytest.importorskip("pyspark")
from deltaflow.adapters.spark._batch import Security
from deltaflow.adapters.spark._stream_tasks import _request

_WORKER = textwrap.dedent(
    """
    import logging
    import resource
    import sys

    import trio
    import trio.testing

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), hard))
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")

    from deltaflow.adapters.spark._batch import Security
    from deltaflow.adapters.spark._logs import Kept
    from deltaflow.adapters.spark._stream_tasks import _Reader, _Worker
    from deltaflow.scheduler.net.peer import open_peer
    from tests.adapters.spark_pipelines import WordCount

    secret = bytes.fromhex(sys.argv[2])


    async def main():
        async with open_peer(
            WordCount(), index=0, peers=1, rendezvous=lambda me: [me], secret=secret
        ) as peer:
            worker = _Worker(peer, 0, Security(secret, None), Kept("worker 0"))
            ours, drivers = trio.testing.memory_stream_pair()
            driver = _Reader(drivers)  # this process plays the driver, as the test says
            async with trio.open_nursery() as nursery:
                print(await nursery.start(worker.serve), flush=True)
                nursery.start_soon(worker.obey, _Reader(ours))
                while line := (await trio.to_thread.run_sync(sys.stdin.readline)).split():
                    _, batch, parts = line
                    parts = [int(p) for p in parts.split(",")]
                    # (no output in the answer: the test fetches it from the port)
                    await driver.send(("step", int(batch), parts, {}, 0))
                    reply = await driver.receive()
                    while reply[0] == "log":
                        reply = await driver.receive()
                    print(reply[0], flush=True)
                await driver.send(("stop",))
                nursery.cancel_scope.cancel()


    trio.run(main)
    """
)

LINES = [("the cat sat", 1), ("the dog", 1), ("a cat", 1)]


def test_a_flooded_worker_port_short_of_file_descriptors_serves_on() -> None:
    """400 silent strangers on the port of a worker whose process may hold 48 descriptors:
    ``accept()`` fails with ``EMFILE``, logged at WARNING; the oldest waiting strangers make
    room, and a micro-batch's rows reach the worker and its output comes back right."""
    secret = new_secret()
    security = Security(secret, None)
    worker = start_script(_WORKER, "48", secret.hex(), SPARK_LOCAL_IP="127.0.0.1")
    crowd: list[Stranger] = []
    try:
        assert worker.stdout is not None and worker.stdin is not None
        address = worker.stdout.readline().strip()
        assert address, worker.stderr.read() if worker.stderr else ""
        crowd += silent(address, 400)
        start = time.monotonic()
        fed = trio.run(_request, address, 0, security, ("feed", 0, 0, {"lines": LINES}), 0)
        assert fed == ("fed", 0, 0)
        worker.stdin.write("step 0 0\n")
        worker.stdin.flush()
        assert worker.stdout.readline().strip() == "done"
        answer = trio.run(_request, address, 0, security, ("fetch", 0), 0)
        elapsed = time.monotonic() - start
        worker.stdin.write("\n")
        worker.stdin.flush()
        _, err = worker.communicate(timeout=60)
    finally:
        for s in crowd:
            s.close()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert answer[0] == "out", answer
    want = df.run(pipes.WordCount(), lines=[(line, 0, r) for line, r in LINES])
    assert sorted(answer[2]) == sorted(want)
    assert "stream worker 0 could not accept a connection on port" in err, err[-3000:]
    assert "Too many open files" in err, err[-3000:]
    assert elapsed < 20, elapsed
