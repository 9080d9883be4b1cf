"""Fusion of linear chains: one actor per chain (or one outlet of the actor whose output the
chain alone reads), never across a shared collection or an exchange, the same results as
unfused, and errors that still name the failing step.

The plan is inspected with ``deltaflow.scheduler.local.plan.make_plan`` on the spec a pipeline's
``instantiate()`` records; results are compared with a naive model that pushes every input
update through the chain one step at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.jobs import pipeline_of
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework.lattice import Time, join
from deltaflow.scheduler.local.plan import Plan, make_plan
from deltaflow.testing import assert_collections_equal, collect

Update = tuple[Any, Time, int]

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def plan_of(build: Callable[..., Any], *, fuse: bool = True) -> Plan:
    """The physical plan deltaflow would run for ``build``."""
    return make_plan(pipeline_of(build).instantiate().spec, fuse=fuse)


def linear_actors(plan: Plan) -> list[str]:
    """Names of the linear chains, in plan order: the physical nodes that are not inputs,
    outputs or other plumbing, and the chains run as outlets of another actor's output."""
    plumbing = ("input:", "output:", "concat", "exchange", "consolidate", "probe")
    names = []
    for n, outlets in zip(plan.nodes, plan.outlets):
        if not n.name.startswith(plumbing):
            names.append(n.name)
        names += [" -> ".join(s.label for s in steps) for port in outlets for steps, _ in port]
    return names


# -- a menu of linear steps, each with its model on single updates ------------------------------


@attrs.frozen
class Op:
    """A linear step: how to add it to a collection, and what it does to one update."""

    name: str
    apply: Callable[[df.Collection], df.Collection]
    model: Callable[[Update], list[Update]]


def _jf_logic(d: int) -> list[tuple[int, int, int]]:
    return [(d, d % 4, 1), (d + 100, 3, -1)] if d % 2 else [(d, 0, 2)]


OPS = [
    Op("map", lambda c: c.map(lambda d: d % 7 + 1), lambda u: [(u[0] % 7 + 1, u[1], u[2])]),
    Op(
        "filter",
        lambda c: c.filter(lambda d: d % 3 != 0),
        lambda u: [u] if u[0] % 3 != 0 else [],
    ),
    Op(
        "flat_map",
        lambda c: c.flat_map(lambda d: [d, d // 2]),
        lambda u: [(u[0], u[1], u[2]), (u[0] // 2, u[1], u[2])],
    ),
    Op(
        "explode",
        lambda c: c.explode(lambda d: [(d, d % 3 - 1)]),
        lambda u: [(u[0], u[1], u[2] * (u[0] % 3 - 1))],
    ),
    Op("negate", lambda c: c.negate(), lambda u: [(u[0], u[1], -u[2])]),
    Op("inspect", lambda c: c.inspect(lambda _u: None), lambda u: [u]),
    Op(
        "join_function",
        lambda c: c.join_function(_jf_logic),
        lambda u: [(d2, join(u[1], t2), u[2] * r2) for d2, t2, r2 in _jf_logic(u[0])],
    ),
]


def run_model(chain: list[Op], xs: list[Update]) -> list[Update]:
    """Push every update through every step of the chain."""
    ups = list(xs)
    for op in chain:
        ups = [v for u in ups for v in op.model(u)]
    return ups


def build_chain(chain: list[Op]) -> Callable[[df.Collection], df.Collection]:
    """A build applying the chain's steps in order."""

    def build(xs: df.Collection) -> df.Collection:
        for op in chain:
            xs = op.apply(xs)
        return xs

    return build


histories = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 20), st.integers(-3, 3).filter(bool)),
    max_size=25,
)
# Histories that are collections (no negative count at any time), for pipelines that reduce.
collections = histories.map(nonnegative)


@st.composite
def covering_pairs(draw: st.DrawFn) -> tuple[list[Update], list[Update]]:
    """Collections ``xs`` and ``ys`` where ``ys`` holds at least what ``xs`` holds at every
    time (``ys`` gets, at time 0, as many more of each datum as ``xs`` ever inserts), so
    that ``ys - xs`` is a collection too and can be reduced."""
    xs, ys = draw(collections), draw(collections)
    inserted: dict[Any, int] = {}
    for d, _, r in xs:
        if r > 0:
            inserted[d] = inserted.get(d, 0) + r
    return xs, ys + [(d, 0, n) for d, n in inserted.items()]


# -- structure of the plan ----------------------------------------------------------------------


def test_chain_of_linear_operators_is_one_outlet() -> None:
    """Every kind of linear step in a row becomes one chain naming each step, run as an
    outlet of the input's actor (the chain alone reads the input)."""
    chain = OPS + OPS[:3]
    plan = plan_of(build_chain(chain))
    assert [n.name.split(":")[0] for n in plan.nodes] == ["input", "output"]
    (fused,) = linear_actors(plan)
    labels = fused.split(" -> ")
    assert [label.split("(")[0] for label in labels] == [op.name for op in chain]
    assert "test_fusion" in fused  # user functions are named by module
    # The input's actor stands for every logical node of the chain too.
    assert len(plan.nodes[0].logical) == len(chain) + 1
    assert sorted(set(plan.physical_of.values())) == [0, 1]


def test_chains_run_as_outlets_beside_other_readers_and_of_unions() -> None:
    """A chain reading an actor's output runs as its outlet, beside the output's other
    readers (which get what the actor sends, untransformed); one reading a dissolved union
    of outputs runs as an outlet of each of them; one reading another chain's output fuses
    with it, or (when that output has other readers) stays an actor."""

    def fan_out(xs: df.Collection) -> dict[str, df.Collection]:
        counted = xs.map(lambda d: (d % 3, d)).count()
        return {"flipped": counted.map(lambda kn: (kn[1], kn[0])), "counted": counted}

    plan = plan_of(fan_out)
    assert [n.name.split(":")[0] for n in plan.nodes] == ["input", "count", "output", "output"]
    (count,) = [i for i, n in enumerate(plan.nodes) if n.name == "count"]
    ((steps, routes),) = plan.outlets[count][0]
    assert [s.kind for s in steps] == ["map"] and len(routes) == 1
    assert len(plan.routes[count][0]) == 1  # "counted": what count sends, as it is

    def chained(xs: df.Collection) -> dict[str, df.Collection]:
        shared = xs.map(lambda d: d + 1)
        return {"a": shared.map(lambda d: d * 2), "b": shared}

    plan = plan_of(chained)
    # ``shared`` runs as the input's outlet, feeding the second map (an actor: its source
    # runs as an outlet itself) and the output "b".
    assert [n.name.split(":")[0].split("(")[0] for n in plan.nodes] == [
        "input", "map", "output", "output"
    ]  # fmt: skip
    ((steps, routes),) = plan.outlets[0][0]
    assert [s.kind for s in steps] == ["map"] and sorted(r[0] for r in routes) == [1, 3]

    def union(xs: df.Collection, ys: df.Collection) -> df.Collection:
        counts = xs.map(lambda d: (d, d)).count()
        sums = ys.map(lambda d: (d, d)).sum()
        return counts.concat(sums).map(lambda kv: kv[1])

    plan = plan_of(union)
    assert not [n for n in plan.nodes if n.name.startswith(("map", "concat"))]
    with_outlets = [n.name for n, outlets in zip(plan.nodes, plan.outlets) if any(outlets)]
    assert sorted(with_outlets) == ["count", "input:xs", "input:ys", "sum"]


@FAST
@given(xs=collections, ys=collections)
def test_outlets_before_an_exchange_give_the_unfused_results(
    workers: int, xs: list[Update], ys: list[Update]
) -> None:
    """Chains run as outlets (after an input, after a reduction, after a union of both)
    feeding exchanges give what they give as actors, at any worker count."""

    def build(xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
        counts = xs.map(lambda d: (d % 4, d)).count()
        flipped = counts.map(lambda kn: (kn[1], kn[0])).filter(lambda nk: nk[0] > 1)
        both = flipped.concat(ys.map(lambda d: (d % 3, d)))
        return {"joined": both.map(lambda kv: (kv[0] % 2, kv[1])).count(), "flipped": flipped}

    fused = collect(pipeline_of(build), workers, xs=xs, ys=ys)
    unfused = collect(pipeline_of(build), workers, fuse=False, xs=xs, ys=ys)
    assert fused == unfused


def test_fuse_false_keeps_one_actor_per_step() -> None:
    """With fuse=False every linear step is its own actor."""
    plan = plan_of(build_chain(OPS), fuse=False)
    assert len(plan.nodes) == len(OPS) + 2
    assert [name.split("(")[0] for name in linear_actors(plan)] == [op.name for op in OPS]


def test_shared_collection_is_not_fused_away() -> None:
    """A collection with two consumers stays its own actor; each consumer chain fuses on."""

    def build(xs: df.Collection) -> dict[str, df.Collection]:
        shared = xs.map(lambda d: d + 1).filter(lambda d: d % 2)
        return {
            "a": shared.map(lambda d: d * 10).negate(),
            "b": shared.flat_map(lambda d: [d, d]),
            "c": shared,
        }

    shapes = sorted(
        " -> ".join(label.split("(")[0] for label in a.split(" -> "))
        for a in linear_actors(plan_of(build))
    )
    assert shapes == ["flat_map", "map -> filter", "map -> negate"]


def test_exchange_splits_a_chain() -> None:
    """Steps before and after an exchange are fused separately, never across it."""

    def build(xs: df.Collection) -> df.Collection:
        return xs.map(lambda d: d + 1).map(lambda d: d * 2).exchange().filter(bool).negate()

    plan = plan_of(build)
    actors = linear_actors(plan)
    assert [a.count(" -> ") for a in actors] == [1, 1]
    assert [n.name for n in plan.nodes].count("exchange") == 1


def _union_pipeline(xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
    """Unions feeding a linear chain, a reduction (an exchange) and an output directly."""
    both = xs.map(lambda d: d + 1).concat(ys, xs.negate()).concat(ys.filter(lambda d: d % 2))
    return {
        "chain": both.map(lambda d: d * 3),
        "count": both.map(lambda d: (d % 4, d)).count(),
        "plain": xs.concat(ys),
        "twice": ys.concat(ys),
    }


def test_union_with_one_consumer_is_dissolved_into_its_port() -> None:
    """A concat with one consumer is no actor: its inputs feed the consumer's port."""
    plan = make_plan(pipeline_of(_union_pipeline).instantiate().spec)
    names = [n.name for n in plan.nodes]
    unions = {tuple(len(edges) for edges in n.inputs) for n in plan.nodes if n.name == "concat"}
    # ``both`` has two consumers and stays an actor, with the inner union's three inputs in
    # its first port; ``ys.concat(ys)`` would bring one edge into a port twice and stays too.
    assert unions == {(3, 1), (1, 1)}
    # ``xs.concat(ys)`` went straight into the output's port.
    (plain,) = [n for n in plan.nodes if n.name == "output:plain"]
    assert [names[e.node] for e in plain.inputs[0]] == ["input:xs", "input:ys"]
    unfused = make_plan(pipeline_of(_union_pipeline).instantiate().spec, fuse=False)
    assert [n.name for n in unfused.nodes].count("concat") == 4


@FAST
@given(xs_ys=covering_pairs())
def test_dissolved_unions_agree_with_model(
    workers: int, xs_ys: tuple[list[Update], list[Update]]
) -> None:
    """With unions dissolved the results equal the unfused run's and the model's. ``both``
    subtracts ``xs`` and is counted: ``ys`` covers ``xs`` so that ``both`` is a collection."""
    xs, ys = xs_ys
    fused = collect(pipeline_of(_union_pipeline), workers, xs=xs, ys=ys)
    unfused = collect(pipeline_of(_union_pipeline), workers, fuse=False, xs=xs, ys=ys)
    assert fused == unfused
    both = [(d + 1, t, r) for d, t, r in xs] + ys + [(d, t, -r) for d, t, r in xs]
    both += [(d, t, r) for d, t, r in ys if d % 2]
    assert_collections_equal(fused["chain"], [(d * 3, t, r) for d, t, r in both])
    assert_collections_equal(fused["plain"], xs + ys)
    assert_collections_equal(fused["twice"], ys + ys)
    # The count at every time, recomputed from scratch.
    times = sorted({t for _, t, _ in both})
    expected: list[Update] = []
    before: dict[int, int] = {}
    for time in times:
        now: dict[int, int] = {}
        for d, t, r in both:
            if t <= time:
                now[d % 4] = now.get(d % 4, 0) + r
        now = {k: n for k, n in now.items() if n > 0}
        for k in before.keys() | now.keys():
            if before.get(k) != now.get(k):
                if k in before:
                    expected.append(((k, before[k]), time, -1))
                if k in now:
                    expected.append(((k, now[k]), time, 1))
        before = now
    assert_collections_equal(fused["count"], expected)


# -- arrangements absorbed into their only reader (inlets) --------------------------------------


def _readers_pipeline(xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
    """Arrangements with one reader each (absorbed), and one shared by two joins (kept)."""
    shared = ys.arrange_by_key()
    return {
        "distinct": xs.map(lambda d: d % 5).distinct(),
        "join": xs.map(lambda d: (d % 3, d)).join(ys.filter(lambda kv: kv[1] % 2 == 0)),
        "shared1": xs.map(lambda d: (d % 4, d)).join(shared),
        "shared2": shared.join_core(shared, lambda k, a, b: [(k, a, b)]),
        "back": xs.map(lambda d: (d % 2, d)).arrange_by_key().as_collection(),
    }


def test_arrangement_with_one_reader_is_an_inlet_of_it() -> None:
    """An arrangement read by one operator only is no actor: that operator's port drains the
    arrangement's input through it. A shared one stays an actor; ``fuse=False`` keeps all."""
    plan = plan_of(_readers_pipeline)
    names = [n.name for n in plan.nodes]
    # The shared arrangement of ys is the only arrange actor left.
    assert names.count("arrange_by_key") == 1
    assert "arrange_by_self" not in names
    inlets = sorted((n.name, sorted(n.inlets)) for n in plan.nodes if n.inlets)
    assert inlets == [
        ("as_collection", [0]),
        ("distinct", [0]),
        ("join_map", [0]),  # xs with the shared arrangement of ys
        ("join_map", [0, 1]),
    ]
    # Ports with an inlet take the arranged collection's updates, exchanged by key.
    for node in plan.nodes:
        for port in node.inlets:
            assert all(e.pact.is_exchange for e in node.inputs[port])
    (shared1,) = [n for n in plan.nodes if n.name == "join_map" and len(n.inlets) == 1]
    assert [names[e.node] for e in shared1.inputs[1]] == ["arrange_by_key"]
    assert not any(n.inlets for n in plan.nodes if n.name == "join_core")
    unfused = [n.name for n in plan_of(_readers_pipeline, fuse=False).nodes]
    assert unfused.count("arrange_by_key") == 5 and unfused.count("arrange_by_self") == 1


def test_one_worker_absorbs_the_linear_chain_before_an_inlet() -> None:
    """With one worker an exchange moves nothing: the linear chain feeding an inlet's
    arrangement runs in the inlet too, and no actor is left for it. With more workers (or
    when the number is not known) the chain stays an actor before the exchange."""
    spec = pipeline_of(_readers_pipeline).instantiate().spec
    one = make_plan(spec, workers=1)
    assert linear_actors(one) == [
        "arrange_by_key", "distinct", "join_map", "join_map", "join_core", "as_collection"
    ]  # fmt: skip
    chains = sorted(
        (n.name, port, [s.kind for s in inlet.steps])
        for n in one.nodes
        for port, inlet in n.inlets.items()
    )
    assert chains == [
        ("as_collection", 0, ["map"]),
        ("distinct", 0, ["map"]),
        ("join_map", 0, ["map"]),
        ("join_map", 0, ["map"]),
        ("join_map", 1, ["filter"]),
    ]
    names = [n.name for n in one.nodes]
    (distinct,) = [n for n in one.nodes if n.name == "distinct"]
    assert [names[e.node] for e in distinct.inputs[0]] == ["input:xs"]
    for plan in (make_plan(spec, workers=2), make_plan(spec)):
        assert all(not inlet.steps for n in plan.nodes for inlet in n.inlets.values())
        assert sum(a.startswith(("map", "filter")) for a in linear_actors(plan)) == 5


def test_error_in_a_step_absorbed_into_an_inlet_names_the_step() -> None:
    """A failing step that runs inside a reader's inlet is still named by its step."""

    def build(xs: df.Collection) -> df.Collection:
        return xs.map(ok_before).map(make_failing("map")).distinct()

    with pytest.raises(df.OperatorError) as info:
        collect(pipeline_of(build), 1, xs=[(d, d % 3, 1) for d in range(8)])
    assert "map(" in info.value.operator and "failing_step" in info.value.operator
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@FAST
@given(
    xs=collections,  # distinct reads it; ys only meets joins and keeps negative counts
    ys=st.lists(
        st.tuples(
            st.tuples(st.integers(0, 3), st.integers(0, 5)),
            st.integers(0, 20),
            st.integers(-2, 2).filter(bool),
        ),
        max_size=15,
    ),
)
def test_inlets_give_the_unfused_results(workers: int, xs: list[Update], ys: list[Update]) -> None:
    """Readers with inlets compute what they compute behind arrange actors."""
    fused = collect(pipeline_of(_readers_pipeline), workers, xs=xs, ys=ys)
    unfused = collect(pipeline_of(_readers_pipeline), workers, fuse=False, xs=xs, ys=ys)
    assert fused == unfused
    assert_collections_equal(fused["back"], [((d % 2, d), t, r) for d, t, r in xs])


# -- results ------------------------------------------------------------------------------------


@FAST
@given(xs=histories, chain=st.lists(st.sampled_from(OPS), min_size=1, max_size=6))
def test_fused_and_unfused_agree_with_model(
    workers: int, xs: list[Update], chain: list[Op]
) -> None:
    """Any chain gives the same consolidated output fused and unfused, equal to the model."""
    build = build_chain(chain)
    fused = collect(pipeline_of(build), workers, fuse=True, xs=xs)
    unfused = collect(pipeline_of(build), workers, fuse=False, xs=xs)
    assert fused == unfused
    assert_collections_equal(fused, run_model(chain, xs))
    assert len(linear_actors(plan_of(build))) == 1
    assert len(linear_actors(plan_of(build, fuse=False))) == len(chain)


@FAST
@given(xs=histories)
def test_shared_collection_feeds_every_consumer(workers: int, xs: list[Update]) -> None:
    """Both consumers of a shared collection (and concat of it with itself) get all its data."""
    seen: list[Update] = []

    def build(xs: df.Collection) -> dict[str, df.Collection]:
        shared = xs.map(lambda d: d % 5).inspect(seen.append)
        return {
            "a": shared.map(lambda d: d * 10),
            "b": shared.filter(lambda d: d > 1).negate(),
            "twice": shared.concat(shared),
        }

    for fuse in (True, False):
        seen.clear()
        out = collect(pipeline_of(build), workers, fuse=fuse, xs=xs)
        mod = [(d % 5, t, r) for d, t, r in xs]
        assert_collections_equal(out["a"], [(d * 10, t, r) for d, t, r in mod])
        assert_collections_equal(out["b"], [(d, t, -r) for d, t, r in mod if d > 1])
        assert_collections_equal(out["twice"], mod + mod)
        # The shared chain ran once per update, not once per consumer.
        assert_collections_equal(seen, mod)
        assert len(seen) <= len(xs)


# -- errors -------------------------------------------------------------------------------------


def ok_before(d: int) -> int:
    return d + 1


def ok_after(d: int) -> int:
    return d * 2


def make_failing(kind: str) -> Callable[[int], Any]:
    """A user function for a step of ``kind`` that raises on the datum 4."""

    def failing_step(d: Any) -> Any:
        if (d[0] if kind == "inspect" else d) == 4:
            raise ZeroDivisionError("boom")
        if kind == "explode":
            return [(d, 1)]
        if kind == "join_function":
            return [(d, 0, 1)]
        if kind == "flat_map":
            return [d]
        return d

    return failing_step


KINDS = ["map", "filter", "flat_map", "explode", "inspect", "join_function"]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("kind", KINDS)
def test_error_names_the_failing_step(workers: int, kind: str, fuse: bool) -> None:
    """An exception in the middle of a chain names that step and its function, not the chain."""

    def build(xs: df.Collection) -> df.Collection:
        return getattr(xs.map(ok_before), kind)(make_failing(kind)).map(ok_after)

    with pytest.raises(df.OperatorError) as info:
        collect(pipeline_of(build), workers, fuse=fuse, xs=[(d, d % 3, 1) for d in range(8)])
    err = info.value
    assert f"{kind}(" in err.operator
    assert "failing_step" in err.operator
    assert "ok_before" not in err.operator and "ok_after" not in err.operator
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert "boom" in str(err) and "failing_step" in str(err)


@pytest.mark.parametrize("kind", ["map", "filter"])
def test_error_in_fused_chain_with_lambdas(kind: str) -> None:
    """A failing lambda inside a fused chain is named by its step, module and line."""

    def build(xs: df.Collection) -> df.Collection:
        first = xs.map(lambda d: d - 1)
        fails = first.map(lambda d: 1 // d) if kind == "map" else first.filter(lambda d: 1 // d)
        return fails.negate()

    assert len(linear_actors(plan_of(build))) == 1
    with pytest.raises(df.OperatorError) as info:
        collect(pipeline_of(build), xs=[(3, 0, 1), (1, 1, 1)])
    operator = info.value.operator
    assert operator.startswith(f"{kind}(")
    assert "<lambda>" in operator and "test_fusion" in operator
    line = int(operator.rstrip(")").rsplit(":", 1)[1])
    assert line == build.__code__.co_firstlineno + 2  # the line of the failing lambda
