"""Workers in separate processes: what ``processes=2`` buys on this 2-core machine.

* ``w4x10.load`` — W4 (BFS) at ten times its size (1,000,000 nodes, 2,000,000 edges, same
  generator): the initial load, from the job open to time 0 complete, in one process
  (``workers=1``) and with ``processes=2`` (two workers, one per process), side by side in one
  run; the processes' start-up (interpreters started, pipeline shipped, mesh connected) is
  reported apart (``startup_s``).
* ``w2.interactive`` — W2 (reachability) single-edge rounds/s in one process and with
  ``processes=2``.
* ``tcp.batch`` — one update batch of 10,000,000 ``(int, int)`` pairs from a worker in one
  process to a worker in another through :class:`~deltaflow.scheduler.tcp.TcpTransport`,
  against ``pickle.loads(pickle.dumps(batch, 5))`` in one process.

    python benchmarks/bench_processes.py [--quick] [--only w4x10,w2,tcp]

Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import time
from typing import Any

import trio
from bench_workloads import Bfs, Reachability, _singles, answer_w4
from workloads import w2_reach, w4_bfs

import deltaflow as df
from deltaflow.operators.base import UpdateBatch
from deltaflow.scheduler.mesh import connect_mesh
from deltaflow.scheduler.tcp import TcpTransport


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


# -- what the machine gives two processes right now ----------------------------------------
def _spin(_: object = None) -> float:
    start = time.perf_counter()
    d: dict[int, int] = {}
    for i in range(3_000_000):
        d[i & 1023] = d.get(i & 1023, 0) + i
    return time.perf_counter() - start


def bench_capacity() -> None:
    """A pure-Python loop alone, then in two processes at once: the speed-up the machine
    offers two processes at this moment (other jobs share its two cores)."""
    import multiprocessing

    one = _spin()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_spin, [0, 0])
        two = pool.map(_spin, [0, 0])
    emit({"figure": "capacity", "one_s": one, "two_parallel_s": two,
          "speedup": 2 * one / max(two)})  # fmt: skip


# -- W4x10 initial load --------------------------------------------------------------------
async def _w4_load(processes: int, root: int, edges: list[Any]) -> dict[str, Any]:
    opened = time.perf_counter()
    async with df.open(Bfs(), processes=processes) as job:
        start = time.perf_counter()
        job.inputs["roots"].insert(root)
        job.inputs["edges"].insert_many(edges)
        await job.advance_to(1)
        load_s = time.perf_counter() - start
        answer = answer_w4(job.output.at(0))
        startup_s = getattr(job, "startup_s", None)
    return {
        "processes": processes,
        "startup_s": startup_s if startup_s is not None else start - opened,
        "load_s": load_s,
        **answer,
    }


def bench_w4x10(quick: bool) -> None:
    nodes, n_edges = (100_000, 200_000) if quick else (1_000_000, 2_000_000)
    root, edges, _ = w4_bfs(nodes=nodes, edges=n_edges, rounds=1)
    one = trio.run(_w4_load, 1, root, edges)
    two = trio.run(_w4_load, 2, root, edges)
    emit({"figure": "w4x10.load", "nodes": nodes, "edges": n_edges, "one_process": one,
          "processes_2": two, "speedup": one["load_s"] / two["load_s"],
          "same_answer": one["reached"] == two["reached"] and one["dist_sum"] == two["dist_sum"],
          "target": 1.6})  # fmt: skip


# -- W2 interactive ------------------------------------------------------------------------
async def _w2_rounds(processes: int, rounds: list[Any]) -> dict[str, Any]:
    roots, init, _ = w2_reach()
    async with df.open(Reachability(), processes=processes) as job:
        job.inputs["roots"].insert_many(roots)
        job.inputs["edges"].insert_many(init)
        await job.advance_to(1)
        edges = job.inputs["edges"]
        lat = []
        for t, ((ins, ret),) in enumerate(rounds, start=1):
            s = time.perf_counter()
            edges.insert(ins)
            edges.remove(ret)
            await job.advance_to(t + 1)
            lat.append(time.perf_counter() - s)
        pairs = len(job.output.at(len(rounds)))
    lat.sort()
    return {"processes": processes, "rounds_per_s": len(lat) / sum(lat),
            "p50_ms": lat[len(lat) // 2] * 1e3, "pairs": pairs}  # fmt: skip


def bench_w2(quick: bool) -> None:
    _, _, rounds = w2_reach()
    rounds = _singles(rounds[: 200 if quick else 1000])
    one = trio.run(_w2_rounds, 1, rounds)
    two = trio.run(_w2_rounds, 2, rounds)
    emit({"figure": "w2.interactive", "one_process": one, "processes_2": two,
          "ratio": two["rounds_per_s"] / one["rounds_per_s"], "target": 0.5})  # fmt: skip


# -- one big batch through the TCP transport -----------------------------------------------
class _Sink:
    """Stands where a worker would: takes the batch, then answers with a progress batch."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.event = trio.Event()

    def receive(self, node: int, port: int, time: Any, payload: Any) -> None:
        self.got.append(payload)
        self.event.set()

    def receive_progress(self, changes: Any) -> None:
        self.event.set()


async def _peer(index: int, rendezvous: Any, pairs: int) -> float | None:
    links = await connect_mesh(index, 2, rendezvous, "bench")
    failures: list[BaseException] = []
    tcp = TcpTransport(index, 1, links, failures.append)
    sink = _Sink()
    tcp.attach([sink])  # type: ignore[list-item]
    elapsed = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tcp.run)
        if index == 0:
            batch = UpdateBatch([(i, i + 1) for i in range(pairs)], [1] * pairs)
            start = time.perf_counter()
            tcp.send_data(0, 1, 0, 0, 0, batch)
            await sink.event.wait()  # the other side's answer: it holds the whole batch
            elapsed = time.perf_counter() - start
        else:
            await sink.event.wait()
            assert len(sink.got[0].data) == pairs and sink.got[0].data[-1] == (pairs - 1, pairs)
            tcp.broadcast_progress(1, [])
        tcp.finish()
    assert not failures, failures
    return elapsed


def _receiver(address: str, pairs: int) -> None:
    async def rendezvous(mine: str) -> list[str]:
        return [address, mine]

    trio.run(_peer, 1, rendezvous, pairs)


def bench_tcp(quick: bool) -> None:
    pairs = 1_000_000 if quick else 10_000_000
    batch = UpdateBatch([(i, i + 1) for i in range(pairs)], [1] * pairs)
    start = time.perf_counter()
    pickle.loads(pickle.dumps(batch, 5))
    local_s = time.perf_counter() - start
    del batch
    child: list[subprocess.Popen[bytes]] = []

    async def rendezvous(mine: str) -> list[str]:
        command = [sys.executable, __file__, "--receiver", mine, str(pairs)]
        child.append(subprocess.Popen(command))  # noqa: ASYNC220 - it starts the peer it waits for
        return [mine, "unused:0"]

    tcp_s = trio.run(_peer, 0, rendezvous, pairs)
    child[0].wait()
    assert tcp_s is not None
    emit({"figure": "tcp.batch", "pairs": pairs, "pickle_roundtrip_s": local_s,
          "tcp_s": tcp_s, "ratio": local_s / tcp_s, "target": 0.8})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--receiver"]:
        _receiver(args[1], int(args[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--only", default="capacity,w4x10,w2,tcp,capacity")
    ns = parser.parse_args(args)
    benches = {
        "capacity": lambda quick: bench_capacity(),
        "w4x10": bench_w4x10,
        "w2": bench_w2,
        "tcp": bench_tcp,
    }
    for name in ns.only.split(","):
        benches[name](ns.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
