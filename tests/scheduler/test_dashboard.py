"""The live dashboard over HTTP: who may read it, what it answers, that its counts are the
job's, and that no client can stall the job."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from hypothesis import given, settings, strategies as st

import deltaflow as df
from deltaflow.scheduler.dashboard import Dashboard, check_dashboard


class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w, ())).count()


class SlowCounts(df.Pipeline):
    """Counts whose map takes 0.3 s a record: its output lags behind its inputs."""

    def build(self, words: df.Collection) -> df.Collection:
        def slow(w: str) -> tuple[str, tuple[()]]:
            time.sleep(0.3)
            return (w, ())

        return words.map(slow).count()


def _get(
    url: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request to the dashboard at ``url`` (blocking: run it in a thread)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


async def get(url: str, path: str, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
    return await trio.to_thread.run_sync(lambda: _get(url, path, **kwargs))


async def stats(url: str) -> dict[str, Any]:
    query = urlsplit(url).query
    status, _, body = await get(url, "/api/stats" + (f"?{query}" if query else ""))
    assert status == 200, body
    result: dict[str, Any] = json.loads(body)
    return result


async def closed(sock: trio.socket.SocketType) -> bool:
    """Whether the server closed ``sock`` (waiting for it): an end of stream or, data left
    unread on its side, a reset."""
    try:
        return await sock.recv(100) == b""
    except ConnectionResetError:
        return True


def test_dashboard_argument_is_a_port_or_a_host_and_port() -> None:
    """Ports from 0 to 65535, alone (loopback) or with a host; anything else a ValueError."""
    assert check_dashboard(0) == ("127.0.0.1", 0)
    assert check_dashboard(("::1", 80)) == ("::1", 80)
    for bad in (-1, 65536, True, "80", 8.0, ("", 1), (1, 2), ("h", 1, 2)):
        with pytest.raises(ValueError, match="dashboard must be a port"):
            check_dashboard(bad)
    with pytest.raises(ValueError, match="dashboard must be a port"):
        df.open(Counts(), dashboard="8050")  # type: ignore[arg-type]


async def test_no_dashboard_no_url() -> None:
    """Without ``dashboard=`` nothing is served and the job has no URL."""
    async with df.open(Counts()) as job:
        assert job.dashboard_url is None


async def test_loopback_page_script_and_json_shapes() -> None:
    """On loopback the page, its script and style, the graph and the live state are served
    without a token; the graph is the plan's; unknown paths 404, other methods 405."""
    async with df.open(Counts(), workers=2, dashboard=0) as job:
        url = job.dashboard_url
        assert url is not None and url.startswith("http://127.0.0.1:") and "token" not in url
        status, headers, page = await get(url, "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert b'src="dashboard.js"' in page and b"<svg" not in page
        assert "script-src 'self'" in headers["content-security-policy"]
        for path, kind in (("/dashboard.js", "text/javascript"), ("/dashboard.css", "text/css")):
            status, headers, body = await get(url, path)
            assert status == 200 and headers["content-type"].startswith(kind) and body
        status, _, body = await get(url, "/api/graph")
        graph = json.loads(body)
        assert [n["label"][0] for n in graph["nodes"]] == [n.name for n in job.plan.nodes]
        assert {(e["source"], e["target"], e["exchange"]) for e in graph["edges"]} == {
            (0, 1, True),
            (1, 2, False),
        }
        assert all(n["w"] > 0 and n["h"] > 0 for n in graph["nodes"])
        snap = await stats(url)
        assert set(snap) >= {
            "pipeline", "state", "time", "edges", "operators", "outputs", "workers",
            "processes", "checkpoints", "counters", "missing", "output_rate", "elapsed",
        }  # fmt: skip
        assert snap["pipeline"] == "Counts" and snap["state"] == "running"
        assert snap["outputs"] == [
            {"name": "output", "frontier": ["0"], "done": False, "lag_times": 0,
             "lag_seconds": 0.0, "published": 0}
        ]  # fmt: skip
        assert [w["index"] for w in snap["workers"]] == [0, 1]
        assert snap["processes"][0]["pid"] == os.getpid()
        assert snap["processes"][0]["rss"] > 1_000_000
        assert snap["checkpoints"] is None
        for path in ("/nothing", "/api", "/api/stats/x", "/index.html"):
            status, _, body = await get(url, path)
            assert status == 404 and json.loads(body)["error"] == "not found"
        status, _, _ = await get(url, "/api/stats", method="POST")
        assert status == 405
        status, headers, body = await get(url, "/api/stats", method="HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0


async def test_loopback_refuses_a_foreign_host_header() -> None:
    """A page elsewhere cannot read a loopback dashboard through a rebound name: a request
    whose Host is not loopback is refused."""
    async with df.open(Counts(), dashboard=0) as job:
        url = job.dashboard_url
        assert url is not None
        port = urlsplit(url).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            status, _, _ = await get(url, "/api/stats", headers={"Host": host})
            assert status == 200, host
        for host in (f"evil.example:{port}", "evil.example", f"10.0.0.1:{port}"):
            status, _, body = await get(url, "/api/stats", headers={"Host": host})
            assert status == 403 and b"pipeline" not in body, host


async def test_off_loopback_every_path_needs_the_token() -> None:
    """Bound to every interface the dashboard needs the URL's token on every path (the page,
    its script, the JSON); a missing or wrong token is a 403 revealing nothing."""
    async with df.open(Counts(), dashboard=("0.0.0.0", 0)) as job:
        url = job.dashboard_url
        assert url is not None
        token = urlsplit(url).query.removeprefix("token=")
        assert len(token) >= 40
        for path in ("/", "/dashboard.js", "/api/stats", "/api/graph", "/nothing"):
            for query in ("", "?token=", f"?token={token[:-1]}", f"?token={token}x", "?t=1"):
                status, _, body = await get(url, path + query)
                assert status == 403 and b"Counts" not in body, (path, query)
        status, _, page = await get(url, f"/?token={token}")
        assert status == 200 and f'src="dashboard.js?token={token}"'.encode() in page
        status, _, _ = await get(url, f"/dashboard.css?token={token}")
        assert status == 200
        status, _, body = await get(url, f"/nothing?token={token}")
        assert status == 404
        assert (await stats(url))["pipeline"] == "Counts"


def test_the_token_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The log says where the dashboard is, never its token."""

    async def main() -> str:
        async with df.open(Counts(), dashboard=("0.0.0.0", 0)) as job:
            assert job.dashboard_url is not None
            return job.dashboard_url

    with caplog.at_level("DEBUG", logger="deltaflow"):
        url = trio.run(main)
    token = urlsplit(url).query.removeprefix("token=")
    logged = [r.getMessage() for r in caplog.records]
    assert any("dashboard served at" in m for m in logged)
    assert not any(token in m for m in logged)


def children() -> set[int]:
    """The pids of this process's children (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == os.getpid():
                found.add(int(entry.name))
    return found


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_taken_port_is_an_error_before_the_job_starts(processes: int) -> None:
    """A port already listened on: OSError on entering, and no worker process started."""
    before = children()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(OSError):
            async with df.open(Counts(), 2, processes=processes, dashboard=port):
                pytest.fail("entered")
    assert children() <= before


@pytest.mark.parametrize("workers", [1, 3])
@settings(max_examples=8, deadline=None)
@given(batches=st.lists(st.lists(st.sampled_from("abcdefg"), max_size=30), min_size=1, max_size=4))
def test_edge_counts_are_the_records_that_crossed(workers: int, batches: list[list[str]]) -> None:
    """The records on the input's edge are those fed; the count's edge carries the
    count's output updates; each output's published figure is what it published."""

    async def main() -> None:
        async with df.open(Counts(), workers, dashboard=0) as job:
            assert job.dashboard_url is not None
            for t, words in enumerate(batches):
                job.inputs["words"].insert_many(words)
                await job.advance_to(t + 1)
                snap = await stats(job.dashboard_url)
                fed = sum(len(b) for b in batches[: t + 1])
                edges = {(e["source"], e["target"]): e for e in snap["edges"]}
                assert edges[0, 1]["records"] == fed
                assert edges[1, 2]["records"] == job.output.published
                assert snap["outputs"][0]["published"] == job.output.published
                assert snap["outputs"][0]["frontier"] == [str(t + 1)]
                assert snap["time"] == t + 1
                assert all(e["rate"] >= 0 for e in snap["edges"])

    trio.run(main)


async def test_arrangements_per_worker_add_up_to_the_operators() -> None:
    """Each worker's arranged updates per operator sum to the operator's: a shared
    arrangement's are the updates its spines hold, a join's those it keeps of a side."""

    class Shared(df.Pipeline):
        def build(self, a: df.Collection, b: df.Collection) -> df.Collection:
            arranged = b.arrange_by_key()
            return a.join(arranged).concat(a.map(lambda kv: (kv[0], kv[1] + 1)).join(arranged))

    async with df.open(Shared(), workers=2, dashboard=0) as job:
        for i in range(20):
            job.inputs["a"].insert((i % 5, i))
            job.inputs["b"].insert((i % 4, -i))
        await job.advance_to(1)
        assert job.dashboard_url is not None
        snap = await stats(job.dashboard_url)
    spines = [
        s.statistics().updates
        for node in job.builder.spec.nodes
        if node.traits.arrangement is not None
        for s in node.traits.arrangement.spines.values()
    ]
    assert sum(spines) == 20  # b's shared trace; each join keeps its own history of a
    arranged = [(op["name"], op["arranged"]) for op in snap["operators"] if op["arranged"]]
    assert arranged == [("arrange_by_key", 20), ("join_map", 20), ("join_map", 20)], arranged
    total = sum(op["arranged"] for op in snap["operators"])
    assert sum(sum(w["arranged"]) for w in snap["workers"]) == total
    assert sum(p["arranged"] for p in snap["processes"]) == total


async def test_checkpoint_history(tmp_path: Path) -> None:
    """Each checkpoint taken appears with its sequence and time, in the statistics and on
    the dashboard."""
    async with df.open(Counts(), dashboard=0, checkpoint=tmp_path) as job:
        assert job.dashboard_url is not None
        assert (await stats(job.dashboard_url))["checkpoints"] == []
        for t in (1, 2):
            job.inputs["words"].insert("w")
            await job.advance_to(t)
            await job.checkpoint()
        snap = await stats(job.dashboard_url)
    got = [(c["sequence"], c["time"], c["ok"]) for c in snap["checkpoints"]]
    assert got == [(1, 1, True), (2, 2, True)]
    assert all(c["seconds"] >= 0 and c["at"] > 0 for c in snap["checkpoints"])
    # leaving the block wrote a third
    assert [c["sequence"] for c in job.statistics()["checkpoints"]] == [1, 2, 3]


@pytest.mark.parametrize("processes", [1, 2])
async def test_a_failed_checkpoint_is_in_the_history(tmp_path: Path, processes: int) -> None:
    """A checkpoint that could not be written shows as failed, at its time, among the ones
    that were."""
    async with df.open(Counts(), 2, processes=processes, checkpoint=tmp_path) as job:
        for t in (1, 2, 3):
            job.inputs["words"].insert("w")
            await job.advance_to(t)
            if t == 2:
                blocker = tmp_path / "checkpoint-000002.json"  # where its manifest goes
                blocker.mkdir()
                with pytest.raises(df.CheckpointError):
                    await job.checkpoint()
                blocker.rmdir()
            else:
                await job.checkpoint()
    history = job.statistics()["checkpoints"]  # leaving the block wrote one more
    got = [(c["sequence"], c["time"], c["ok"]) for c in history]
    assert got == [(1, 1, True), (2, 2, False), (2, 3, True), (3, 3, True)]
    assert all(0 <= c["seconds"] < 60 for c in history)


async def test_other_counters_appear_generically() -> None:
    """Every number statistics() holds outside the views of their own is a counter."""
    async with df.open(Counts(), dashboard=0) as job:
        assert job.dashboard_url is not None
        snap = await stats(job.dashboard_url)
    assert snap["counters"] == {
        "arrangements": 1,
        "proposals": 0,
        **{f"inputs.words.{n}": 0 for n in ("read", "accepted", "refused", "skipped")},
        "inputs.words.quarantined": 0,
        "outputs.output.written": 0,
    }


async def test_failed_job_shows_its_error() -> None:
    """A failed job's page says so, with the operator's error."""

    class Broken(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.map(lambda x: 1 // x)

    async with df.open(Broken(), dashboard=0) as job:
        job.inputs["xs"].insert(0)
        with pytest.raises(df.OperatorError):
            await job.advance_to(1)
        assert job.dashboard_url is not None
        snap = await stats(job.dashboard_url)
        assert snap["state"] == "failed" and "ZeroDivisionError" in snap["error"]


async def test_idle_and_excess_connections_never_stall_the_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Clients that connect and say nothing, more than the cap: the job advances as ever,
    a connection beyond the cap is closed at once, the idle ones at the timeout, and the
    dashboard answers again afterwards."""
    monkeypatch.setattr(Dashboard, "TIMEOUT_S", 1.0)
    async with df.open(Counts(), dashboard=0) as job:
        assert job.dashboard_url is not None
        port = urlsplit(job.dashboard_url).port
        assert port is not None
        idle = []
        for _ in range(Dashboard.MAX_CONNECTIONS):
            sock = trio.socket.socket()
            await sock.connect(("127.0.0.1", port))
            idle.append(sock)
        half = trio.socket.socket()  # a request head that never ends
        await half.connect(("127.0.0.1", port))
        await half.send(b"GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with trio.fail_after(5):
            for t in range(1, 30):
                job.inputs["words"].insert("w")
                await job.advance_to(t)
        with trio.fail_after(2):
            assert await closed(half)  # beyond the cap: closed at once
        with trio.fail_after(5):
            for sock in idle:
                assert await closed(sock)  # closed at the timeout
        for sock in [*idle, half]:
            sock.close()
        with trio.fail_after(5):
            assert (await stats(job.dashboard_url))["time"] == 29


async def test_a_huge_request_head_is_refused() -> None:
    """A request head beyond the limit gets a 400 (or a closed connection), and the
    dashboard goes on."""
    async with df.open(Counts(), dashboard=0) as job:
        assert job.dashboard_url is not None
        port = urlsplit(job.dashboard_url).port
        assert port is not None
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", port))
        head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n"
        with trio.fail_after(5):
            with contextlib.suppress(OSError):
                await sock.send(head)
            try:
                reply = await sock.recv(100)
            except ConnectionResetError:
                reply = b""
        sock.close()
        assert reply == b"" or reply.startswith(b"HTTP/1.1 400"), reply
        assert (await stats(job.dashboard_url))["pipeline"] == "Counts"


def test_processes_report_workers_memory_and_lag() -> None:
    """With two processes the parent shows both processes' workers (their pids, memory and
    arrangements as last reported), the records crossing each edge summed over them, and an
    output held back by slow workers lagging, in times and seconds."""

    async def main() -> None:
        async with df.open(SlowCounts(), workers=2, processes=2, dashboard=0) as job:
            url = job.dashboard_url
            assert url is not None
            job.inputs["words"].insert_many(["a", "b", "c", "d"])
            await job.advance_to(1)
            snap = await stats(url)
            assert len(snap["processes"]) == 2
            pids = {p["pid"] for p in snap["processes"]}
            assert len(pids) == 2 and os.getpid() not in pids
            assert all(p["rss"] > 1_000_000 for p in snap["processes"])
            assert sorted(w["index"] for w in snap["workers"]) == [0, 1]
            edges = {(e["source"], e["target"]): e for e in snap["edges"]}
            assert edges[0, 1]["records"] == 4
            # Slow workers: the output stays behind while the caller's loop answers.
            job.inputs["words"].insert_many(["e"] * 4)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(job.advance_to, 5)
                await trio.sleep(0.5)
                snap = await stats(url)
                (out,) = snap["outputs"]
                assert out["frontier"] == ["1"] and out["lag_times"] == 4
                assert out["lag_seconds"] >= 0.4
            snap = await stats(url)
            assert snap["outputs"][0]["lag_times"] == 0
            assert snap["outputs"][0]["lag_seconds"] == 0.0

    trio.run(main)
