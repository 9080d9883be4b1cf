"""The join family: ``join``, ``join_map``, ``semijoin``, ``antijoin`` and ``Arranged.join_core``.

Every result is compared with the from-scratch oracle (``tests/reference.py``) at every time,
on one and on two workers: random ``(key, val)`` inputs over times 0..15, with duplicates,
retractions and negative counts, and keys shared between the two sides.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
import trio
from hypothesis import given, strategies as st
from tests.harness import examples, join_operators
from tests.jobs import input_spines, pipeline_of, run_job
from tests.reference import assert_matches_oracle, expected_at
from tests.strategies import nonnegative

import deltaflow as df
import deltaflow.operators.arrange as arrange_module
import deltaflow.operators.join.history as history_module
import deltaflow.operators.join.kernel as join_kernel
import deltaflow.operators.join.operator as join_module
from deltaflow.framework import kernels
from deltaflow.operators.join.operator import JoinOperator
from deltaflow.testing import accumulate, collect

Update = tuple[Any, int, int]

keys = st.one_of(st.integers(0, 3), st.sampled_from(["a", ("t", 1)]))
vals = st.one_of(st.integers(0, 3), st.sampled_from(["x", "y"]))
times = st.integers(0, 15)
diffs = st.sampled_from([-3, -2, -1, 1, 2, 3])
offsets = st.sampled_from([0, 0, 0, 1, 3])  # how far ahead of the current time an update is


def update_lists(data: st.SearchStrategy[Any], max_size: int = 30) -> Any:
    """Updates with many times (0..15), duplicates, retractions and negative counts."""
    return st.lists(st.tuples(data, times, diffs), max_size=max_size)


pairs = update_lists(st.tuples(keys, vals))
int_key_pairs = update_lists(st.tuples(st.integers(0, 3), vals))
# Collections (no negative count at any time), for pipelines that reduce.
int_key_collections = int_key_pairs.map(nonnegative)


@st.composite
def distinct_keys(draw: st.DrawFn) -> list[Update]:
    """A keys collection that is distinct (each key 0 or 1 times) at every time."""
    out: list[Update] = []
    for key in draw(st.lists(keys, unique=True, max_size=5)):
        toggles = sorted(draw(st.sets(times, min_size=1, max_size=4)))
        out.extend((key, t, 1 if i % 2 == 0 else -1) for i, t in enumerate(toggles))
    return draw(st.permutations(out))


# -- oracle queries over accumulated collections ----------------------------------------------


def by_key(coll: Counter[Any]) -> dict[Any, list[tuple[Any, int]]]:
    """``{key: [(val, count), ...]}`` of a collection of ``(key, val)`` pairs."""
    out: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for (k, v), n in coll.items():
        out[k].append((v, n))
    return out


def join_of(
    left: Counter[Any], right: Counter[Any], f: Callable[[Any, Any, Any], Any]
) -> Counter[Any]:
    """``f(k, a, b)`` for every matching pair, with multiplied counts (collisions add)."""
    out: Counter[Any] = Counter()
    rights = by_key(right)
    for k, avs in by_key(left).items():
        for a, n in avs:
            for b, m in rights.get(k, ()):
                out[f(k, a, b)] += n * m
    return out


def semijoin_of(left: Counter[Any], ks: Counter[Any]) -> Counter[Any]:
    """The ``(k, v)`` of ``left`` with counts multiplied by the count of ``k`` in ``ks``."""
    return Counter({(k, v): n * ks[k] for (k, v), n in left.items() if ks[k]})


def antijoin_of(left: Counter[Any], ks: Counter[Any]) -> Counter[Any]:
    """``left`` minus its semijoin with ``ks``."""
    out = Counter(left)
    out.subtract(semijoin_of(left, ks))
    return out


def pair(k: Any, a: Any, b: Any) -> Any:
    return (k, (a, b))


def same(k: Any, a: Any, b: Any) -> Any:
    """A non-injective join_map function: many pairs collide on one output."""
    return (k, a == b)


# -- the join family against the oracle -------------------------------------------------------


@examples(80)
@given(left=pairs, right=pairs)
def test_join_matches_oracle(workers: int, left: list[Update], right: list[Update]) -> None:
    """join gives (k, (a, b)) at join(t1, t2) with multiplied counts, at every time."""
    out = collect(pipeline_of(lambda a, b: a.join(b)), workers=workers, a=left, b=right)
    assert_matches_oracle(out, {"a": left, "b": right}, lambda c: join_of(c["a"], c["b"], pair))


@examples(80)
@given(left=pairs, right=pairs)
def test_join_map_matches_oracle(workers: int, left: list[Update], right: list[Update]) -> None:
    """join_map gives f(k, a, b) per matching pair; colliding outputs add up."""
    out = collect(pipeline_of(lambda a, b: a.join_map(b, same)), workers=workers, a=left, b=right)
    assert_matches_oracle(out, {"a": left, "b": right}, lambda c: join_of(c["a"], c["b"], same))


@examples(80)
@given(left=pairs, ks=distinct_keys())
def test_semijoin_and_antijoin_with_distinct_keys(
    workers: int, left: list[Update], ks: list[Update]
) -> None:
    """semijoin keeps the (k, v) whose key is present, antijoin those whose key is absent."""

    def build(a: df.Collection, ks: df.Collection) -> dict[str, df.Collection]:
        return {"semi": a.semijoin(ks), "anti": a.antijoin(ks)}

    out = collect(pipeline_of(build), workers=workers, a=left, ks=ks)
    assert_matches_oracle(
        out,
        {"a": left, "ks": ks},
        lambda c: {"semi": semijoin_of(c["a"], c["ks"]), "anti": antijoin_of(c["a"], c["ks"])},
    )


@examples(60)
@given(left=pairs, ks=update_lists(keys))
def test_semijoin_multiplies_key_counts(workers: int, left: list[Update], ks: list[Update]) -> None:
    """semijoin with a non-distinct (even negative) keys collection multiplies the counts."""
    out = collect(pipeline_of(lambda a, ks: a.semijoin(ks)), workers=workers, a=left, ks=ks)
    assert_matches_oracle(out, {"a": left, "ks": ks}, lambda c: semijoin_of(c["a"], c["ks"]))


@examples(80)
@given(edges=update_lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=25))
def test_self_join_and_two_paths(workers: int, edges: list[Update]) -> None:
    """edges.join(edges) (one shared arrangement) and the 2-paths join match the oracle."""

    def build(edges: df.Collection) -> dict[str, df.Collection]:
        reversed_ = edges.map(lambda e: (e[1], e[0]))
        return {
            "self": edges.join(edges),
            "paths": reversed_.join_map(edges, lambda mid, src, dst: (src, dst)),
        }

    def query(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        e = c["edges"]
        rev = Counter({(b, a): n for (a, b), n in e.items()})
        return {
            "self": join_of(e, e, pair),
            "paths": join_of(rev, e, lambda _m, s, d: (s, d)),
        }

    out = collect(pipeline_of(build), workers=workers, edges=edges)
    assert_matches_oracle(out, {"edges": edges}, query)


@examples(50)
@given(left=pairs, right=pairs, ks=distinct_keys())
def test_joins_with_an_arranged_argument(
    workers: int, left: list[Update], right: list[Update], ks: list[Update]
) -> None:
    """join / semijoin / antijoin / join_core accept an Arranged and share its trace."""

    def build(a: df.Collection, b: df.Collection, ks: df.Collection) -> dict[str, df.Collection]:
        b_arr = b.arrange_by_key()
        ks_arr = ks.arrange_by_self()
        return {
            "join": a.join(b_arr),
            "join_map": a.join_map(b_arr, same),
            "semi": a.semijoin(ks_arr),
            "anti": a.antijoin(ks_arr),
            "core": a.arrange_by_key().join_core(b_arr, lambda k, x, y: [(k, x), (k, y)]),
        }

    def core(k: Any, x: Any, y: Any) -> list[Any]:
        return [(k, x), (k, y)]

    def query(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        a, b, k = c["a"], c["b"], c["ks"]
        both: Counter[Any] = Counter()
        for (key, x), n in a.items():
            for (key2, y), m in b.items():
                if key == key2:
                    for d in core(key, x, y):
                        both[d] += n * m
        return {
            "join": join_of(a, b, pair),
            "join_map": join_of(a, b, same),
            "semi": semijoin_of(a, k),
            "anti": antijoin_of(a, k),
            "core": both,
        }

    out = collect(pipeline_of(build), workers=workers, a=left, b=right, ks=ks)
    assert_matches_oracle(out, {"a": left, "b": right, "ks": ks}, query)


@examples(50)
@given(left=pairs, right=pairs, other=pairs)
def test_private_and_shared_sides_match_oracle(
    workers: int, left: list[Update], right: list[Update], other: list[Update]
) -> None:
    """Two joins share ``b``'s arrangement (read from its trace) while each keeps its other,
    private side in memory; both match the oracle, and so does the plain private join."""

    def build(a: df.Collection, b: df.Collection, c: df.Collection) -> dict[str, df.Collection]:
        b_arr = b.arrange_by_key()
        a_wrapped = a.map(lambda kv: (kv[0], (kv[1],)))
        return {"ab": a.join(b_arr), "cb": c.join_map(b_arr, same), "ac": a_wrapped.join(c)}

    def query(x: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        a, b, c = x["a"], x["b"], x["c"]
        a1: Counter[Any] = Counter()
        for (k, v), n in a.items():
            a1[(k, (v,))] += n
        return {"ab": join_of(a, b, pair), "cb": join_of(c, b, same), "ac": join_of(a1, c, pair)}

    out = collect(pipeline_of(build), workers=workers, a=left, b=right, c=other)
    assert_matches_oracle(out, {"a": left, "b": right, "c": other}, query)


@examples(40)
@given(left=int_key_collections, right=int_key_collections)
def test_forwarded_trace_batches_match_oracle(
    workers: int, left: list[Update], right: list[Update]
) -> None:
    """Unread arrangements forward big activations with int keys as trace batches
    (``FORWARD_AS_BATCH``); with every such activation forwarded that way the join, and a
    distinct over its keys, still match the oracle."""

    def build(a: df.Collection, b: df.Collection) -> dict[str, df.Collection]:
        joined = a.join(b)
        return {"join": joined, "keys": joined.map(lambda kv: kv[0]).distinct()}

    def query(x: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        joined = join_of(x["a"], x["b"], pair)
        live: Counter[Any] = Counter()
        for (k, _), n in joined.items():
            live[k] += n
        return {"join": joined, "keys": Counter({k: 1 for k, n in live.items() if n > 0})}

    with mock.patch.object(arrange_module, "FORWARD_AS_BATCH", 0):
        out = collect(pipeline_of(build), workers=workers, a=left, b=right)
    assert_matches_oracle(out, {"a": left, "b": right}, query)


def test_owned_sides_only_for_sole_readers() -> None:
    """A join keeps a side in memory exactly when it is that arrangement's only reader."""

    def build(a: df.Collection, b: df.Collection, c: df.Collection) -> dict[str, df.Collection]:
        b_arr = b.arrange_by_key()
        return {"ab": a.join(b_arr), "cb": c.join(b_arr)}

    job = run_job(pipeline_of(build), 1, a=[((1, 1), 0, 1)], b=[((1, 2), 0, 1)], c=[])
    owned = sorted((op.histories[0] is not None, op.histories[1] is not None)
                   for op in join_operators(job))  # fmt: skip
    assert owned == [(True, False), (True, False)]
    assert job.outputs["ab"].at(0) == {(1, (1, 2)): 1}


@examples(40)
@given(side=pairs)
def test_join_with_an_empty_side(workers: int, side: list[Update]) -> None:
    """Joining with an empty collection (either side) gives nothing; antijoin keeps all."""

    def build(a: df.Collection, empty: df.Collection) -> dict[str, df.Collection]:
        return {
            "left": a.join(empty),
            "right": empty.join(a),
            "semi": a.semijoin(empty),
            "anti": a.antijoin(empty),
        }

    out = collect(pipeline_of(build), workers=workers, a=side, empty=[])
    assert out["left"] == out["right"] == out["semi"] == []
    assert_matches_oracle(out["anti"], {"a": side}, lambda c: c["a"])


def test_output_time_is_the_join_of_times_and_diffs_multiply(workers: int) -> None:
    """A pair is output once, at the later of its two times, with the product of its diffs."""
    left = [((1, "x"), 3, 2), ((1, "z"), 0, 1), ((2, "w"), 1, 1)]
    right = [((1, "y"), 5, -3), ((1, "v"), 2, 1), ((3, "u"), 0, 1)]
    out = collect(pipeline_of(lambda a, b: a.join(b)), workers=workers, a=left, b=right)
    assert out == [
        ((1, ("z", "v")), 2, 1),
        ((1, ("x", "v")), 3, 2),
        ((1, ("x", "y")), 5, -6),
        ((1, ("z", "y")), 5, -3),
    ]


@examples(25)
@given(
    rounds=st.lists(
        st.tuples(
            st.lists(st.tuples(st.tuples(keys, vals), diffs, offsets), max_size=4),
            st.lists(st.tuples(st.tuples(keys, vals), diffs, offsets), max_size=4),
            st.lists(st.tuples(keys, st.just(1), offsets), max_size=2),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_join_interactive_rounds(workers: int, rounds: list[Any]) -> None:
    """Fed round by round, some updates ahead of time: every complete time matches the oracle."""
    fed: dict[str, list[Update]] = {"a": [], "b": [], "ks": []}

    def build(a: df.Collection, b: df.Collection, ks: df.Collection) -> dict[str, df.Collection]:
        return {"join": a.join(b), "semi": a.semijoin(ks), "paths": a.join(a)}

    def query(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        return {
            "join": join_of(c["a"], c["b"], pair),
            "semi": semijoin_of(c["a"], c["ks"]),
            "paths": join_of(c["a"], c["a"], pair),
        }

    async def main() -> None:
        async with df.open(pipeline_of(build), workers=workers) as job:
            for t, feeds in enumerate(rounds):
                for name, ups in zip(("a", "b", "ks"), feeds):
                    for d, r, off in ups:
                        job.inputs[name].update_at(d, t + off, r)
                        fed[name].append((d, t + off, r))
                await job.advance_to(t + 1)
                for u in range(t + 1):
                    want = expected_at(fed, query, u)
                    got = {name: job.outputs[name].at(u) for name in want}
                    assert got == want, u

    trio.run(main)


# -- budgeted work ----------------------------------------------------------------------------


def instrument(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record, per JoinOperator activation, how many output updates it sent."""
    produced: list[int] = []
    schedule = JoinOperator.schedule
    real_batch = join_module.UpdateBatch

    def counting_schedule(self: JoinOperator, ctx: Any) -> None:
        produced.append(0)
        schedule(self, ctx)

    def counting_batch(data: list[Any], diffs: list[int], consolidated: bool = False) -> Any:
        produced[-1] += len(data)
        return real_batch(data, diffs, consolidated)

    monkeypatch.setattr(JoinOperator, "schedule", counting_schedule)
    monkeypatch.setattr(join_module, "UpdateBatch", counting_batch)
    return produced


def test_join_budget_yields_between_keys(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a small budget, a big join is spread over many activations and stays exact."""
    monkeypatch.setattr(JoinOperator, "BUDGET", 500)
    produced = instrument(monkeypatch)
    left = [((k, a), 0, 1) for k in range(300) for a in range(10)]
    right = [((k, b), 1, 2) for k in range(300) for b in range(10)]
    job = run_job(pipeline_of(lambda a, b: a.join(b)), workers, a=left, b=right)
    out = job.output.updates()
    assert sorted(out) == sorted(
        ((k, (a, b)), 1, 2) for k in range(300) for a in range(10) for b in range(10)
    )
    busy = [n for n in produced if n]
    assert sum(busy) == 30_000
    assert max(busy) <= 500 + 10  # the budget, overshot by at most one row's matches
    assert len(busy) >= 30_000 // 510
    assert sum(w["activations"] for w in job.statistics()["workers"]) >= len(produced)


def test_join_budget_splits_one_huge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """One key with 2,000 x 200 matches is split across activations by the work budget."""
    workers = 1
    budget = 5_000
    monkeypatch.setattr(JoinOperator, "BUDGET", budget)
    produced = instrument(monkeypatch)
    left = [((7, a), 0, 1) for a in range(2_000)]
    right = [((7, b), 1, 1) for b in range(200)]
    job = run_job(pipeline_of(lambda a, b: a.join(b)), workers, a=left, b=right)
    out = job.output.updates()
    assert len(out) == 400_000
    assert all(t == 1 and r == 1 for _d, t, r in out)
    assert {d for d, _t, _r in out} == {(7, (a, b)) for a in range(2_000) for b in range(200)}
    busy = [n for n in produced if n]
    assert sum(busy) == 400_000
    # Each activation stays within the budget, overshooting by at most one row's matches,
    # so the operator has rescheduled itself many times.
    assert max(busy) <= budget + 2_000, f"one activation produced {max(busy)} updates"
    assert len(busy) >= 400_000 // (budget + 2_000)


# -- compaction holds -------------------------------------------------------------------------


def shared_xs_join(xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
    """``xs`` joined with ``ys`` twice: ``xs``'s arrangement has two readers, so a trace."""
    xs_arr, ys_arr = xs.arrange_by_key(), ys.arrange_by_key()
    return {
        "output": xs_arr.join_core(ys_arr, lambda k, a, b: [(k, (a, b))]),
        "again": xs_arr.join_core(ys_arr, lambda k, a, b: [(k, b, a)]),
    }


@pytest.mark.parametrize("shared", [False, True], ids=["private-side", "shared-trace"])
def test_join_lets_busy_side_compact(
    workers: int, shared: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Insert-then-retract rounds on one side: what the join holds of that side (its trace
    when shared, its in-memory history when private, compacted whenever it has doubled)
    stays small."""
    monkeypatch.setattr(history_module.KeyedHistory, "COMPACT_ALL_WRITTEN", 32)
    monkeypatch.setattr(join_kernel.SortedRuns, "COMPACT_ABOVE", 32)
    sizes: list[int] = []
    build: Any = shared_xs_join if shared else (lambda xs, ys: xs.join(ys))

    async def main() -> None:
        async with df.open(pipeline_of(build), workers=workers) as job:
            spines = input_spines(job, "xs")
            ops = join_operators(job)
            job.inputs["ys"].insert_many([(k, "y") for k in range(10)])
            for t in range(200):
                job.inputs["xs"].insert((t % 10, t))
                if t:
                    job.inputs["xs"].remove(((t - 1) % 10, t - 1))
                await job.advance_to(t + 1)
                assert job.outputs["output"].at(t) == {(t % 10, (t, "y")): 1}
                if shared:
                    sizes.append(sum(s.statistics().updates for s in spines.values()))
                else:
                    sizes.append(sum(op.stored(0) for op in ops))

    trio.run(main)
    assert min(sizes) > 0
    assert max(sizes[20:]) <= (8 if shared else 48) * workers


def test_join_compacts_a_key_it_reads_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key whose updates keep cancelling (one value inserted and retracted round after
    round) is compacted as soon as the other side reads it with more than
    JOIN_COMPACT_ABOVE updates, long before a full pass: the join does not pair matches
    with updates that cancel. (This is the row path's read; the kernel reads the other side's
    columns, which it does not compact, see :mod:`deltaflow.operators.join.kernel`.)"""
    monkeypatch.setattr(history_module.KeyedHistory, "COMPACT_ALL_WRITTEN", 10**6)
    monkeypatch.setattr(kernels, "_mode", "never")
    lengths: list[int] = []

    async def main() -> None:
        async with df.open(pipeline_of(lambda xs, ys: xs.join(ys))) as job:
            (op,) = join_operators(job)
            for t in range(40):
                if t % 2 == 0:
                    job.inputs["xs"].insert((0, "a"))
                else:
                    job.inputs["xs"].remove((0, "a"))
                job.inputs["ys"].insert((0, t))
                await job.advance_to(t + 1)
                want = {(0, ("a", y)): 1 for y in range(t + 1)} if t % 2 == 0 else {}
                assert job.outputs["output"].at(t) == want
                history = op.histories[0]
                assert history is not None
                lengths.append(len(history.rows.get(0, [])))

    trio.run(main)
    assert max(lengths) <= join_module.JOIN_COMPACT_ABOVE + 2, lengths
    assert max(lengths) < 20  # the bound above is not vacuous


def test_join_quiet_side_trace_stays_small(workers: int) -> None:
    """A quiet join input (arranged for two joins, so with a trace) does not accumulate one
    trace batch per round."""
    rounds = 150
    batches: list[int] = []

    async def main() -> None:
        async with df.open(pipeline_of(shared_xs_join), workers=workers) as job:
            quiet = input_spines(job, "ys")
            job.inputs["ys"].insert_many([(k, "y") for k in range(10)])
            for t in range(rounds):
                job.inputs["xs"].insert((t % 10, t))
                await job.advance_to(t + 1)
                batches.append(max(s.statistics().batches for s in quiet.values()))
            assert job.outputs["output"].at(rounds - 1)[(3, (3, "y"))] == 1

    trio.run(main)
    assert min(batches) > 0
    assert max(batches) <= 12, f"the quiet side's trace holds {max(batches)} batches"


def test_accumulate_helper_sanity() -> None:
    """The oracle helpers agree with a hand-computed join (guards the test's own queries)."""
    a = Counter({(1, "x"): 2, (2, "y"): -1})
    b = Counter({(1, "u"): 3, (1, "v"): 1, (3, "w"): 5})
    assert join_of(a, b, pair) == Counter({(1, ("x", "u")): 6, (1, ("x", "v")): 2})
    assert semijoin_of(a, Counter({1: 1})) == Counter({(1, "x"): 2})
    anti = antijoin_of(a, Counter({1: 1}))
    assert {d: n for d, n in anti.items() if n} == {(2, "y"): -1}
    assert accumulate([((1, "x"), 0, 1), ((1, "x"), 2, -1)], 1) == {(1, "x"): 1}


def test_join_sends_its_output_consolidated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs that make the same output datum at the same time are summed in the join (and
    dropped when they cancel), and its batches say so: an arrangement reading them alone
    does not sum them again."""
    sent: list[Any] = []
    real_batch = join_module.UpdateBatch

    def recording_batch(data: list[Any], diffs: list[int], consolidated: bool = False) -> Any:
        batch = real_batch(data, diffs, consolidated)
        sent.append(batch)
        return batch

    monkeypatch.setattr(join_module, "UpdateBatch", recording_batch)
    left = [((1, "x"), 0, 1), ((1, "y"), 0, 2), ((2, "x"), 0, 1), ((2, "y"), 0, -1)]
    right = [((1, "z"), 0, 1), ((2, "z"), 0, 1)]
    job = run_job(
        pipeline_of(lambda a, b: a.join_map(b, lambda k, _v, _w: k % 2)), 1, a=left, b=right
    )
    assert accumulate(job.output.updates(), 0) == {1: 3}
    assert sent
    for batch in sent:
        assert batch.consolidated
        assert len(set(batch.data)) == len(batch.data)
        assert all(batch.diffs)
    # Key 1 made datum 1 three times over (once with diff 2); key 2 made datum 0 at +1 and -1.
    assert sorted((d, r) for b in sent for d, r in zip(b.data, b.diffs)) == [(1, 3)]


def test_a_history_is_swept_again_only_when_it_may_compact() -> None:
    """A side's history is tidied when either input frontier has moved since the last tidy
    call (at first: since they started), or a pass is under way, or its own frontier is not
    beyond the other's (then updates may have come at times compaction advances); not while
    both stand still with its own beyond the other's (a run given many times at once)."""
    from deltaflow.framework.antichain import Antichain
    from deltaflow.framework.trace.spine import Spine

    class Ctx:
        def __init__(self, left: int, right: int) -> None:
            self.frontiers = (Antichain([left]), Antichain([right]))

        def frontier(self, side: int) -> Antichain:
            return self.frontiers[side]

    op = JoinOperator(
        "join", Spine(Antichain([0])), Spine(Antichain([0])), _pair_logic, own=(True, True)
    )
    ctx: Any = Ctx(0, 0)
    assert not op._worth_tidying(0, ctx)  # as they started
    assert op._worth_tidying(0, Ctx(2, 0))  # this side's moved
    assert not op._worth_tidying(0, Ctx(2, 0))
    assert op._worth_tidying(0, Ctx(2, 1))  # the other side's moved
    assert not op._worth_tidying(0, Ctx(2, 1))
    assert op._worth_tidying(1, Ctx(2, 1))  # side 1 (frontier 1) is behind side 0's (2)
    assert op._worth_tidying(1, Ctx(2, 1))  # its updates may be advanced: every time
    history = op.histories[0]
    assert history is not None
    first = history_module.KeyedHistory.COMPACT_ALL_WRITTEN - 100
    history.extend((k, "v", 1, 1) for k in range(first))
    history.tidy((1,))  # below the limit: no pass
    history.extend((k, "v", 1, 1) for k in range(first, first + 200))
    history.tidy((1,))  # a pass starts (its first slice is done)
    assert history.sweeping
    assert op._worth_tidying(0, Ctx(2, 1))


def _pair_logic(k: Any, a: Any, b: Any) -> Any:
    return (k, (a, b))
