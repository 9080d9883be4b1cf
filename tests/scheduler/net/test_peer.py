"""The peer entry points the Spark adapter calls, over real loopback sockets.

Each peer runs in a thread of its own with its own trio loop (as each Spark barrier task
runs in its own process); the rendezvous is a barrier that hands every peer the list of
addresses, as one ``allGather`` does. Concatenated, the peers' results must be ``df.run``'s.
"""

from __future__ import annotations

import random
import shutil
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.jobs import pipeline_of
from tests.loops import SHAPES, churning_graphs
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.graphs import Reachability
from deltaflow.scheduler.net.handshake import new_secret
from deltaflow.scheduler.net.peer import open_peer, run_peer
from deltaflow.scheduler.net.tcp import Link
from deltaflow.testing import collect

#: The secret every peer of these tests' meshes shares.
SECRET = new_secret()


def gather(n: int) -> Callable[[int], Callable[[str], Sequence[str]]]:
    """Per peer, a rendezvous that returns every peer's address once all have published."""
    addresses: list[str] = [""] * n
    barrier = threading.Barrier(n, timeout=30)

    def rendezvous_of(i: int) -> Callable[[str], Sequence[str]]:
        def rendezvous(address: str) -> Sequence[str]:
            addresses[i] = address
            barrier.wait()
            return list(addresses)

        return rendezvous

    return rendezvous_of


def in_threads(n: int, body: Callable[[int], Any]) -> list[Any]:
    """``body(i)`` for every peer ``i`` at once; the results, or the first error raised."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = body(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a peer hangs"
    if errors:
        raise errors[0]
    return results


class CountValues(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(lambda x: (x, x)).count().map(lambda kn: kn[1])


updates = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 3), st.sampled_from([1, 1, -1]))
).map(nonnegative)
edges = st.lists(
    st.tuples(st.tuples(st.integers(0, 6), st.integers(0, 6)), st.integers(0, 3), st.just(1))
)


@pytest.mark.parametrize(("peers", "local"), [(2, 1), (3, 1), (2, 2)])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xs=updates, es=edges)
def test_peers_together_give_run_s_output(
    peers: int, local: int, xs: list[Any], es: list[Any]
) -> None:
    for pipe, feed in [
        (CountValues(), {"xs": xs}),
        (Reachability(), {"roots": [(0, 0, 1), (3, 1, 1)], "edges": es}),
    ]:
        rendezvous = gather(peers)
        parts = in_threads(
            peers,
            lambda i, pipe=pipe, feed=feed, rendezvous=rendezvous: run_peer(
                pipe,
                index=i,
                peers=peers,
                rendezvous=rendezvous(i),
                secret=SECRET,
                feed={name: ups[i::peers] for name, ups in feed.items()},
                workers_per_peer=local,
            ),
        )
        together = [u for part in parts for u in part]
        # Equal data meet on one peer: no (data, time) twice across the peers.
        assert len({(d, t) for d, t, _ in together}) == len(together)
        assert sorted(together, key=repr) == sorted(collect(pipe, 1, **feed), key=repr)


def test_open_peer_steps_one_time_per_micro_batch() -> None:
    rendezvous = gather(2)
    batches = [
        [{"xs": [("a", 1), ("b", 1)]}, {"xs": [("a", 1)]}],
        [{"xs": [("c", 1)]}, {}],
        [{"xs": [("a", -1)]}, {"xs": [("c", 1), ("d", 1)]}],
    ]

    async def peer(i: int) -> list[Any]:
        out = []
        async with open_peer(
            CountValues(), index=i, peers=2, rendezvous=rendezvous(i), secret=SECRET
        ) as p:
            for step in batches:
                assert p.time == len(out)
                out.append(await p.step(step[i]))
        return out

    per_peer = in_threads(2, lambda i: trio.run(peer, i))
    at = [sorted(u for part in per_peer for u in part[t]) for t in range(3)]
    # Counts a:2 b:1, then c:1 too, then a:1 b:1 c:2 d:1: the values {2, 1}, {2, 1, 1},
    # {1, 1, 2, 1}.
    assert at == [[(1, 0, 1), (2, 0, 1)], [(1, 1, 1)], [(1, 2, 1)]]


def test_peers_running_different_pipelines_fail_naming_each_other() -> None:
    class Other(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.map(lambda x: x)

    rendezvous = gather(2)
    pipes = [CountValues(), Other()]
    with pytest.raises(ValueError, match="peer 1 runs"):
        in_threads(
            2,
            lambda i: run_peer(pipes[i], index=i, peers=2, rendezvous=rendezvous(i), secret=SECRET),
        )


def test_a_user_error_on_one_peer_stops_every_peer() -> None:
    class Bad(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.map(lambda x: 1 // x)

    rendezvous = gather(2)
    feeds = [[(1, 0, 1)], [(0, 0, 1)]]
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            run_peer(
                Bad(),
                index=i,
                peers=2,
                rendezvous=rendezvous(i),
                secret=SECRET,
                feed={"xs": feeds[i]},
            )
        except df.OperatorError as exc:
            errors.append(exc)

    in_threads(2, body)
    assert len(errors) == 2
    assert all("ZeroDivisionError" in str(e) and "map" in e.operator for e in errors)  # type: ignore[attr-defined]
    # The peer that heard of it over the mesh has the user's exception as the cause too.
    assert all(type(e.__cause__) is ZeroDivisionError for e in errors)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=churning_graphs(), seed=st.integers(0, 2**32 - 1))
def test_loops_under_random_link_delays(
    shape: str, inputs: dict[str, list[Any]], seed: int
) -> None:
    """Every frame waits a random while before it leaves (FIFO per link kept): the loops
    still match the recompute over three peers."""
    build, query = SHAPES[shape]
    rng = random.Random(seed)
    drain = Link.drain

    async def delayed(self: Link) -> None:
        await trio.sleep(rng.choice([0, 0, 0.0005, 0.002]))
        await drain(self)

    rendezvous = gather(3)
    with pytest.MonkeyPatch.context() as m:
        # Every frame through the delay: a flush hands what is queued to the sending task.
        m.setattr(Link, "flush_now", lambda self: self._ready.set())
        m.setattr(Link, "drain", delayed)
        parts = in_threads(
            3,
            lambda i: run_peer(
                pipeline_of(build),
                index=i,
                peers=3,
                rendezvous=rendezvous(i),
                secret=SECRET,
                feed={name: ups[i::3] for name, ups in inputs.items()},
            ),
        )
    assert_matches_oracle([u for part in parts for u in part], inputs, query)


def test_peers_checkpoint_their_shares_and_resume_on_another_count(tmp_path: Any) -> None:
    """Each peer settles and writes its share; one commits them; the checkpoint resumes on
    three peers where two wrote it, and the steps after it give an uninterrupted run's."""
    from deltaflow.scheduler.checkpoint import Checkpointer, settled

    location = tmp_path / "state"
    batches = [
        [{"xs": [("a", 1), ("b", 1)]}, {"xs": [("a", 1)]}, {}],
        [{"xs": [("c", 1)]}, {}, {"xs": [("b", 1)]}],
        [{"xs": [("a", -1)]}, {"xs": [("c", 1), ("d", 1)]}, {}],
        [{}, {"xs": [("b", -1)]}, {"xs": [("e", 2)]}],
    ]

    def fed(t: int, i: int, peers: int) -> dict[str, Any]:
        """Peer ``i``'s part of step ``t``: with two peers, the second feeds two parts."""
        if peers == 3:
            return batches[t][i]
        parts = [batches[t][0]] if i == 0 else batches[t][1:]
        return {"xs": [u for part in parts for u in part.get("xs", [])]}

    def run(peers: int, steps: range, checkpoint_after: int | None) -> list[list[Any]]:
        rendezvous = gather(peers)
        barrier = threading.Barrier(peers, timeout=30)
        counts: list[Any] = [None] * peers
        fragments: list[Any] = [None] * peers

        async def agree(value: Any, into: list[Any], i: int) -> list[Any]:
            into[i] = value
            await trio.to_thread.run_sync(barrier.wait)
            seen = list(into)
            await trio.to_thread.run_sync(barrier.wait)
            return seen

        async def peer(i: int) -> list[Any]:
            out = []
            async with open_peer(
                CountValues(), index=i, peers=peers, rendezvous=rendezvous(i), secret=SECRET,
                checkpoint=location,
            ) as p:  # fmt: skip
                assert p.resumed_at == (None if steps.start == 0 else steps.start)
                for t in steps:
                    out.append(await p.step(fed(t, i, peers)))
                    if t == checkpoint_after:
                        last = None
                        while True:
                            now = await agree(await p.settle(), counts, i)
                            if settled(last, now):
                                break
                            last = now
                        shares = await agree(await p.save_share(1, 0), fragments, i)
                        if i == 0:
                            Checkpointer(location, "coordinator").commit(p.header(1), shares)
                        await trio.to_thread.run_sync(barrier.wait)
            return out

        return in_threads(peers, lambda i: trio.run(peer, i))

    def merged(per_peer: list[list[Any]], t: int) -> list[Any]:
        return sorted(u for part in per_peer for u in part[t])

    before = run(2, range(2), checkpoint_after=1)
    shutil.copytree(location, tmp_path / "kept")
    shutil.rmtree(location)
    whole = run(2, range(4), None)  # (the location now empty: a fresh, uninterrupted run)
    shutil.rmtree(location, ignore_errors=True)
    shutil.copytree(tmp_path / "kept", location)
    after = run(3, range(2, 4), None)
    assert [merged(before, t) for t in range(2)] == [merged(whole, t) for t in range(2)]
    assert [merged(after, t - 2) for t in range(2, 4)] == [merged(whole, t) for t in range(2, 4)]
