"""``processes=``: strangers on the worker processes' mesh ports never get decoded, never
change an answer, never hang a job or keep a process alive.

The test hooks the caller's rendezvous (``_Control._rendezvous``): once every process has
bound and published its port, and before any is told the others', strangers connect to every
port, so each stranger is queued ahead of the peers. Processes here are not pooled: each job
starts and ends its own, so a process left behind is seen.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from tests.attacks import (
    ATTACKS,
    Stranger,
    payload,
    script_env,
    silent,
    split_address,
    start_script,
)

import deltaflow as df
from deltaflow.errors import PeerLostError
from deltaflow.scheduler.net.processes import Processes, _Control


class Counts(df.Pipeline):
    """A reduction and a join: data cross between the processes both ways."""

    def build(self, xs: df.Collection) -> df.Collection:
        counts = xs.map(lambda x: (x % 7, x)).count()
        return counts.join_map(counts, lambda k, a, b: (k, a + b))


UPDATES = [(x, t, 1) for t in range(4) for x in range(t * 10, t * 10 + 25)] + [(3, 2, -1)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


Hook = Callable[[Callable[[Any, list[str]], Any]], None]


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    """``hook(fn)``: ``fn(control, addresses)`` runs once the processes have published their
    ports and before they learn each other's; it may return other addresses to publish."""
    original = _Control._rendezvous

    def install(fn: Callable[[Any, list[str]], Any]) -> None:
        async def rendezvous(self: _Control) -> list[str]:
            addresses = await original(self)
            changed = fn(self, addresses)
            return addresses if changed is None else changed

        monkeypatch.setattr(_Control, "_rendezvous", rendezvous)

    yield install


def _pids_of(control: _Control) -> list[int]:
    return [p.popen.pid for p in control.processes]


@pytest.mark.parametrize("attack", ATTACKS)
def test_strangers_on_the_mesh_are_refused_and_the_answer_is_right(
    attack: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    hook: Hook,
) -> None:
    marker = tmp_path / "marker"
    crowd: list[Stranger] = []
    pids: list[int] = []

    def attack_all(control: _Control, addresses: list[str]) -> None:
        pids.extend(_pids_of(control))
        for address in addresses:
            crowd.append(Stranger(split_address(address), payload(attack, marker, "mesh")))

    hook(attack_all)
    caplog.set_level(logging.WARNING, "deltaflow")
    start = time.monotonic()
    try:
        got = df.run(Counts(), processes=2, xs=UPDATES)
    finally:
        for s in crowd:
            s.close()
    assert time.monotonic() - start < 10  # no stranger held the start up
    assert got == df.run(Counts(), xs=UPDATES)
    assert not marker.exists(), "a worker process loaded a stranger's pickle"
    # Process 0 accepts (process 1 only dials): its refusal reaches the caller's logger.
    refusals = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"refused a connection from {crowd[0].name}" in r.getMessage() for r in refusals)
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), "a worker process outlived its job"


def test_open_jobs_refuse_strangers_too(tmp_path: Path, hook: Hook) -> None:
    marker = tmp_path / "marker"
    crowd: list[Stranger] = []

    def attack_all(control: _Control, addresses: list[str]) -> None:
        for address in addresses:
            crowd.append(Stranger(split_address(address), payload("pickle", marker, "mesh")))
            crowd.append(Stranger(split_address(address), b""))

    hook(attack_all)

    async def main() -> dict[Any, int]:
        async with df.open(Counts(), workers=4, processes=2) as job:
            for x, t, r in sorted(UPDATES, key=lambda u: u[1]):
                if t != job.time:
                    await job.advance_to(t)
                job.inputs["xs"].update(x, r)
            await job.advance_to(4)
            return job.output.at(3)

    try:
        got = trio.run(main)
    finally:
        for s in crowd:
            s.close()
    want: dict[Any, int] = {}
    for d, t, r in df.run(Counts(), xs=UPDATES):
        if t <= 3:
            want[d] = want.get(d, 0) + r
    assert got == {d: r for d, r in want.items() if r}
    assert not marker.exists()


def fails_with_peer_0_at(hook: Hook, fake: str, match: str, within: float) -> None:
    """Process 1 told ``fake`` as process 0's address: a ``processes=2`` job fails with a
    ``PeerLostError`` matching ``match`` within ``within`` seconds."""
    hook(lambda control, addresses: [fake, *addresses[1:]])
    start = time.monotonic()
    with pytest.raises(PeerLostError, match=match):
        df.run(Counts(), processes=2, xs=UPDATES)
    assert time.monotonic() - start < within


def test_a_wrong_peer_address_fails_the_job_naming_it(
    hook: Hook,
) -> None:
    """Process 1 is told a stranger's address for process 0: the stranger (which closes every
    connection at once) fails the handshake, and the job fails naming peer 0 and that
    address, without waiting for any deadline."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def close_everything() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=close_everything)
    thread.start()
    fake = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        fails_with_peer_0_at(hook, fake, f"could not authenticate peer 0 at {fake}", within=20)
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_peer_that_never_answers_is_named_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch, hook: Hook
) -> None:
    """Process 1 is told a silent listener's address for process 0: with a one-second
    connect deadline, the job fails naming the peer that did not connect."""
    monkeypatch.setattr(Processes, "CONNECT_TIMEOUT_S", 1.0)
    listener = socket.create_server(("127.0.0.1", 0))
    fake = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        late = r"peer\(s\) [01] at .* did not connect within 1"
        fails_with_peer_0_at(hook, fake, late, within=15)
    finally:
        listener.close()


_CALLER = textwrap.dedent(
    """
    import sys
    import trio
    import deltaflow as df
    from deltaflow.scheduler.net.processes import _Control
    from tests.attacks import Stranger, split_address

    phase = sys.argv[1]
    original = _Control._rendezvous
    crowd = []

    async def rendezvous(self):
        addresses = await original(self)
        crowd.extend(Stranger(split_address(a), b"") for a in addresses)
        print(" ".join(str(p.popen.pid) for p in self.processes), flush=True)
        if phase == "start":
            await trio.sleep_forever()
        return addresses

    _Control._rendezvous = rendezvous

    class Double(df.Pipeline):
        def build(self, xs):
            return xs.map(lambda x: 2 * x)

    async def main():
        async with df.open(Double(), processes=2) as job:
            job.inputs["xs"].insert(1)
            await job.advance_to(1)
            print("running", flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


@pytest.mark.parametrize("phase", ["start", "running"])
def test_no_worker_process_outlives_a_killed_caller(phase: str) -> None:
    """A caller killed (SIGKILL) while its mesh starts, with silent strangers holding every
    port, or while the job runs: its worker processes end within seconds."""
    caller = subprocess.Popen(
        [sys.executable, "-c", _CALLER, phase], stdout=subprocess.PIPE, text=True, env=script_env()
    )
    try:
        assert caller.stdout is not None
        pids = [int(p) for p in caller.stdout.readline().split()]
        assert len(pids) == 2
        if phase == "running":
            assert caller.stdout.readline().strip() == "running"
        assert all(_alive(p) for p in pids)
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        if caller.stdout is not None:
            caller.stdout.close()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, "worker processes outlived their caller"


def test_the_secret_is_not_on_any_command_line_or_environment(
    hook: Hook,
) -> None:
    """The worker processes' command lines and environments hold no secret: it travels only
    on their control sockets (the frame that ships the job)."""
    seen: dict[str, bytes] = {}
    secrets: list[bytes] = []
    import deltaflow.scheduler.net.processes as processes

    original = processes.new_secret

    def recording() -> bytes:
        secrets.append(original())
        return secrets[-1]

    def inspect(control: _Control, addresses: list[str]) -> None:
        for proc in control.processes:
            pid = proc.popen.pid
            for what in ("cmdline", "environ"):
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    seen[f"{pid}/{what}"] = f.read()

    hook(inspect)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(processes, "new_secret", recording)
        df.run(Counts(), processes=2, xs=UPDATES[:5])
    (secret,) = secrets
    assert len(seen) == 4
    for blob in seen.values():
        assert secret not in blob and secret.hex().encode() not in blob


_SHORT_OF_FILES = textwrap.dedent(
    """
    import logging
    import resource
    import sys

    # This process and the worker processes it starts may hold at most LIMIT descriptors,
    # fewer than a port's door lets wait: a flood leaves them short of descriptors.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), hard))
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")

    import deltaflow as df
    from deltaflow.scheduler.net.processes import _Control
    from tests.scheduler.net.test_strangers import UPDATES, Counts

    original = _Control._rendezvous

    async def rendezvous(self):
        addresses = await original(self)
        print(" ".join(addresses), flush=True)
        sys.stdin.readline()  # the test's strangers are in every port's queue
        return addresses

    _Control._rendezvous = rendezvous
    got = df.run(Counts(), processes=2, xs=UPDATES)
    print("right" if got == df.run(Counts(), xs=UPDATES) else f"wrong: {got}", flush=True)
    """
)


def test_a_flood_on_a_process_short_of_file_descriptors_fails_nothing() -> None:
    """400 silent strangers on each mesh port of a ``processes=2`` job whose processes may
    hold 48 descriptors (``RLIMIT_NOFILE``): ``accept()`` fails with ``EMFILE``, which is
    logged at WARNING and served through (the oldest waiting stranger turned away); the job
    gives the right answer, without waiting for the strangers' deadline."""
    caller = start_script(_SHORT_OF_FILES, "48")
    crowd: list[Stranger] = []
    try:
        assert caller.stdout is not None and caller.stdin is not None
        addresses = caller.stdout.readline().split()
        assert len(addresses) == 2, addresses
        for address in addresses:
            crowd += silent(address, 400)
        start = time.monotonic()
        caller.stdin.write("go\n")
        caller.stdin.flush()
        out, err = caller.communicate(timeout=120)
        elapsed = time.monotonic() - start
    finally:
        for s in crowd:
            s.close()
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    assert out.strip() == "right", (out, err[-3000:])
    assert caller.returncode == 0, err[-3000:]
    assert "peer 0 could not accept a connection on port" in err, err[-3000:]
    assert "Too many open files" in err, err[-3000:]
    assert elapsed < 30, elapsed
