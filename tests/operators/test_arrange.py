"""Arrangements: ``arrange_by_key`` / ``arrange_by_self``, ``as_collection`` and the shared trace.

Every test compares against the from-scratch oracle (``tests/reference.py``) or against plain
Python over the input updates, on one and on two workers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest import mock

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import FakeContext
from tests.jobs import input_spines, pipeline_of, run_job
from tests.reference import assert_matches_oracle

import deltaflow as df
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.hashing import worker_of
from deltaflow.framework.lattice import Product, less_equal
from deltaflow.framework.time_domain import domain_of
from deltaflow.framework.trace.batch import Batch
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators import arrange
from deltaflow.operators.arrange import ArrangeOperator, RawBatch
from deltaflow.operators.base import Interest, RunsBatch, UpdateBatch, sum_diffs
from deltaflow.operators.join.operator import JoinOperator
from deltaflow.scheduler.runtime import Job
from deltaflow.testing import accumulate, collect

Update = tuple[Any, int, int]


def examples(n: int) -> settings:
    """Hypothesis settings for tests that also take the (constant) ``workers`` fixture."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


keys = st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", ("t", 1)]))
vals = st.one_of(st.integers(0, 3), st.sampled_from(["x", "y"]))
times = st.integers(0, 15)
diffs = st.sampled_from([-3, -2, -1, 1, 2, 3])


def update_lists(data: st.SearchStrategy[Any], max_size: int = 40) -> Any:
    """Updates with many times (0..15), duplicates, retractions and negative counts."""
    return st.lists(st.tuples(data, times, diffs), max_size=max_size)


def traced(arranged: df.Arranged) -> df.Collection:
    """The arrangement's updates as a collection, with its trace kept for inspection.

    An arrangement that no operator reads keeps no trace; a join of it with itself whose
    logic produces nothing is such a reader.
    """
    return arranged.as_collection().concat(arranged.join_core(arranged, lambda _k, _a, _b: ()))


def arrange_spines(job: Job, by_self: bool | None = None) -> dict[int, list[Spine]]:
    """Each worker's arrangement spines, reached through the job's actors."""
    out: dict[int, list[Spine]] = {}
    for w, worker in enumerate(job.workers):
        out[w] = [
            a.operator.spine
            for a in worker.actors
            if isinstance(a.operator, ArrangeOperator)
            and (by_self is None or a.operator.by_self == by_self)
        ]
    return out


def owner(key: Any, peers: int) -> int:
    """The worker that owns ``key`` under the runtime's stable-hash routing."""
    return worker_of(key, peers)


def trace_contents(spine: Spine) -> dict[tuple[Any, Any], int]:
    """All updates held by ``spine``, summed over time (the collection at the final time)."""
    acc: Counter[tuple[Any, Any]] = Counter()
    for batch in spine.batches():
        for k, v, _t, r in batch.updates():
            acc[(k, v)] += r
    return {kv: n for kv, n in acc.items() if n}


# -- as_collection ----------------------------------------------------------------------------


@examples(60)
@given(xs=update_lists(st.tuples(keys, vals)))
def test_arrange_by_key_as_collection_equals_input(workers: int, xs: list[Update]) -> None:
    """arrange_by_key().as_collection() equals the input collection at every time."""
    pipe = pipeline_of(lambda xs: xs.arrange_by_key().as_collection())
    out = collect(pipe, workers=workers, xs=xs)
    assert_matches_oracle(out, {"xs": xs}, lambda c: c["xs"])


@examples(60)
@given(xs=update_lists(keys))
def test_arrange_by_self_as_collection_equals_input(workers: int, xs: list[Update]) -> None:
    """arrange_by_self().as_collection() equals the input collection at every time."""
    pipe = pipeline_of(lambda xs: xs.arrange_by_self().as_collection())
    out = collect(pipe, workers=workers, xs=xs)
    assert_matches_oracle(out, {"xs": xs}, lambda c: c["xs"])


@examples(25)
@given(
    rounds=st.lists(
        st.lists(
            st.tuples(st.tuples(keys, vals), diffs, st.sampled_from([0, 0, 1, 3])), max_size=6
        ),
        min_size=1,
        max_size=10,
    )
)
def test_as_collection_interactive_rounds(workers: int, rounds: list[list[Any]]) -> None:
    """Fed round by round, some updates ahead of time: output.at(t) is the input at t."""
    fed: list[Update] = []

    async def main() -> None:
        pipe = pipeline_of(lambda xs: xs.arrange_by_key().as_collection())
        async with df.open(pipe, workers=workers) as job:
            for t, round_ in enumerate(rounds):
                for d, r, ahead in round_:
                    job.inputs["xs"].update_at(d, t + ahead, r)
                    fed.append((d, t + ahead, r))
                await job.advance_to(t + 1)
                for u in range(t + 1):
                    assert job.output.at(u) == accumulate(fed, u)

    trio.run(main)


def test_arrange_by_key_rejects_non_pairs() -> None:
    """A datum that is not a (key, value) pair stops the job with a clear error."""
    with pytest.raises(df.OperatorError, match=r"expected \(key, value\) pairs, got 7"):
        df.run(pipeline_of(lambda xs: xs.arrange_by_key().as_collection()), xs=[(7, 0, 1)])


@pytest.mark.parametrize(
    ("data", "bad"),
    [
        (["ab", "ac", ("a", "z")], "'ab'"),  # two characters are not a pair
        ([(1, 2, 3), (4, 5)], r"\(1, 2, 3\)"),  # a triple among pairs is not cut short
        ([(1, 2), 5], "5"),
    ],
)
def test_keyed_operators_take_the_same_pairs_on_any_worker_count(
    data: list[Any], bad: str, workers: int
) -> None:
    """Only tuples of two are (key, value) pairs, whatever the worker count; the error names
    the keyed operator that needs them, not the operator upstream of the exchange."""
    feed = [(d, 0, 1) for d in data]
    expected = rf"expected \(key, value\) pairs, got {bad}"
    with pytest.raises(df.OperatorError, match=expected) as info:
        df.run(pipeline_of(lambda xs: xs.map(lambda d: d).count()), workers=workers, xs=feed)
    assert info.value.operator == "count"
    assert isinstance(info.value.__cause__, TypeError)


def test_tuple_subclasses_are_pairs(workers: int) -> None:
    """A named tuple of two fields is a pair on one worker and on several."""
    from collections import namedtuple

    kv = namedtuple("kv", ["key", "val"])
    feed = [(kv("a", 1), 0, 1), (kv("a", 2), 0, 1), (kv("b", 1), 1, 1)]
    out = df.run(pipeline_of(lambda xs: xs.count()), workers=workers, xs=feed)
    assert sorted(out) == [(("a", 2), 0, 1), (("b", 1), 1, 1)]


products = st.builds(Product, st.integers(0, 3), st.integers(0, 3))


@pytest.mark.parametrize("as_batch", [False, True], ids=["raw", "batch"])
@given(
    st.lists(
        st.tuples(products, st.lists(st.tuples(st.integers(0, 3), diffs), min_size=1)),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_unread_arrangement_forwards_consolidated_updates_at_minimal_times(
    as_batch: bool, messages: list[tuple[Product, list[tuple[int, int]]]], promised: bool
) -> None:
    """Without readers the arrangement forwards each activation's messages at once, with no
    capability: one batch per minimal message time, every update in it at or beyond that time,
    equal updates summed, and together exactly the input (``batch``: every group is beyond
    ``FORWARD_AS_BATCH`` and forwarded as a trace batch). ``promised``: each message comes
    summed already and says so (as a join's do); several at one time still meet."""

    def batch_of(rows: list[tuple[int, int]]) -> UpdateBatch:
        if not promised:
            return UpdateBatch([d for d, _ in rows], [r for _, r in rows])
        sums: Counter[int] = Counter()
        for d, r in rows:
            sums[d] += r
        return UpdateBatch([d for d in sums if sums[d]], [r for r in sums.values() if r], True)

    op = ArrangeOperator("arrange_by_self", Spine(Antichain([Product(0, 0)])), by_self=True)
    ctx = FakeContext(Product(0, 0), [(t, batch_of(rows)) for t, rows in messages])
    with mock.patch.object(arrange, "FORWARD_AS_BATCH", 0 if as_batch else 10**9):
        op.schedule(ctx)  # type: ignore[arg-type]
    sent = [(t, b) for _port, t, b in ctx.payloads]
    assert all(isinstance(b, Batch if as_batch else RawBatch) for _, b in sent)
    assert ctx.interest is Interest.NEVER and op.caps == [] and ctx.held == {}
    sent_at = [t for t, _ in sent]
    assert len(set(sent_at)) == len(sent_at)
    assert set(sent_at) <= set(Antichain(t for t, _ in messages))
    expected: Counter[Any] = Counter()
    for t, rows in messages:
        for d, r in rows:
            expected[(d, t)] += r
    got: Counter[Any] = Counter()
    for low, batch in sent:
        rows_seen = list(batch.updates())
        assert len({(k, t) for k, _, t, _ in rows_seen}) == len(rows_seen), "not consolidated"
        for key, val, t, r in rows_seen:
            assert val == () and r != 0 and less_equal(low, t)
            got[(key, t)] += r
    assert +got == +expected and -got == -expected


# -- sharing ----------------------------------------------------------------------------------


def test_arranging_twice_returns_the_same_arrangement() -> None:
    """arrange_by_key twice gives one Arranged; arrange_by_self is a different one."""
    seen: dict[str, Any] = {}

    def build(xs: df.Collection) -> df.Collection:
        seen["a"], seen["b"] = xs.arrange_by_key(), xs.arrange_by_key()
        seen["s1"], seen["s2"] = xs.arrange_by_self(), xs.arrange_by_self()
        return seen["a"].as_collection()

    pipeline_of(build).instantiate(1)
    assert seen["a"] is seen["b"]
    assert seen["s1"] is seen["s2"]
    assert seen["a"] is not seen["s1"]


def test_shared_arrangement_one_operator_many_readers(workers: int) -> None:
    """Three joins and an as_collection of one collection share one arrange operator per worker.

    ``ys`` and ``zs`` are each read by one join only: their arrangements keep no trace and are
    that join's inlets instead of actors of their own.
    """

    def build(xs: df.Collection, ys: df.Collection, zs: df.Collection) -> dict[str, df.Collection]:
        arranged = xs.arrange_by_key()
        return {
            "same": arranged.as_collection(),
            "j1": xs.join(ys),
            "j2": xs.join(arranged).map(lambda kv: kv[0]),
            "j3": arranged.join_core(zs.arrange_by_key(), lambda k, a, b: [(k, a + b)]),
        }

    xs = [((k % 4, k), k % 3, 1) for k in range(20)]
    ys = [((k, "y"), 1, 1) for k in range(4)]
    zs = [((k, 100), 2, 2) for k in range(4)]
    job = run_job(pipeline_of(build), workers, xs=xs, ys=ys, zs=zs)
    for w, worker in enumerate(job.workers):
        arranges = [a.operator for a in worker.actors if isinstance(a.operator, ArrangeOperator)]
        assert len(arranges) == 1  # xs once
        inlets = [i.arrange for a in worker.actors for i in a.inlets if i is not None]
        assert len(inlets) == 2  # ys and zs
        assert all(isinstance(i, ArrangeOperator) and not i.spine.has_readers for i in inlets)
        joins = [a.operator for a in worker.actors if isinstance(a.operator, JoinOperator)]
        assert len(joins) == 3
        xs_spine = input_spines(job, "xs")[w]
        assert xs_spine in [op.spine for op in arranges]
        # Every join reads the very spine the arrange operator fills; j2 reads it twice.
        assert all(j.spines[0] is xs_spine for j in joins)
        assert sum(s is xs_spine for j in joins for s in j.spines) == 4
        assert xs_spine._logical_readers == 4
    outs = {name: h.updates() for name, h in job.outputs.items()}
    inputs = {"xs": xs, "ys": ys, "zs": zs}
    assert_matches_oracle(outs["same"], inputs, lambda c: c["xs"])
    assert_matches_oracle(
        outs["j1"], inputs, lambda c: join_counts(c["xs"], c["ys"], lambda k, a, b: (k, (a, b)))
    )
    assert_matches_oracle(
        outs["j2"], inputs, lambda c: join_counts(c["xs"], c["xs"], lambda k, _a, _b: k)
    )
    assert_matches_oracle(
        outs["j3"], inputs, lambda c: join_counts(c["xs"], c["zs"], lambda k, a, b: (k, a + b))
    )


def join_counts(left: Counter[Any], right: Counter[Any], f: Any) -> Counter[Any]:
    """``f(k, a, b)`` over matching ``(k, a)``, ``(k, b)`` pairs, counts multiplied and added."""
    out: Counter[Any] = Counter()
    for (k, a), n in left.items():
        for (k2, b), m in right.items():
            if k == k2:
                out[f(k, a, b)] += n * m
    return out


# -- the trace itself -------------------------------------------------------------------------


@examples(40)
@given(xs=update_lists(st.tuples(keys, vals), max_size=60))
def test_trace_holds_each_workers_keys_and_final_contents(workers: int, xs: list[Update]) -> None:
    """Each worker's trace holds only the keys routed to it; together they hold the input."""
    job = run_job(pipeline_of(lambda xs: traced(xs.arrange_by_key())), workers, xs=xs)
    spines = arrange_spines(job)
    total: Counter[tuple[Any, Any]] = Counter()
    for w, ss in spines.items():
        assert len(ss) == 1
        spine = ss[0]
        spine._check()
        contents = trace_contents(spine)
        for k, _v in contents:
            assert owner(k, workers) == w, (k, w)
        total.update(contents)
    final = accumulate(xs, 15)
    assert {kv: n for kv, n in total.items() if n} == final


@examples(40)
@given(xs=update_lists(keys, max_size=60))
def test_trace_by_self_holds_unit_values(workers: int, xs: list[Update]) -> None:
    """An arrange_by_self trace holds the data as keys with value () and the right counts."""
    job = run_job(pipeline_of(lambda xs: traced(xs.arrange_by_self())), workers, xs=xs)
    total: Counter[Any] = Counter()
    for w, ss in arrange_spines(job, by_self=True).items():
        (spine,) = ss
        for (k, v), n in trace_contents(spine).items():
            assert v == ()
            assert owner(k, workers) == w
            total[k] += n
    assert {k: n for k, n in total.items() if n} == accumulate(xs, 15)


def insert_retract_rounds(build: Any, workers: int, rounds: int) -> list[list[int]]:
    """Round t inserts (t % 10, t) and retracts ((t-1) % 10, t-1), checking the output.

    Returns, per round, the xs trace's updates then batches on each worker.
    """
    sizes: list[list[int]] = []

    async def main() -> None:
        async with df.open(pipeline_of(build), workers=workers) as job:
            spines = input_spines(job, "xs")
            assert sorted(spines) == list(range(workers))
            xs = job.inputs["xs"]
            joined = "ys" in job.inputs
            if joined:
                job.inputs["ys"].insert_many([(k, "y") for k in range(10)])
            for t in range(rounds):
                xs.insert((t % 10, t))
                if t:
                    xs.remove(((t - 1) % 10, t - 1))
                await job.advance_to(t + 1)
                stats = [spines[w].statistics() for w in range(workers)]
                sizes.append([s.updates for s in stats] + [s.batches for s in stats])
                want = (t % 10, (t, "y")) if joined else (t % 10, t)
                assert job.output.at(t) == {want: 1}

    trio.run(main)
    return sizes


@pytest.mark.parametrize("with_join", [False, True], ids=["no-reader", "join-reader"])
def test_compaction_keeps_trace_bounded(workers: int, with_join: bool) -> None:
    """Many rounds of insert-then-retract keep the arranged trace's size bounded."""
    if with_join:

        def build(xs: df.Collection, ys: df.Collection) -> df.Collection:
            # Two joins read xs's arrangement, so it keeps a trace (the second adds nothing).
            xs_arr, ys_arr = xs.arrange_by_key(), ys.arrange_by_key()
            out = xs_arr.join_core(ys_arr, lambda k, a, b: [(k, (a, b))])
            return out.concat(xs_arr.join_core(ys_arr, lambda _k, _a, _b: ()))

    else:
        build = lambda xs: xs.arrange_by_key().as_collection()  # noqa: E731
    rounds = 300
    sizes = insert_retract_rounds(build, workers, rounds)
    n = workers
    if not with_join:
        # Nobody reads the trace: it is not kept at all.
        assert all(sum(s) == 0 for s in sizes)
        return
    assert all(sum(s[:n]) > 0 for s in sizes)
    late = sizes[50:]
    # One live update, plus a few not yet merged away: nothing proportional to the rounds.
    assert max(sum(s[:n]) for s in late) <= 8 * n
    # The number of batches stays logarithmic, not linear, in the rounds.
    assert max(max(s[n:]) for s in late) <= 12


def test_single_update_rounds_do_not_remerge_the_whole_trace(workers: int) -> None:
    """A one-update round costs a bounded merge, never a re-merge of the whole trace."""
    n = 5_000
    rounds = 30
    changed = 0

    async def main() -> None:
        nonlocal changed
        pipe = pipeline_of(lambda xs: traced(xs.arrange_by_key()))
        async with df.open(pipe, workers=workers) as job:
            spines = input_spines(job, "xs")
            job.inputs["xs"].insert_many([(k, k) for k in range(n)])
            await job.advance_to(1)
            largest = {w: max(s.batches(), key=len) for w, s in spines.items()}
            for t in range(1, rounds + 1):
                job.inputs["xs"].insert((n + t, t))
                await job.advance_to(t + 1)
                for w, s in spines.items():
                    now = max(s.batches(), key=len)
                    if now is not largest[w]:
                        changed += 1
                        largest[w] = now
            assert len(job.output.at(rounds)) == n + rounds

    trio.run(main)
    assert changed <= 3, f"the largest batches were rebuilt {changed} times in {rounds} rounds"


# -- int data as columns --------------------------------------------------------------------

_I64 = st.integers(-(2**63), 2**63 - 1)
_odd = st.one_of(
    st.booleans(),
    st.text(max_size=1),
    st.integers(2**63, 2**64),
    st.integers(-(2**64), -(2**63) - 1),
)


def _datum(by_self: bool, odd: bool) -> st.SearchStrategy[Any]:
    """An int key (``by_self``) or a pair of ints; ``odd``: sometimes another value in it."""
    part = st.one_of(st.integers(-5, 5), _I64, _odd) if odd else st.one_of(st.integers(-5, 5), _I64)
    if by_self:
        return part
    pair = st.tuples(part, part)
    return st.one_of(pair, st.tuples(part, part, part)) if odd else pair


@st.composite
def _int_messages(draw: st.DrawFn) -> tuple[bool, list[tuple[Any, UpdateBatch]]]:
    by_self = draw(st.booleans())
    odd = draw(st.booleans())
    time = st.integers(0, 6) if draw(st.booleans()) else products
    messages = draw(
        st.lists(
            st.tuples(
                time, st.lists(st.tuples(_datum(by_self, odd), diffs), min_size=1, max_size=20)
            ),
            min_size=1,
            max_size=8,
        )
    )
    return by_self, [(t, UpdateBatch([d for d, _ in rs], [r for _, r in rs])) for t, rs in messages]


@given(_int_messages())
def test_forward_as_batch_of_int_data_keeps_every_update(
    case: tuple[bool, list[tuple[Any, UpdateBatch]]],
) -> None:
    """A large activation forwarded as a batch holds the same updates whether its data are
    int keys or int pairs (read into int64 columns straight from the messages, and then
    stored as plain int columns that the kernels read as they are) or anything else (the
    lists path): each ``(key, val, time)`` with the sum of its diffs, zeros left out. Data
    that are not all ints (a bool, a string, an int beyond 64 bits, a triple) take the lists
    path, and a datum that is not a pair fails naming the arrangement."""
    by_self, messages = case
    # The spine of the times' scope: its domain reads the message times.
    least = domain_of(messages[0][0]).least
    op = ArrangeOperator(
        "arrange_by_self" if by_self else "arrange", Spine(Antichain([least])), by_self
    )
    low = Antichain(t for t, _ in messages).elements
    expected: Counter[Any] = Counter()
    for t, batch in messages:
        for d, r in zip(batch.data, batch.diffs):
            expected[(d, (), t) if by_self else (d[0], d[1], t)] += r
    if not by_self and any(len(d) != 2 for _, b in messages for d in b.data):
        with pytest.raises(TypeError, match="arrange: expected"):
            op._as_batch(low[0], messages)
        return
    if len(low) > 1:
        messages = [(t, b) for t, b in messages if less_equal(low[0], t)]
        expected = Counter({k: r for k, r in expected.items() if less_equal(low[0], k[2])})
    batch = op._as_batch(low[0], messages)
    got: Counter[Any] = Counter()
    for k, v, t, r in batch.updates():
        assert r != 0
        got[(k, v, t)] += r
    assert {k: r for k, r in got.items() if r} == {k: r for k, r in expected.items() if r}
    data = [d for _, b in messages for d in b.data]
    parts = data if by_self else [x for d in data for x in d]
    plain = all(x.__class__ is int and -(2**63) <= x < 2**63 for x in parts)
    if plain and len(batch) > Batch.TINY and all(t.__class__ is int for t, _ in messages):
        assert batch.columnar  # what the kernels read without conversion


def _updates_of(forwarded: list[tuple[Any, Any]]) -> Counter[Any]:
    """``(key, val, time) -> diff`` of what an arrangement forwarded (zeros dropped)."""
    out: Counter[Any] = Counter()
    for _, batch in forwarded:
        vals = batch.vals if batch.vals is not None else [()] * len(batch.keys)
        for k, v, t, r in zip(batch.keys, vals, batch.times, batch.diffs):
            out[(k, v, t)] += r
    return Counter({u: r for u, r in out.items() if r})


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.builds(Product, st.integers(0, 3), st.integers(0, 3)),
            st.lists(
                st.tuples(
                    st.tuples(st.integers(0, 3), st.integers(0, 2)), st.integers(-2, 2).filter(bool)
                ),
                min_size=1,
                max_size=6,
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
    st.booleans(),
)
def test_a_lone_runs_message_forwards_as_its_runs_one_by_one(
    runs: list[tuple[Any, list[Any]]], consolidate: bool, by_self: bool
) -> None:
    """A many-times message read in place forwards the updates its runs forward as messages
    of their own (runs at partially ordered and repeated times, consolidated by their
    sender or not), each at or after the batch's time, every batch's time a least run time."""
    if by_self:  # data that are their own keys
        runs = [(t, [(d[0], r) for d, r in u]) for t, u in runs]
    if consolidate:  # the sender's word: no datum twice in a run, no zero
        runs = [
            (
                t,
                [
                    (d, r)
                    for d, r in sum_diffs([d for d, _ in u], [r for _, r in u], {}).items()
                    if r
                ],
            )
            for t, u in runs
        ]
        runs = [(t, u) for t, u in runs if u]
        if not runs:
            return
    data = [d for _, u in runs for d, _ in u]
    message = RunsBatch(
        [t for t, _ in runs],
        [len(u) for _, u in runs],
        data,
        [r for _, u in runs for _, r in u],
        consolidated=consolidate,
    )
    op = ArrangeOperator("arrange", Spine(Antichain([Product(0, 0)])), by_self=by_self)
    whole = op.forward([(Product(0, 0), message)])
    one_by_one = op.forward(message.per_time())
    assert _updates_of(whole) == _updates_of(one_by_one)
    for low, batch in whole:
        assert all(less_equal(low, t) for t in batch.times)
        vals = batch.vals if batch.vals is not None else [()] * len(batch.keys)
        rows = list(zip(batch.keys, vals, batch.times))
        assert len(set(rows)) == len(rows) and all(batch.diffs), "consolidated"
        assert low in message.times
