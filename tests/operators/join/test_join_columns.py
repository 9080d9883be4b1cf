"""A join's side held as int columns alone (:class:`~deltaflow.operators.join.kernel.SortedRuns`
with ``alone``) against the dict history it replaces, and whole joins against the oracle.

The columns must hold, at every time still to be read, the collection the history holds: after
any sequence of batches (int or int-pair keys, int or ``Product`` times, retractions) and
compactions to frontiers that move, looked up by key or read whole. A join whose sides start
as columns, with the kernels' mode switched between rounds (so that the columns are read by
the kernel, by key, or give way to a history), must give the oracle's output at every time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any
from unittest import mock

import pytest
import trio
from hypothesis import given, settings, strategies as st
from tests.harness import accumulate, join_operators, kernel_mode
from tests.jobs import pipeline_of
from tests.reference import expected_at

import deltaflow as df
import deltaflow.operators.join.operator as join_module
from deltaflow.framework import kernels
from deltaflow.framework.lattice import Product, advance_by, less_equal
from deltaflow.framework.time_domain import INT, PAIR
from deltaflow.graphs import bfs, bfs_distances
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.join.history import KeyedHistory
from deltaflow.operators.join.kernel import SortedRuns, columns_of

diffs = st.sampled_from([-2, -1, 1, 1, 2])
int_keys = st.integers(0, 5)
pair_keys = st.tuples(
    st.integers(-1, 2), st.integers(-(1 << 31), -(1 << 31) + 1) | st.integers(0, 2)
)
int_times = st.integers(0, 6)
product_times = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
Row = tuple[Any, Any, Any, int]


@st.composite
def steps(draw: st.DrawFn) -> tuple[bool, list[Any]]:
    """Batches of one key kind and one time kind, and compactions to frontiers that move
    forward (``("tidy", frontier)``); values ints or, now and then, strings."""
    key = draw(st.sampled_from([int_keys, pair_keys]))
    product = draw(st.booleans())
    time = product_times if product else int_times
    vals = draw(st.sampled_from([st.integers(0, 3), st.integers(0, 3) | st.just("x")]))
    batch = st.lists(st.tuples(key, vals, time, diffs), min_size=1, max_size=12)
    out: list[Any] = []
    low = [0, 0]
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 2)):
            out.append(draw(batch))
            continue
        low[0] += draw(st.integers(0, 2))
        low[1] += draw(st.integers(0, 2))
        if not product:
            out.append(("tidy", (low[0],)))
        elif draw(st.booleans()):  # two incomparable elements
            out.append(("tidy", (Product(low[0], low[1] + 1), Product(low[0] + 1, low[1]))))
        else:
            out.append(("tidy", (Product(low[0], low[1]),)))
    return product, out


def raw(rows: list[Row]) -> RawBatch:
    return RawBatch(
        [k for k, _, _, _ in rows],
        [v for _, v, _, _ in rows],
        [t for _, _, t, _ in rows],
        [r for _, _, _, r in rows],
    )


def probes(product: bool, frontier: tuple[Any, ...]) -> list[Any]:
    """Times beyond ``frontier`` (every time at first): where what is held must agree."""
    grid = [Product(o, i) for o in range(10) for i in range(10)] if product else list(range(16))
    return [t for t in grid if not frontier or any(less_equal(f, t) for f in frontier)]


@settings(max_examples=300, deadline=None)
@given(data=steps())
def test_columns_alone_hold_what_a_history_holds(data: tuple[bool, list[Any]]) -> None:
    product, plan = data
    # Converted every two batches, or waiting indexed by key (small batches), or a mix.
    with mock.patch.object(SortedRuns, "MAX_PENDING", 2):
        for recent in (0, 3, 1024):
            with mock.patch.object(SortedRuns, "MAX_RECENT", recent):
                check_against_history(product, plan)


def check_against_history(product: bool, plan: list[Any]) -> None:
    domain = PAIR if product else INT
    runs = SortedRuns(alone=True, domain=domain)
    history = KeyedHistory(domain=domain)
    frontier: tuple[Any, ...] = ()
    built: KeyedHistory | None = None  # the history built from the columns once they gave way
    for i, step in enumerate(plan):
        if step[0] == "tidy":
            frontier = step[1]
            history.tidy(frontier, force=True)
            if built is not None:
                built.tidy(frontier, force=True)
            elif not runs.tidy(frontier, force=True):
                built = KeyedHistory(domain=domain)
                built.extend(runs.updates())
        else:
            history.extend(step)
            if built is not None:
                built.extend(step)
            else:
                # Every other batch with its columns already read (as the kernel stores a
                # batch it has joined): they must hold the same as those read here.
                batch = raw(step)
                runs.add(batch, columns_of(batch, domain) if i % 2 else None)
                if not runs.valid:
                    built = KeyedHistory(domain=domain)
                    built.extend(runs.updates())
        keys = list(history.rows)
        if built is not None:
            held = built.rows
            assert built.size == sum(map(len, held.values()))
        else:
            assert runs.size == sum(1 for _ in runs.updates())
            if not runs.readable_by(keys):
                assert not runs.valid
                continue
            held = runs.lookup_many(keys)
            assert set(held) <= set(keys)
        for key in keys:
            for t in probes(product, frontier):
                assert accumulate(held.get(key, []), t) == accumulate(history.rows[key], t)


def test_columns_compact_as_far_as_the_history() -> None:
    """Updates that cancel once advanced to the frontier leave nothing in the columns."""
    runs = SortedRuns(alone=True, domain=PAIR)
    runs.add(raw([(1, 7, Product(0, 1), 1), (1, 7, Product(1, 0), -1), ((2), 3, Product(0, 0), 1)]))
    assert runs.tidy((Product(1, 1),), force=True)
    assert sorted(runs.updates()) == [(2, 3, Product(1, 1), 1)]
    # With two elements the meet of the joins: (0, 1) stays, (1, 0) goes to (1, 1).
    again = SortedRuns(alone=True, domain=PAIR)
    again.add(raw([(1, 7, Product(0, 1), 1), (1, 7, Product(1, 0), -1)]))
    frontier = (Product(0, 2), Product(1, 1))
    assert again.tidy(frontier, force=True)
    assert [advance_by(Product(0, 1), frontier), advance_by(Product(1, 0), frontier)] == [
        Product(0, 1),
        Product(1, 1),
    ]
    assert sorted(again.updates()) == [(1, 7, Product(0, 1), 1), (1, 7, Product(1, 1), -1)]
    pairs = SortedRuns(alone=True, domain=INT)
    pairs.add(raw([((-1, -(1 << 31)), 1, 0, 1), ((-1, -(1 << 31)), 1, 1, 1), ((2, 5), 1, 0, 1)]))
    assert pairs.tidy((3,), force=True)
    assert sorted(pairs.updates()) == [((-1, -(1 << 31)), 1, 3, 2), ((2, 5), 1, 3, 1)]
    assert pairs.lookup_many([(-1, -(1 << 31)), (2, 6)]) == {(-1, -(1 << 31)): [(1, 3, 2)]}


def test_columns_give_way_to_what_they_cannot_hold() -> None:
    """A batch of string keys, or values that are not ints at a compaction: ``valid`` no
    more, everything still held for the history built from them."""
    runs = SortedRuns(alone=True, domain=INT)
    runs.add(raw([(1, 2, 0, 1)]))
    runs.add(raw([("a", 2, 0, 1)]))
    assert runs.runs() == [] and not runs.valid
    assert sorted(runs.updates(), key=repr) == [("a", 2, 0, 1), (1, 2, 0, 1)]
    # Batches with values and without (every value ``()``) cannot share runs; converting
    # them leaves the batches noted as they were.
    mixed = SortedRuns(alone=True, domain=INT)
    first = raw([(1, 2, 0, 1)])
    for batch in (first, RawBatch([3], None, [0], [1]), raw([(5, 6, 0, 1)]), raw([(5, 7, 1, 1)])):
        mixed.add(batch)
    assert mixed.runs() == [] and not mixed.valid and first.keys == [1]
    assert sorted(mixed.updates()) == [(1, 2, 0, 1), (3, (), 0, 1), (5, 6, 0, 1), (5, 7, 1, 1)]
    objects = SortedRuns(alone=True, domain=INT)
    objects.add(raw([(1, "x", 0, 1), (1, "x", 1, -1)]))
    assert not objects.tidy((2,), force=True)
    assert objects.size == 2 and objects.lookup_many([1]) == {1: [("x", 0, 1), ("x", 1, -1)]}


# -- whole joins ------------------------------------------------------------------------------

modes = st.sampled_from(["auto", "always", "never"])


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns read by key only a few times before a history is built, converted and
    compacted often: every way a side goes, on small inputs."""
    monkeypatch.setattr(join_module, "ROW_READ_COST", 4)
    monkeypatch.setattr(SortedRuns, "MAX_PENDING", 2)
    monkeypatch.setattr(SortedRuns, "MAX_RECENT", 3)
    monkeypatch.setattr(SortedRuns, "COMPACT_ABOVE", 4)
    monkeypatch.setattr(KeyedHistory, "COMPACT_ALL_WRITTEN", 4)


def join_of(left: Counter[Any], right: Counter[Any]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for (k, a), n in left.items():
        for (k2, b), m in right.items():
            if k == k2:
                out[(k, (a, b))] += n * m
    return Counter({d: n for d, n in out.items() if n})


@settings(max_examples=40, deadline=None)
@given(
    key=st.sampled_from([int_keys, pair_keys]),
    rounds=st.data(),
)
@pytest.mark.usefixtures("small_thresholds")
def test_join_matches_oracle_with_modes_switched_between_rounds(
    key: st.SearchStrategy[Any], rounds: st.DataObject
) -> None:
    """Rounds of int data (now and then a string value or key), some ahead of time, with
    retractions, each round under its own kernels' mode: every complete time is the
    oracle's."""
    update = st.tuples(
        st.tuples(key | st.just("s"), st.integers(0, 3) | st.just("x")),
        diffs,
        st.sampled_from([0, 0, 1, 3]),
    )
    plan = rounds.draw(
        st.lists(
            st.tuples(modes, st.lists(update, max_size=5), st.lists(update, max_size=5)),
            min_size=1,
            max_size=8,
        )
    )
    fed: dict[str, list[Any]] = {"a": [], "b": []}

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        return join_of(c["a"], c["b"])

    async def main() -> None:
        async with df.open(pipeline_of(lambda a, b: a.join(b))) as job:
            for t, (mode, ups_a, ups_b) in enumerate(plan):
                kernels.set_mode(mode)
                for name, ups in (("a", ups_a), ("b", ups_b)):
                    for d, r, off in ups:
                        job.inputs[name].update_at(d, t + off, r)
                        fed[name].append((d, t + off, r))
                await job.advance_to(t + 1)
                for u in range(t + 1):
                    assert job.output.at(u) == expected_at(fed, query, u), u

    with kernel_mode():
        trio.run(main)


@settings(max_examples=25, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=25),
    changes=st.lists(
        st.tuples(modes, st.tuples(st.integers(0, 7), st.integers(0, 7)), st.booleans()),
        max_size=8,
    ),
)
@pytest.mark.usefixtures("small_thresholds")
def test_bfs_rounds_match_plain_bfs_with_modes_switched(
    edges: list[tuple[int, int]], changes: list[tuple[str, tuple[int, int], bool]]
) -> None:
    """A join inside a loop (``Product`` times, sides compacted as the loop's frontier
    moves), edges inserted and removed round by round under changing modes: the distances
    of every round are plain BFS's."""
    current = Counter(edges)

    async def main() -> None:
        async with df.open(pipeline_of(bfs)) as job:
            job.inputs["roots"].insert(0)
            job.inputs["edges"].insert_many(edges)
            await job.advance_to(1)
            for t, (mode, edge, insert) in enumerate(changes, start=1):
                kernels.set_mode(mode)
                if insert or not current[edge]:
                    job.inputs["edges"].insert(edge)
                    current[edge] += 1
                else:
                    job.inputs["edges"].remove(edge)
                    current[edge] -= 1
                await job.advance_to(t + 1)
            for u in range(len(changes) + 1):
                want = bfs_distances([0], list(_as_of(edges, changes, u).elements()))
                assert job.output.at(u) == dict.fromkeys(want.items(), 1), u

    with kernel_mode():
        trio.run(main)


def _as_of(
    edges: list[tuple[int, int]], changes: list[tuple[str, tuple[int, int], bool]], u: int
) -> Counter[tuple[int, int]]:
    """The edges at time ``u`` (the changes of rounds ``1..u`` applied as the test did)."""
    current = Counter(edges)
    for _, edge, insert in changes[:u]:
        current[edge] += 1 if insert or not current[edge] else -1
    return +current


def test_a_side_builds_its_history_once_read_often(
    small_thresholds: None,
) -> None:
    """Small batches read a side of 10 updates by key until their look-ups have cost as much
    as building its history (three reads at :data:`ROW_READ_COST` 4), then the side builds
    its history and keeps it."""
    sides: dict[str, Any] = defaultdict(list)

    async def main() -> None:
        with kernel_mode("auto"):
            async with df.open(pipeline_of(lambda a, b: a.join(b))) as job:
                (op,) = join_operators(job)
                job.inputs["b"].insert_many([(k, k) for k in range(10)])
                await job.advance_to(1)
                for t in range(1, 6):
                    job.inputs["a"].insert((t, "x"))
                    await job.advance_to(t + 1)
                    runs = op.sorted_runs[1]
                    sides["alone"].append(runs.alone)
                    sides["stored"].append(op.stored(1))
                    assert job.output.at(t) == {(k, ("x", k)): 1 for k in range(1, t + 1)}

    trio.run(main)
    assert sides["alone"] == [True, True, True, False, False]
    assert sides["stored"] == [10] * 5


def test_single_key_rounds_leave_a_large_side_alone() -> None:
    """Rounds of one update each, after a load of many, read the loaded side key by key: the
    work that grows with a side (:attr:`SortedRuns.touched`: updates converted, merged,
    compacted, or listed to build a history) stays far below the side's size over the
    rounds, while every round's output is the oracle's."""
    n, rounds = 20_000, 300
    counts: dict[str, int] = {}

    async def main() -> None:
        with kernel_mode("auto"):
            async with df.open(pipeline_of(lambda a, b: a.join(b))) as job:
                (op,) = join_operators(job)
                job.inputs["b"].insert_many([(k % (n // 2), k) for k in range(n)])
                await job.advance_to(1)
                side = op.sorted_runs[1]
                counts["loaded"] = side.touched
                want: dict[Any, int] = {}
                for t in range(1, rounds + 1):
                    key = (t * 7919) % (n // 2)  # (a key not met before)
                    job.inputs["a"].insert((key, -t))
                    vals = [key, key + n // 2]
                    if t % 3 == 0:  # the large side changes too, a key at a time
                        job.inputs["b"].insert((key, n + t))
                        vals.append(n + t)
                    await job.advance_to(t + 1)
                    want.update({(key, (-t, v)): 1 for v in vals})
                    assert job.output.at(t) == want, t
                counts["rounds"] = side.touched - counts["loaded"]
                counts["alone"] = side.alone

    trio.run(main)
    assert counts["alone"], "the side built its history (a pass over all of it)"
    assert counts["rounds"] < n // 4, counts


def test_a_side_churned_by_small_batches_builds_its_history() -> None:
    """Rounds that store hundreds of updates each in a small side (and retract those of the
    round before) convert and merge it again and again as columns: once that has cost as
    much as building its history (:attr:`SortedRuns.churn` reaching its size), the side
    builds it, and the work that grows with the side stops, while every round's output is
    the oracle's."""
    n, width, rounds = 2_000, 300, 40
    counts: dict[str, Any] = {}

    async def main() -> None:
        with kernel_mode("auto"):
            async with df.open(pipeline_of(lambda a, b: a.join(b))) as job:
                (op,) = join_operators(job)
                job.inputs["b"].insert_many([(k, k) for k in range(n)])
                await job.advance_to(1)
                side = op.sorted_runs[1]
                loaded = side.touched
                b = Counter((k, k) for k in range(n))
                a: Counter[Any] = Counter()
                for t in range(1, rounds + 1):
                    new = [(n + t * width + i, t) for i in range(width)]
                    job.inputs["b"].insert_many(new)
                    b.update(new)
                    if t > 1:
                        old = [(n + (t - 1) * width + i, t - 1) for i in range(width)]
                        job.inputs["b"].insert_many(old, [-1] * width)
                        b.subtract(old)
                    job.inputs["a"].insert((n + t * width, -t))
                    job.inputs["a"].insert((t % n, -t))
                    a.update([(n + t * width, -t), (t % n, -t)])
                    await job.advance_to(t + 1)
                    assert Counter(job.output.at(t)) == join_of(a, +b), t
                counts["rounds"] = side.touched - loaded
                counts["alone"] = side.alone

    trio.run(main)
    assert not counts["alone"], "the churned side kept its columns"
    assert counts["rounds"] < 4 * n, counts


def test_a_bulk_batch_stored_with_its_columns_waits_for_a_reader() -> None:
    """A large batch stored with its columns already read (the kernel joined it) is not
    converted until something reads the side: a side stored in bulk is often never read
    again (a static run's last batches). One without them is converted as it is stored
    (the load's activation pays, not the first single-update round)."""
    n = 5_000
    batch = RawBatch([k % 100 for k in range(n)], list(range(n)), [0] * n, [1] * n)
    known = SortedRuns(alone=True, domain=INT)
    known.add(batch, columns_of(batch, INT))
    assert known.touched == 0
    assert sorted(known.lookup_many([7])[7]) == [(v, 0, 1) for v in range(7, n, 100)]
    assert known.touched == n
    plain = SortedRuns(alone=True, domain=INT)
    plain.add(batch)
    assert plain.touched == n
