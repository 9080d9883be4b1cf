"""Workers in separate processes: what ``processes=2`` buys on this 2-core machine.

* ``w4x10.load`` — W4 (BFS) at ten times its size (1,000,000 nodes, 2,000,000 edges, same
  generator): the initial load, from the job open to time 0 complete, in one process
  (``workers=1``) and with ``processes=2`` (two workers, one per process), side by side in one
  run; the processes' start-up (interpreters started, pipeline shipped, mesh connected) is
  reported apart (``startup_s``).
* ``w4x10.peak_rss`` — the peak resident memory of those loads, each in a fresh process: the
  process holding a one-process job (the generated edges included, and their share before
  the job opens), and with ``processes=2`` the caller and the largest worker.
* ``w2.interactive`` — W2 (reachability) single-edge rounds/s in one process and with
  ``processes=2``.
* ``tcp.batch`` — one update batch of 10,000,000 ``(int, int)`` pairs from a worker in one
  process to a worker in another through :class:`~deltaflow.scheduler.net.tcp.TcpTransport`,
  against ``pickle.loads(pickle.dumps(batch, 5))`` in one process.
* ``tls`` — what TLS costs a link: the same batch, and 5,000 round trips of a small frame
  between two processes (a progress message and its answer), over plain authenticated TCP
  and over TLS, side by side; and the time to connect a mesh of two processes (start-up,
  the handshake included) either way.

    python benchmarks/bench_processes.py [--quick] [--only w4x10,w2,tcp,tls]

Prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import trio
from bench_workloads import Bfs, Reachability, _singles, answer_w4
from workloads import w2_reach, w4_bfs

import deltaflow as df
from deltaflow.operators.base import UpdateBatch
from deltaflow.scheduler.net.handshake import new_secret
from deltaflow.scheduler.net.mesh import connect_mesh
from deltaflow.scheduler.net.tcp import TcpTransport


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
        startup_s = getattr(job.placement, "startup_s", None)
    return {
        "processes": processes,
        "startup_s": startup_s if startup_s is not None else start - opened,
        "load_s": load_s,
        **answer,
    }


def _w4x10_child(processes: int, nodes: int, n_edges: int) -> None:
    """One W4x10 load in this (fresh) process: its figures and the peak resident memory of
    this process and of the worker processes it started."""
    root, edges, _ = w4_bfs(nodes=nodes, edges=n_edges, rounds=1)
    generated_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = trio.run(_w4_load, processes, root, edges)
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["data_rss_mb"] = generated_mb
    if processes > 1:
        result["workers_max_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(result), flush=True)


def bench_w4x10(quick: bool) -> None:
    """The W4x10 load in one process and with ``processes=2``, each in a fresh process so
    that its peak resident memory is its own (``max_rss_mb``: the process holding the job,
    the generated edges included, ``data_rss_mb`` their share before the job opens;
    ``workers_max_rss_mb``: the largest worker process)."""
    nodes, n_edges = (100_000, 200_000) if quick else (1_000_000, 2_000_000)
    runs = []
    for processes in (1, 2):
        cmd = [sys.executable, __file__, "--w4x10-child", str(processes), str(nodes),
               str(n_edges)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.splitlines()[-1]))
    one, two = runs
    emit({"figure": "w4x10.load", "nodes": nodes, "edges": n_edges, "one_process": one,
          "processes_2": two, "speedup": one["load_s"] / two["load_s"],
          "same_answer": one["reached"] == two["reached"] and one["dist_sum"] == two["dist_sum"],
          "target": 1.6})  # fmt: skip
    emit({"figure": "w4x10.peak_rss", "one_process_max_rss_mb": one["max_rss_mb"],
          "data_rss_mb": one["data_rss_mb"], "processes_2_max_rss_mb": two["max_rss_mb"],
          "processes_2_workers_max_rss_mb": two.get("workers_max_rss_mb")})  # fmt: skip


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


async def _peer(
    index: int, rendezvous: Any, pairs: int, secret: bytes, tls: df.TLS | None
) -> float | None:
    links = await connect_mesh(index, 2, rendezvous, "bench", secret=secret, tls=tls)
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
    """The receiving peer; the secret and the TLS files (if any) come on stdin."""
    secret, tls = pickle.load(sys.stdin.buffer)

    async def rendezvous(mine: str) -> list[str]:
        return [address, mine]

    trio.run(_peer, 1, rendezvous, pairs, secret, tls)


def _tcp_batch(pairs: int, tls: df.TLS | None) -> float:
    """Seconds for one batch of ``pairs`` to cross to a peer process (with ``tls``)."""
    secret = new_secret()
    child: list[subprocess.Popen[bytes]] = []

    async def rendezvous(mine: str) -> list[str]:
        command = [sys.executable, __file__, "--receiver", mine, str(pairs)]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE)  # noqa: ASYNC220 - the peer it waits for
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps((secret, tls)))
        proc.stdin.close()
        child.append(proc)
        return [mine, "unused:0"]

    tcp_s = trio.run(_peer, 0, rendezvous, pairs, secret, tls)
    child[0].wait()
    assert tcp_s is not None
    return tcp_s


def bench_tcp(quick: bool) -> None:
    pairs = 1_000_000 if quick else 10_000_000
    batch = UpdateBatch([(i, i + 1) for i in range(pairs)], [1] * pairs)
    start = time.perf_counter()
    pickle.loads(pickle.dumps(batch, 5))
    local_s = time.perf_counter() - start
    del batch
    tcp_s = _tcp_batch(pairs, None)
    emit({"figure": "tcp.batch", "pairs": pairs, "pickle_roundtrip_s": local_s,
          "tcp_s": tcp_s, "ratio": local_s / tcp_s, "target": 0.8})  # fmt: skip


# -- what TLS costs a link ------------------------------------------------------------------
async def _ping(index: int, rendezvous: Any, rounds: int, secret: bytes, tls: Any) -> Any:
    """Peer 0 sends ``rounds`` small frames one at a time, each answered by peer 1; peer 0
    returns the seconds per round trip."""
    links = await connect_mesh(index, 2, rendezvous, "ping", secret=secret, tls=tls)
    (link,) = links.values()
    message = [("p", [(False, 3, 0, 17, 1), (True, 4, 0, 17, -1)])]
    start = time.perf_counter()
    for _ in range(rounds):
        if index == 0:
            await link.send_frame(message)
            await link.receive()
        else:
            await link.send_frame(await link.receive())
    per_round = (time.perf_counter() - start) / rounds
    await link.aclose()
    return per_round if index == 0 else None


def _pinger(address: str, rounds: int) -> None:
    """The answering peer of :func:`_ping`; the secret and TLS come on stdin."""
    secret, tls = pickle.load(sys.stdin.buffer)

    async def rendezvous(mine: str) -> list[str]:
        return [address, mine]

    trio.run(_ping, 1, rendezvous, rounds, secret, tls)


def _roundtrip(rounds: int, tls: Any) -> float:
    secret = new_secret()
    child: list[subprocess.Popen[bytes]] = []

    async def rendezvous(mine: str) -> list[str]:
        command = [sys.executable, __file__, "--pinger", mine, str(rounds)]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE)  # noqa: ASYNC220 - the peer it waits for
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps((secret, tls)))
        proc.stdin.close()
        child.append(proc)
        return [mine, "unused:0"]

    result = trio.run(_ping, 0, rendezvous, rounds, secret, tls)
    child[0].wait()
    return result  # type: ignore[no-any-return]


async def _connect_twice(times: int, tls: Any) -> float:
    """Seconds per mesh of two peers in this process: bind, dial, accept, TLS (with
    ``tls``) and the secret's exchange, both ends."""
    secret = new_secret()
    start = time.perf_counter()
    for _ in range(times):
        addresses: dict[int, str] = {}
        both = trio.Event()

        async def peer(
            i: int, addresses: dict[int, str] = addresses, both: trio.Event = both
        ) -> None:
            async def rendezvous(mine: str) -> list[str]:
                addresses[i] = mine
                if len(addresses) == 2:
                    both.set()
                await both.wait()
                return [addresses[0], addresses[1]]

            links = await connect_mesh(i, 2, rendezvous, "connect", secret=secret, tls=tls)
            for link in links.values():
                await link.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer, 0)
            nursery.start_soon(peer, 1)
    return (time.perf_counter() - start) / times


def bench_tls(quick: bool) -> None:
    import tempfile

    import trustme

    with tempfile.TemporaryDirectory() as directory:
        ca = trustme.CA()
        cert = f"{directory}/peer.pem"
        ca.issue_cert("deltaflow-peer").private_key_and_cert_chain_pem.write_to_path(cert)
        ca.cert_pem.write_to_path(f"{directory}/ca.pem")
        tls = df.TLS(cert, ca=f"{directory}/ca.pem")
        pairs = 1_000_000 if quick else 10_000_000
        rounds = 1_000 if quick else 5_000
        plain_rt, tls_rt, plain_c, tls_c = [], [], [], []
        for _ in range(3):  # alternating, medians
            plain_rt.append(_roundtrip(rounds, None))
            tls_rt.append(_roundtrip(rounds, tls))
            plain_c.append(trio.run(_connect_twice, 50, None))
            tls_c.append(trio.run(_connect_twice, 50, tls))
        plain_batch = _tcp_batch(pairs, None)
        tls_batch = _tcp_batch(pairs, tls)
    median = statistics.median
    emit({"figure": "tls.roundtrip", "rounds": rounds, "plain_us": median(plain_rt) * 1e6,
          "tls_us": median(tls_rt) * 1e6})  # fmt: skip
    emit({"figure": "tls.connect", "plain_ms": median(plain_c) * 1e3,
          "tls_ms": median(tls_c) * 1e3})  # fmt: skip
    emit({"figure": "tls.batch", "pairs": pairs, "plain_s": plain_batch, "tls_s": tls_batch,
          "ratio": tls_batch / plain_batch})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--receiver"]:
        _receiver(args[1], int(args[2]))
        return 0
    if args[:1] == ["--w4x10-child"]:
        _w4x10_child(int(args[1]), int(args[2]), int(args[3]))
        return 0
    if args[:1] == ["--pinger"]:
        _pinger(args[1], int(args[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--only", default="capacity,w4x10,w2,tcp,tls,capacity")
    ns = parser.parse_args(args)
    benches = {
        "capacity": lambda quick: bench_capacity(),
        "w4x10": bench_w4x10,
        "w2": bench_w2,
        "tcp": bench_tcp,
        "tls": bench_tls,
    }
    for name in ns.only.split(","):
        benches[name](ns.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
