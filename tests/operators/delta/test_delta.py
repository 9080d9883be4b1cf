"""Delta queries: ``multiway_join``, ``half_join`` and the prefix extenders.

Every result is compared with a brute-force natural join of the accumulated inputs at every
time (``tests/reference.py``): triangles, 4-cycles, paths projected on their ends, repeated
variables, atoms of several arities, multiplicities above one and retractions, a skewed graph
with a hub, partially ordered times (inside a loop), a transitive closure whose step is a
multiway join; on 1, 2 and 3 workers. The worst-case bound is checked by counting proposals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from hypothesis import given, strategies as st
from tests.harness import examples, multiway_closure
from tests.jobs import pipeline_of
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework.lattice import Product
from deltaflow.testing import collect

Update = tuple[Any, Any, int]
Atoms = Sequence[tuple[str, Any]]

WORKERS = [1, 2, 3]
nodes = st.integers(0, 4)
times = st.integers(0, 8)
diffs = st.sampled_from([-1, 1, 1, 2])


def updates_of(data: st.SearchStrategy[Any], max_size: int = 25) -> Any:
    """Updates over times 0..8 with duplicates, retractions and counts above one."""
    return st.lists(st.tuples(data, times, diffs), max_size=max_size)


edge_lists = updates_of(st.tuples(nodes, nodes))


def natural_join(
    head: Sequence[str] | str, atoms: Atoms, colls: dict[str, Counter[Any]]
) -> Counter[Any]:
    """The brute-force answer: every assignment consistent with every atom, counts multiplied,
    projected on ``head`` (one name: bare values)."""
    out: Counter[Any] = Counter()

    def go(i: int, env: dict[str, Any], weight: int) -> None:
        if i == len(atoms):
            out[env[head] if isinstance(head, str) else tuple(env[v] for v in head)] += weight
            return
        name, variables = atoms[i]
        vs = (variables,) if isinstance(variables, str) else variables
        for datum, n in colls[name].items():
            if not n:
                continue
            values = (datum,) if len(vs) == 1 else datum
            new = dict(env)
            if all(new.setdefault(v, x) == x for v, x in zip(vs, values)):
                go(i + 1, new, weight * n)

    go(0, {}, 1)
    return Counter({d: n for d, n in out.items() if n})


def check_query(
    head: Sequence[str] | str, atoms: Atoms, workers: int, **inputs: list[Update]
) -> None:
    """Run ``multiway_join(head, *atoms)`` (atoms name inputs) and compare with the oracle."""
    names = sorted(inputs)

    def build(**colls: df.Collection) -> df.Collection:
        return df.multiway_join(head, *[(colls[n], vs) for n, vs in atoms])

    pipe = type("Q", (df.Pipeline,), {"build": lambda self, **kw: build(**kw)})()
    pipe.input_names = lambda: names  # type: ignore[method-assign]
    out = collect(pipe, workers=workers, **inputs)
    assert_matches_oracle(out, inputs, lambda c: natural_join(head, atoms, c))


TRIANGLE = [("e", ("a", "b")), ("e", ("b", "c")), ("e", ("a", "c"))]


@pytest.mark.parametrize("workers", WORKERS)
@examples(40)
@given(edges=edge_lists)
def test_triangles_match_oracle(workers: int, edges: list[Update]) -> None:
    """Triangles of a changing multigraph equal the brute-force join at every time."""
    check_query(("a", "b", "c"), TRIANGLE, workers, e=edges)


@pytest.mark.parametrize("workers", WORKERS)
@examples(25)
@given(edges=edge_lists)
def test_four_cycles_match_oracle(workers: int, edges: list[Update]) -> None:
    """4-cycles (four atoms, two extension steps with two candidates each)."""
    atoms = [("e", ("a", "b")), ("e", ("b", "c")), ("e", ("c", "d")), ("e", ("d", "a"))]
    check_query(("a", "b", "c", "d"), atoms, workers, e=edges)


@pytest.mark.parametrize("workers", WORKERS)
@examples(25)
@given(edges=edge_lists, more=edge_lists)
def test_paths_projected_on_their_ends(
    workers: int, edges: list[Update], more: list[Update]
) -> None:
    """Two-hop paths over two inputs, projected on their ends (counts summed)."""
    atoms = [("e", ("a", "b")), ("f", ("b", "c"))]
    check_query(("a", "c"), atoms, workers, e=edges, f=more)


@pytest.mark.parametrize("workers", WORKERS)
@examples(25)
@given(
    r=updates_of(st.tuples(nodes, nodes, nodes)),
    s=edge_lists,
    t=updates_of(nodes, 10),
)
def test_repeated_variables_and_arities(
    workers: int, r: list[Update], s: list[Update], t: list[Update]
) -> None:
    """Repeated variables mean equality; atoms of arity 3, 2 and 1; a one-variable head."""
    atoms = [("r", ("x", "x", "y")), ("s", ("y", "z")), ("t", "z")]
    check_query("z", atoms, workers, r=r, s=s, t=t)
    atoms = [("r", ("x", "y", "z")), ("s", ("z", "z")), ("t", "x")]
    check_query(("x", "y"), atoms, workers, r=r, s=s, t=t)


@pytest.mark.parametrize("workers", WORKERS)
@examples(20)
@given(s=edge_lists, t=updates_of(nodes, 10), r=updates_of(st.tuples(nodes, nodes, nodes)))
def test_a_wide_atom_binds_several_variables_at_once(
    workers: int, s: list[Update], t: list[Update], r: list[Update]
) -> None:
    """An arity-3 atom extends two variables in one step; a cross product of disconnected
    atoms; an atom repeated whole (all bound: validated)."""
    check_query(("a", "b", "c"), [("t", "a"), ("r", ("a", "b", "c"))], workers, t=t, r=r)
    check_query(("a", "z"), [("t", "a"), ("t", "z")], workers, t=t)
    check_query(("a", "b"), [("s", ("a", "b")), ("s", ("a", "b")), ("s", ("b", "a"))], workers, s=s)


@st.composite
def hub_graphs(draw: st.DrawFn) -> list[Update]:
    """A star around node 0 (many edges in and out, some retracted) plus random edges."""
    out: list[Update] = []
    for x in draw(st.lists(st.integers(1, 12), max_size=14)):
        out.append(((0, x) if draw(st.booleans()) else (x, 0), draw(times), 1))
    out.extend(draw(updates_of(st.tuples(st.integers(0, 12), st.integers(0, 12)), 15)))
    retract = draw(st.lists(st.sampled_from(out), max_size=4)) if out else []
    out.extend((d, t + draw(st.integers(0, 3)), -r) for d, t, r in retract)
    return out


@pytest.mark.parametrize("workers", WORKERS)
@examples(25)
@given(edges=hub_graphs())
def test_skewed_graph_with_a_hub(workers: int, edges: list[Update]) -> None:
    """Triangles on a skewed graph (one node in most edges) equal the brute-force join."""
    check_query(("a", "b", "c"), TRIANGLE, workers, e=edges)


# -- partially ordered times ------------------------------------------------------------------


def run_in_loop(
    query: Callable[..., df.Collection], workers: int, **inputs: list[Update]
) -> list[Update]:
    """``query`` run inside a loop over inputs at ``Product`` times: each update
    ``(d, Product(o, i), r)`` is fed as ``((d, i), o, r)`` and moved to round ``i`` inside the
    loop; what the query produces there is recorded with its product times."""
    seen: list[Update] = []
    names = sorted(inputs)

    def build(**colls: df.Collection) -> df.Collection:
        seed = colls[names[0]].filter(lambda _d: False)

        def step(v: df.Collection) -> df.Collection:
            moved = {
                n: c.enter_scope(v.scope).join_function(lambda di: [(di[0], Product(0, di[1]), 1)])
                for n, c in colls.items()
            }
            out = query(**moved)
            return v.concat(out.inspect(seen.append).filter(lambda _d: False))

        return seed.iterate(step)

    pipe = type("Q", (df.Pipeline,), {"build": lambda self, **kw: build(**kw)})()
    pipe.input_names = lambda: names  # type: ignore[method-assign]
    fed = {n: [((d, t.inner), t.outer, r) for d, t, r in ups] for n, ups in inputs.items()}
    collect(pipe, workers=workers, **fed)
    return seen


product_times = st.builds(Product, st.integers(0, 3), st.integers(0, 3))


@pytest.mark.parametrize("workers", WORKERS)
@examples(30)
@given(edges=st.lists(st.tuples(st.tuples(nodes, nodes), product_times, diffs), max_size=20))
def test_triangles_at_partially_ordered_times(workers: int, edges: list[Update]) -> None:
    """At Product times (incomparable pairs, ties between atoms) every time is right."""

    def query(e: df.Collection) -> df.Collection:
        return df.multiway_join(("a", "b", "c"), (e, ("a", "b")), (e, ("b", "c")), (e, ("a", "c")))

    seen = run_in_loop(query, workers, e=edges)
    assert_matches_oracle(seen, {"e": edges}, lambda c: natural_join(("a", "b", "c"), TRIANGLE, c))


# -- inside iterate ---------------------------------------------------------------------------


def closure(edges: Counter[Any]) -> Counter[Any]:
    """Pairs ``(a, c)`` joined by a path (edges with positive counts), each once."""
    live = {e for e, n in edges.items() if n > 0}
    reach = set(live)
    while True:
        more = {(a, d) for a, b in reach for c, d in live if b == c} - reach
        if not more:
            return Counter(dict.fromkeys(reach, 1))
        reach |= more


@pytest.mark.parametrize("workers", WORKERS)
@examples(20)
@given(
    edges=st.lists(
        st.tuples(st.tuples(nodes, nodes), times, st.sampled_from([1, 1, -1])), max_size=15
    ).map(nonnegative)
)
def test_transitive_closure_with_a_multiway_step(workers: int, edges: list[Update]) -> None:
    """A loop whose step is a multiway join (product times, a recursive atom) reaches the
    transitive closure at every time."""
    out = collect(pipeline_of(multiway_closure), workers=workers, e=edges)
    assert_matches_oracle(out, {"e": edges}, lambda c: closure(c["e"]))


@examples(4)
@given(
    edges=st.lists(
        st.tuples(st.tuples(nodes, nodes), times, st.sampled_from([1, 1, -1])),
        min_size=1,
        max_size=15,
    ).map(nonnegative)
)
def test_transitive_closure_with_a_multiway_step_on_two_processes(edges: list[Update]) -> None:
    """The same loop on two processes (the join's held-back results and the rounds cross
    the mesh) reaches the oracle's closure at every time, with no negative count refused."""
    out = collect(pipeline_of(multiway_closure), workers=2, processes=2, e=edges)
    assert_matches_oracle(out, {"e": edges}, lambda c: closure(c["e"]))


# -- errors -----------------------------------------------------------------------------------


def test_bad_heads_and_atoms_are_named() -> None:
    """An empty head, a head variable in no atom, malformed atoms: clear errors."""

    def build_with(head: Any, *atoms: Any) -> Callable[[df.Collection], df.Collection]:
        return lambda e: df.multiway_join(
            head, *[(e, a) if isinstance(a, tuple) else a for a in atoms]
        )

    with pytest.raises(ValueError, match="head is empty"):
        collect(pipeline_of(build_with((), ("a", "b"))), e=[])
    with pytest.raises(ValueError, match="head variable 'z' appears in no atom"):
        collect(pipeline_of(build_with(("a", "z"), ("a", "b"))), e=[])
    with pytest.raises(TypeError, match="atom 0 must be a \\(collection, variables\\) pair"):
        collect(pipeline_of(build_with("a", "junk")), e=[])
    with pytest.raises(TypeError, match="variable name"):
        collect(pipeline_of(build_with("a", ("a", 3))), e=[])
    with pytest.raises(
        df.OperatorError, match=r"atom 1 \('b', 'c'\) holds tuples of 2 values, got \(1, 2, 3\)"
    ):
        collect(pipeline_of(build_with(("a", "c"), ("a", "b"), ("b", "c"))), e=[((1, 2, 3), 0, 1)])


# -- the worst-case bound, and shared arrangements ----------------------------------------------


def star_statistics(k: int) -> dict[str, Any]:
    """Triangles over a star whose hub gains ``k`` edges, one round each: the job's
    statistics."""

    async def main() -> dict[str, Any]:
        pipe = pipeline_of(
            lambda e: df.multiway_join(
                ("a", "b", "c"), (e, ("a", "b")), (e, ("b", "c")), (e, ("a", "c"))
            )
        )
        async with df.open(pipe) as job:
            for x in range(1, k + 1):
                job.inputs["e"].insert((0, x))
                await job.advance_to(x)
            stats = job.statistics()
        return stats

    return trio.run(main)


def test_proposals_grow_linearly_on_a_hub() -> None:
    """A hub gaining k edges one round at a time: proposals grow linearly, not as k^2."""
    small, large = star_statistics(500), star_statistics(2000)
    assert small["proposals"] > 0
    assert large["proposals"] <= 4.4 * small["proposals"]


def test_three_uses_of_edges_indexed_two_ways_are_two_arrangements() -> None:
    """Triangles read edges by source and by destination: two arrangements, not six."""
    stats = star_statistics(3)
    assert stats["arrangements"] == 2


# -- the pieces: half_join, prefix extenders ----------------------------------------------------

pair_lists = updates_of(st.tuples(st.integers(0, 2), st.integers(0, 3)))


def lookups(
    prefixes: list[Update], index: list[Update], key: Callable[[Any], Any], strict: bool
) -> dict[Any, list[tuple[Any, Any, int]]]:
    """Per prefix update, the index updates of its key that it meets: times before it
    (``strict``) or not after it, in the total order."""
    out: dict[Any, list[tuple[Any, Any, int]]] = {}
    for n, (p, t1, _) in enumerate(prefixes):
        out[n] = [
            (v, t2, r2)
            for (k, v), t2, r2 in index
            if k == key(p) and (t2 < t1 or (not strict and t2 == t1))
        ]
    return out


def consolidated(ups: list[Update]) -> list[Update]:
    """Updates summed per ``(data, time)``, zeros dropped, sorted."""
    sums: Counter[Any] = Counter()
    for d, t, r in ups:
        sums[(d, t)] += r
    return sorted(((d, t, r) for (d, t), r in sums.items() if r), key=repr)


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("strict", [False, True])
@examples(30)
@given(a=pair_lists, b=pair_lists)
def test_half_join_meets_earlier_updates(
    workers: int, strict: bool, a: list[Update], b: list[Update]
) -> None:
    """Each update of ``a`` meets the updates of ``b`` before it (strict) or not after it."""
    out = collect(
        pipeline_of(lambda a, b: a.half_join(b, strict=strict)), workers=workers, a=a, b=b
    )
    met = lookups(a, b, lambda p: p[0], strict)
    expected = [
        ((k, (x, v)), max(t1, t2), r1 * r2)
        for n, ((k, x), t1, r1) in enumerate(a)
        for v, t2, r2 in met[n]
    ]
    assert consolidated(out) == consolidated(expected)


@pytest.mark.parametrize("workers", WORKERS)
@examples(30)
@given(
    a=st.lists(st.tuples(st.tuples(nodes, nodes), product_times, diffs), max_size=15),
    b=st.lists(st.tuples(st.tuples(nodes, nodes), product_times, diffs), max_size=15),
)
def test_two_half_joins_make_a_join_at_product_times(
    workers: int, a: list[Update], b: list[Update]
) -> None:
    """``a.half_join(b)`` plus ``b.half_join(a, strict=True)`` is ``a.join(b)`` at every
    product time (the total order's tie-break counts simultaneous updates once)."""

    def query(a: df.Collection, b: df.Collection) -> df.Collection:
        flip = b.half_join(a, strict=True).map(lambda kv: (kv[0], (kv[1][1], kv[1][0])))
        return a.half_join(b).concat(flip)

    seen = run_in_loop(query, workers, a=a, b=b)

    def join(c: dict[str, Counter[Any]]) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for (k, x), n in c["a"].items():
            for (k2, y), m in c["b"].items():
                if k == k2:
                    out[(k, (x, y))] += n * m
        return out

    assert_matches_oracle(seen, {"a": a, "b": b}, join)


@pytest.mark.parametrize("workers", WORKERS)
@examples(30)
@given(ps=updates_of(nodes, 15), e=pair_lists, f=pair_lists)
def test_prefix_extenders_count_propose_validate_extend(
    workers: int, ps: list[Update], e: list[Update], f: list[Update]
) -> None:
    """count, propose, validate and extend look the index up as of each prefix's time;
    ``extend`` (worst-case optimal) equals propose by one and validate by the other."""

    def build(ps: df.Collection, e: df.Collection, f: df.Collection) -> dict[str, df.Collection]:
        by_e = e.index_by_key().extend_using(lambda p: p)
        by_f = f.index_by_key().extend_using(lambda p: p, strict=True)
        return {
            "count": by_e.count(ps),
            "propose": by_e.propose(ps),
            "validated": by_f.validate(by_e.propose(ps)),
            "extend": ps.extend(by_e, by_f),
        }

    out = collect(pipeline_of(build), workers=workers, ps=ps, e=e, f=f)
    met_e = lookups(ps, e, lambda p: p, False)
    met_f = lookups(ps, f, lambda p: p, True)
    proposed = [
        ((p, v), max(t1, t2), r1 * r2) for n, (p, t1, r1) in enumerate(ps) for v, t2, r2 in met_e[n]
    ]
    assert consolidated(out["propose"]) == consolidated(proposed)
    both = [
        ((p, v), max(t1, t2, t3), r1 * r2 * r3)
        for n, (p, t1, r1) in enumerate(ps)
        for v, t2, r2 in met_e[n]
        for w, t3, r3 in met_f[n]
        if v == w
    ]
    assert consolidated(out["validated"]) == consolidated(both)
    assert consolidated(out["extend"]) == consolidated(both)
    # A count is at most the updates met, at least the values with a non-zero sum.
    for (p, n), t, r in out["count"]:
        assert r != 0
        met = next(met_e[i] for i, (q, t1, _) in enumerate(ps) if q == p and t1 == t)
        sums: Counter[Any] = Counter()
        for v, _, r2 in met:
            sums[v] += r2
        assert sum(1 for s in sums.values() if s) <= n <= len(met)


def test_extenders_reject_bad_arguments() -> None:
    """Errors name the piece and the value."""
    with pytest.raises(TypeError, match="extend: expected PrefixExtender"):
        collect(pipeline_of(lambda ps: ps.extend("nope")), ps=[])
    with pytest.raises(ValueError, match="at least one PrefixExtender"):
        collect(pipeline_of(lambda ps: ps.extend()), ps=[])
    with pytest.raises(TypeError, match="extend_using: key must take 1 argument"):
        collect(
            pipeline_of(lambda ps, e: ps.extend(e.index_by_key().extend_using(lambda a, b: a))),
            ps=[],
            e=[],
        )
    with pytest.raises(df.OperatorError, match="half_join: expected \\(key, value\\) pairs, got 5"):
        collect(pipeline_of(lambda a, b: a.half_join(b)), a=[(5, 0, 1)], b=[])


@pytest.mark.parametrize("workers", [1, 2])
@examples(15)
@given(edges=hub_graphs())
def test_records_go_through_in_small_chunks(
    workers: int, edges: list[Update], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records split into chunks and activations (a hub's proposals are never all held)
    give the same answer."""
    from deltaflow.operators.delta import rule

    monkeypatch.setattr(rule.RuleOperator, "CHUNK", 2)
    monkeypatch.setattr(rule.RuleOperator, "BUDGET", 3)
    check_query(("a", "b", "c"), TRIANGLE, workers, e=edges)


@pytest.mark.parametrize("workers", [1, 2])
@examples(20)
@given(edges=edge_lists)
def test_compacted_indexes_give_the_same_answers(
    workers: int, edges: list[Update], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indexes that compact their history all the time still answer every lookup right."""
    from deltaflow.operators.delta import index

    monkeypatch.setattr(index.IndexStore, "COMPACT_ABOVE", 1)
    check_query(("a", "b", "c"), TRIANGLE, workers, e=edges)
    check_query(("a", "c"), [("e", ("a", "b")), ("e", ("b", "c"))], workers, e=edges)


def test_churn_leaves_indexes_bounded() -> None:
    """Edges inserted and retracted round after round: the indexes keep about the live ones."""
    from deltaflow.operators.delta.index import IndexOperator

    async def main() -> int:
        pipe = pipeline_of(
            lambda e: df.multiway_join(
                ("a", "b", "c"), (e, ("a", "b")), (e, ("b", "c")), (e, ("a", "c"))
            )
        )
        async with df.open(pipe) as job:
            edges = job.inputs["e"]
            for t in range(1, 5001):
                edges.insert((t % 7, t % 5))
                if t > 10:
                    edges.remove(((t - 10) % 7, (t - 10) % 5))
                await job.advance_to(t)
            return sum(
                a.operator.store.size
                for w in job.workers
                for a in w.actors
                if isinstance(a.operator, IndexOperator)
            )

    held = trio.run(main)
    # Two indexes of 9,990 updates each, compacted whenever one passes 4,096.
    assert held <= 2 * 4097


def test_an_index_of_a_set_leaves_the_collectors_tracking() -> None:
    """A value with one update holds a bare ``(time, diff)`` pair, which a collection stops
    tracking: full collections do not walk the index entry by entry. A second update makes
    it a list, and lookups read both alike."""
    import gc

    from deltaflow.operators.delta.index import IndexStore, updates_of

    store = IndexStore()
    store.insert([("a", v) for v in range(100)], [1] * 100, [1] * 100, lambda d: d)
    rows = store.keys["a"]
    gc.collect()
    assert rows.plain
    assert not any(gc.is_tracked(h) for h in rows.by_val.values())
    store.insert([("a", 5)], [2], [-1], lambda d: d)
    assert not rows.plain
    assert updates_of(rows.by_val[5]) == [(1, 1), (2, -1)]
    assert updates_of(rows.by_val[6]) == ((1, 1),)


def test_compaction_leaves_plain_rows_and_sums_the_others() -> None:
    """A plain row (diffs of 1, no value twice) has nothing to sum away and is left as it
    is; a row with a retraction drops the value it cancels."""
    from deltaflow.operators.delta.index import KeyRows

    plain = KeyRows()
    for t, v in enumerate("xyz", start=1):
        plain.add(v, t, 1)
    assert plain.advance(3) == 0
    assert (plain.times, plain.vals) == ([1, 2, 3], ["x", "y", "z"])
    churned = KeyRows()
    churned.add("x", 1, 1)
    churned.add("y", 2, 1)
    churned.add("x", 3, -1)
    assert churned.advance(3) == 2
    assert (churned.times, churned.vals, churned.diffs) == ([3], ["y"], [1])
    assert churned.plain and churned.by_val == {"y": (3, 1)}


rows_updates = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(0, 4),
        st.integers(0, 6),
        st.sampled_from([1, 1, 1, 2, -1]),
    ),
    max_size=25,
)


@examples(200)
@given(
    left=rows_updates,
    right=rows_updates,
    t=st.integers(0, 7),
    strict=st.tuples(st.booleans(), st.booleans()),
    plain=st.booleans(),
)
def test_two_candidates_intersect_as_any_number_do(
    left: list[tuple[int, int, int, int]],
    right: list[tuple[int, int, int, int]],
    t: int,
    strict: tuple[bool, bool],
    plain: bool,
) -> None:
    """The two-candidate intersection (C-level lookups of a chunk, a plain proposer checked
    inline) gives what the general one gives: same records, diffs and proposals."""
    from operator import itemgetter

    from deltaflow.framework.time_domain import domain_for_depth
    from deltaflow.operators.delta.index import IndexStore
    from deltaflow.operators.delta.lookup import Tally, _intersect_any, _intersect_two

    stores = []
    for ups in (left, right):
        if plain:  # a set that only grew: every diff 1, no value twice
            ups = list({(k, v): (k, v, t2, 1) for k, v, t2, _ in ups}.values())
        store = IndexStore()
        for k, v, t2, r in sorted(ups, key=itemgetter(2)):
            store.insert([(k, v)], [t2], [r], lambda d: d)
        stores.append(store)
    parts = [(s.keys, itemgetter(i), st_) for i, (s, st_) in enumerate(zip(stores, strict))]
    recs = [((a, b), t, 0, 0) for a in range(4) for b in range(4)]
    diffs = [1 + (a % 2) for a in range(len(recs))]
    tallies = Tally(), Tally()

    def combine(p: Any, v: Any) -> Any:
        return (*p, v)

    got = _intersect_two(parts, combine, tallies[0])(recs, diffs, t)
    want = _intersect_any(parts, combine, tallies[1], domain_for_depth(0))(recs, diffs, t)
    assert Counter(zip(*got)) == Counter(zip(*want))
    assert tallies[0].proposals == tallies[1].proposals
