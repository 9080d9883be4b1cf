"""Linear operators against the from-scratch oracle, on one worker and on two.

Every test feeds hypothesis-generated histories (many times in ``0..20``, duplicates,
retractions, negative counts) through a small pipeline and compares the accumulated output
collection with the oracle of ``tests/reference.py`` at every time of the join closure of the
input and output times. Operators whose output times depend on the data (``join_function``,
``temporal_filter``) are checked against a time-aware model at those times plus the times the
logic produces.

The last tests run the same operators on ``Product`` times inside an ``iterate`` scope; they
are skipped until ``Collection.iterate`` exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.jobs import pipeline_of
from tests.reference import assert_matches_oracle, inputs_at, interesting_times_for_check

import deltaflow as df
from deltaflow.framework.lattice import Product, Time, join, join_closure, less_equal, sort_key
from deltaflow.testing import accumulate, assert_collections_equal, collect, example

Update = tuple[Any, Time, int]
MAX_TIME = 20

FAST = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# -- helpers ------------------------------------------------------------------------------------


def run_checked(build: Callable[..., Any], workers: int, **inputs: list[Update]) -> Any:
    """``df.run`` the pipeline, asserting its output contract: per-time consolidated, sorted."""
    out = df.run(pipeline_of(build), workers=workers, **inputs)
    for ups in out.values() if isinstance(out, dict) else [out]:
        keys = [(d, t) for d, t, _ in ups]
        assert len(keys) == len(set(keys)), f"df.run output not consolidated: {ups}"
        assert all(r != 0 for _, _, r in ups), f"df.run output has zero diffs: {ups}"
        times = [sort_key(t) for _, t, _ in ups]
        assert times == sorted(times), f"df.run output not sorted by time: {ups}"
    return out


def lifted(fn: Callable[[Any], Iterable[tuple[Any, int]]], name: str = "xs") -> Any:
    """The oracle query of a linear map: each datum ``d`` with count ``n`` contributes ``n * m``
    to every ``(d2, m)`` of ``fn(d)``."""

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for d, n in c[name].items():
            for d2, m in fn(d):
                out[d2] += n * m
        return out

    return query


def assert_matches_timed_model(
    actual: list[Update],
    inputs: dict[str, list[Update]],
    model: Callable[[dict[str, Counter[Any]], Time], Counter[Any]],
    extra_times: Iterable[Time] = (),
) -> None:
    """Compare ``actual`` with ``model(inputs at u, u)`` at every time ``u`` that matters.

    For operators whose output times depend on the data: the times are the join closure of the
    input, output and ``extra_times`` (the times the logic produces), plus the least time.
    """
    extra = [(None, t, 1) for t in extra_times]
    check = interesting_times_for_check(inputs, actual, extra) | {0}
    for u in sorted(check, key=sort_key):
        want = {d: n for d, n in model(inputs_at(inputs, u), u).items() if n}
        got = accumulate(actual, u)
        assert got == want, f"at time {u!r}: expected {want}, got {got}"


def consolidated(ups: Iterable[Update]) -> dict[tuple[Any, Time], int]:
    """``{(data, time): summed diff}`` without zeros."""
    acc: Counter[tuple[Any, Time]] = Counter()
    for d, t, r in ups:
        acc[(d, t)] += r
    return {k: r for k, r in acc.items() if r}


# -- strategies ---------------------------------------------------------------------------------


@st.composite
def histories(
    draw: st.DrawFn,
    data: st.SearchStrategy[Any] | None = None,
    *,
    max_size: int = 20,
) -> list[Update]:
    """Update histories over times ``0..20``: signed counts, exact duplicates, and
    retractions of earlier updates at a later (or the same) time, in a shuffled order."""
    data = data if data is not None else st.integers(0, 6)
    times = st.integers(0, MAX_TIME)
    counts = st.integers(-3, 3).filter(bool)
    base = draw(st.lists(st.tuples(data, times, counts), max_size=max_size))
    extra: list[Update] = []
    for d, t, r in base:
        kind = draw(st.sampled_from(["keep", "keep", "duplicate", "retract"]))
        if kind == "duplicate":
            extra.append((d, t, r))
        elif kind == "retract":
            extra.append((d, draw(st.integers(t, MAX_TIME)), -r))
    return draw(st.permutations(base + extra))


MAPS: list[Callable[[int], Any]] = [
    lambda x: x % 3,
    lambda x: (x % 2, "k"),
    lambda x: str(x),
    lambda x: 0,
]
PREDICATES: list[Callable[[int], Any]] = [
    lambda x: x % 2 == 0,
    lambda x: x > 3,
    lambda x: True,
    lambda x: False,
    lambda x: x % 3,  # truthy ints, not bools
]
FLAT_MAPS: list[Callable[[int], Iterable[Any]]] = [
    lambda x: range(x % 3),
    lambda x: [x, x],
    lambda x: (x % 2, x // 2, "s"),
    lambda x: [],
    lambda x: (y for y in range(x % 2, 3)),  # a generator
]
EXPLODES: list[Callable[[int], Iterable[tuple[Any, int]]]] = [
    lambda x: [(x % 3, 2)],
    lambda x: [(x, -1)],
    lambda x: [(x, 1), (x + 1, x % 3 - 1)],  # a zero multiplier too
    lambda x: [("const", x)],
    lambda x: ((y, -y) for y in range(x % 3)),  # a generator
]


# -- the linear operators -----------------------------------------------------------------------


def each(
    make: Callable[[df.Collection, Any], df.Collection], fns: list[Any]
) -> Callable[[df.Collection], dict[str, df.Collection]]:
    """A build applying ``make(xs, fn)`` for every ``fn``: one named output per function."""
    return lambda xs: {f"f{i}": make(xs, fn) for i, fn in enumerate(fns)}


def lifted_each(fns: list[Any], per_datum: Callable[[Any, Any], Iterable[tuple[Any, int]]]) -> Any:
    """The oracle of :func:`each`: output ``f{i}`` is :func:`lifted` of ``per_datum(fn_i, d)``."""
    queries = {f"f{i}": lifted(lambda d, fn=fn: per_datum(fn, d)) for i, fn in enumerate(fns)}
    return lambda c: {name: q(c) for name, q in queries.items()}


@FAST
@given(xs=histories())
def test_map(workers: int, xs: list[Update]) -> None:
    """map applies fn to every datum; counts of data mapped together add up."""
    out = run_checked(each(lambda c, fn: c.map(fn), MAPS), workers, xs=xs)
    assert_matches_oracle(out, {"xs": xs}, lifted_each(MAPS, lambda fn, d: [(fn(d), 1)]))


@FAST
@given(xs=histories())
def test_filter(workers: int, xs: list[Update]) -> None:
    """filter keeps exactly the data whose predicate is truthy, with their counts."""
    out = run_checked(each(lambda c, p: c.filter(p), PREDICATES), workers, xs=xs)
    query = lifted_each(PREDICATES, lambda p, d: [(d, 1)] if p(d) else [])
    assert_matches_oracle(out, {"xs": xs}, query)


@FAST
@given(xs=histories())
def test_flat_map(workers: int, xs: list[Update]) -> None:
    """flat_map gives every element of fn(d) the count of d (repeats add up)."""
    out = run_checked(each(lambda c, fn: c.flat_map(fn), FLAT_MAPS), workers, xs=xs)
    query = lifted_each(FLAT_MAPS, lambda fn, d: [(x, 1) for x in fn(d)])
    assert_matches_oracle(out, {"xs": xs}, query)


@FAST
@given(xs=histories())
def test_explode(workers: int, xs: list[Update]) -> None:
    """explode multiplies each datum's count by the diff of every (d2, diff2) it yields."""
    out = run_checked(each(lambda c, fn: c.explode(fn), EXPLODES), workers, xs=xs)
    assert_matches_oracle(out, {"xs": xs}, lifted_each(EXPLODES, lambda fn, d: fn(d)))


@FAST
@given(xs=histories())
def test_negate(workers: int, xs: list[Update]) -> None:
    """negate flips every count; concatenated with the original it cancels to nothing."""
    out = run_checked(
        lambda xs: {"neg": xs.negate(), "zero": xs.concat(xs.negate())}, workers, xs=xs
    )
    assert out["zero"] == []
    assert_matches_oracle(out["neg"], {"xs": xs}, lifted(lambda d: [(d, -1)]))


@FAST
@given(xs=histories(), ys=histories(st.integers(4, 9)), zs=histories(st.sampled_from("abc")))
def test_concat(workers: int, xs: list[Update], ys: list[Update], zs: list[Update]) -> None:
    """concat of two and of three inputs is the multiset sum of the inputs at every time."""
    out = run_checked(
        lambda xs, ys, zs: {"two": xs.concat(ys), "three": xs.concat(ys, zs)},
        workers,
        xs=xs,
        ys=ys,
        zs=zs,
    )
    inputs = {"xs": xs, "ys": ys, "zs": zs}

    def query(c: dict[str, Counter[Any]]) -> dict[str, Counter[Any]]:
        two: Counter[Any] = Counter()
        for name in ("xs", "ys"):
            for d, n in c[name].items():
                two[d] += n
        three = Counter(two)
        for d, n in c["zs"].items():
            three[d] += n
        return {"two": two, "three": three}

    assert_matches_oracle(out, inputs, query)


@FAST
@given(xs=histories(), fn=st.sampled_from(MAPS))
def test_inspect(workers: int, xs: list[Update], fn: Callable[[int], Any]) -> None:
    """inspect calls fn((data, time, diff)) for every update passing by and changes nothing."""
    seen_in: list[Update] = []
    seen_mapped: list[Update] = []
    out = run_checked(
        lambda xs: xs.inspect(seen_in.append).map(fn).inspect(seen_mapped.append), workers, xs=xs
    )
    assert_matches_oracle(out, {"xs": xs}, lifted(lambda d: [(fn(d), 1)]))
    assert all(isinstance(u, tuple) and len(u) == 3 for u in seen_in + seen_mapped)
    assert all(t.__class__ is int and r.__class__ is int for _, t, r in seen_in + seen_mapped)
    # The updates it saw add up to the updates fed, (data, time) by (data, time).
    assert consolidated(seen_in) == consolidated(xs)
    assert consolidated(seen_mapped) == consolidated((fn(d), t, r) for d, t, r in xs)


@FAST
@given(xs=histories())
def test_consolidate(workers: int, xs: list[Update]) -> None:
    """consolidate emits each (data, time) at most once, never a zero diff, same collection."""
    seen: list[Update] = []
    out = run_checked(lambda xs: xs.consolidate().inspect(seen.append), workers, xs=xs)
    keys = [(d, t) for d, t, _ in seen]
    assert len(keys) == len(set(keys)), f"consolidate emitted a (data, time) twice: {seen}"
    assert all(r != 0 for _, _, r in seen), f"consolidate emitted a zero diff: {seen}"
    assert consolidated(seen) == consolidated(xs)
    assert_collections_equal(seen, xs)
    assert_matches_oracle(out, {"xs": xs}, lifted(lambda d: [(d, 1)]))


@FAST
@given(xs=histories(), key=st.sampled_from([None, lambda d: d % 2, lambda d: 0]))
def test_exchange(workers: int, xs: list[Update], key: Callable[[int], Any] | None) -> None:
    """exchange (by the datum or by a key) only moves updates: the collection is unchanged."""
    seen: list[Update] = []
    out = run_checked(
        lambda xs: xs.exchange(key).inspect(seen.append).map(lambda d: d * 10), workers, xs=xs
    )
    assert consolidated(seen) == consolidated(xs)
    assert_matches_oracle(out, {"xs": xs}, lifted(lambda d: [(d * 10, 1)]))


def _join_logic(d: int) -> list[tuple[Any, int, int]]:
    """Three results per datum: now, at a data-dependent later time, and (for odd d) never."""
    out: list[tuple[Any, int, int]] = [(d % 3, 0, 1), (("late", d), (d * 7) % (MAX_TIME + 3), -2)]
    if d % 2:
        out.append((d, d + 5, 3))
    return out


@FAST
@given(xs=histories())
def test_join_function(workers: int, xs: list[Update]) -> None:
    """join_function puts (d2, join(t, t2), r * r2) in the output for every (d2, t2, r2)."""
    out = run_checked(lambda xs: xs.join_function(_join_logic), workers, xs=xs)

    def model(c: dict[str, Counter[Any]], u: Time) -> Counter[Any]:
        res: Counter[Any] = Counter()
        for d, n in c["xs"].items():
            for d2, t2, r2 in _join_logic(d):
                if less_equal(t2, u):
                    res[d2] += n * r2
        return res

    logic_times = [t2 for d in range(7) for _, t2, _ in _join_logic(d)]
    assert_matches_timed_model(out, {"xs": xs}, model, logic_times)
    # The same, as an update list: every output update moved to join(t, t2).
    expected = [(d2, join(t, t2), r * r2) for d, t, r in xs for d2, t2, r2 in _join_logic(d)]
    assert_collections_equal(out, expected)


bounds = st.one_of(st.none(), st.integers(0, MAX_TIME + 2))


@FAST
@given(xs=histories(st.tuples(st.integers(0, 2), bounds, bounds)))
def test_temporal_filter(workers: int, xs: list[Update]) -> None:
    """temporal_filter keeps a present datum exactly during [lower, upper), never if empty."""
    out = run_checked(lambda xs: xs.temporal_filter(lambda d: d[1], lambda d: d[2]), workers, xs=xs)

    def visible(d: tuple[int, int | None, int | None], u: int) -> bool:
        lo, hi = d[1], d[2]
        return lo is not None and lo <= u and (hi is None or u < hi)

    def model(c: dict[str, Counter[Any]], u: Time) -> Counter[Any]:
        return Counter({d: n for d, n in c["xs"].items() if visible(d, u)})  # type: ignore[arg-type]

    bound_times = [b for d, _, _ in xs for b in d[1:] if b is not None]
    assert_matches_timed_model(out, {"xs": xs}, model, bound_times)


def test_temporal_filter_examples() -> None:
    """Hand-checked windows: late arrival, empty window, open end, retraction inside it."""
    xs = [
        (("a", 2, 5), 0, 1),  # present 2..4
        (("b", 2, 5), 3, 1),  # arrives late: present 3..4
        (("c", 4, 4), 0, 1),  # empty window
        (("d", 6, None), 0, 2),  # from 6 on, twice
        (("e", 1, 9), 0, 1),  # retracted at 3
        (("e", 1, 9), 3, -1),
        (("f", None, 9), 0, 1),  # no lower bound: never
    ]
    out = run_checked(lambda xs: xs.temporal_filter(lambda d: d[1], lambda d: d[2]), 1, xs=xs)
    assert out == [
        (("e", 1, 9), 1, 1),
        (("a", 2, 5), 2, 1),
        (("b", 2, 5), 3, 1),
        (("e", 1, 9), 3, -1),
        (("a", 2, 5), 5, -1),
        (("b", 2, 5), 5, -1),
        (("d", 6, None), 6, 2),
    ]


@FAST
@given(xs=histories(), ys=histories(st.integers(3, 9)))
def test_composition(workers: int, xs: list[Update], ys: list[Update]) -> None:
    """A pipeline mixing every linear operator computes the composition of their oracles."""

    def build(xs: df.Collection, ys: df.Collection) -> df.Collection:
        left = xs.map(lambda d: d + 1).flat_map(lambda d: [d, d * 2]).filter(lambda d: d % 3)
        right = ys.explode(lambda d: [(d, 2)]).negate().exchange()
        return left.concat(right).consolidate().map(lambda d: d % 5)

    out = run_checked(build, workers, xs=xs, ys=ys)

    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        res: Counter[Any] = Counter()
        for d, n in c["xs"].items():
            for e in (d + 1, (d + 1) * 2):
                if e % 3:
                    res[e % 5] += n
        for d, n in c["ys"].items():
            res[d % 5] -= 2 * n
        return res

    assert_matches_oracle(out, {"xs": xs, "ys": ys}, query)


# -- the testing helpers ------------------------------------------------------------------------


@FAST
@given(xs=histories(), ys=histories())
def test_collect_is_canonical(workers: int, xs: list[Update], ys: list[Update]) -> None:
    """collect gives df.run's updates consolidated and sorted; dict outputs give dicts."""

    class Both(df.Pipeline):
        def build(self, xs: df.Collection, ys: df.Collection) -> dict[str, df.Collection]:
            return {"sum": xs.concat(ys), "half": xs.map(lambda d: d // 2)}

    got = collect(Both(), workers=workers, xs=xs, ys=ys)
    assert set(got) == {"sum", "half"}
    for name, ups in got.items():
        assert consolidated(ups) == {(d, t): r for d, t, r in ups}
        assert ups == sorted(ups, key=lambda u: (sort_key(u[1]), u[0]))
        plain = df.run(Both(), workers=workers, xs=xs, ys=ys)[name]
        assert consolidated(ups) == consolidated(plain)
    assert consolidated(got["sum"]) == consolidated(xs + ys)


def test_collect_single_output_and_errors() -> None:
    """collect of a one-output pipeline is a list; bad inputs raise as df.run does."""

    class Id(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs

    mixed = [("b", 1, 1), (2, 1, 1), ("b", 1, 1), (2, 0, -1), ("a", 1, 1), ("a", 1, -1)]
    assert collect(Id(), xs=mixed) == [(2, 0, -1), (2, 1, 1), ("b", 1, 2)]
    with pytest.raises(TypeError, match="'xs'"):
        collect(Id(), xs=[("a", 0, 1.5)])


def test_example_names_inputs_after_parameters() -> None:
    """example runs a bare build function; its parameter names are the input names."""

    def build(left: df.Collection, right: df.Collection) -> df.Collection:
        return left.concat(right.negate())

    assert example(build, left=[(1, 0, 1), (2, 1, 1)], right=[(1, 2, 1)]) == [
        (1, 0, 1),
        (2, 1, 1),
        (1, 2, -1),
    ]
    assert example(lambda xs: {"n": xs.negate()}, xs=[(3, 0, 1)]) == {"n": [(3, 0, -1)]}
    with pytest.raises(TypeError, match="unknown input"):
        example(build, middle=[])


# -- Product times, inside an iteration scope ----------------------------------------------------

needs_iterate = pytest.mark.skipif(
    not hasattr(df.Collection, "iterate"), reason="Collection.iterate is not available yet"
)


def _halve(d: int) -> int:
    return d // 2


def _alive(d: int) -> bool:
    return d > 0


def _round_model(start: Counter[Any], ys: Counter[Any], rounds: int) -> list[Counter[Any]]:
    """``v_0 = start``, ``v_{i+1} = filter(alive, halve(v_i)) + ys``: each round's collection."""
    out = [Counter({d: n for d, n in start.items() if n})]
    for _ in range(rounds):
        nxt: Counter[Any] = Counter()
        for d, n in out[-1].items():
            h = _halve(d)
            if _alive(h):
                nxt[h] += n
        for d, n in ys.items():
            nxt[d] += n
        out.append(Counter({d: n for d, n in nxt.items() if n}))
    return out


@needs_iterate
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    xs=histories(st.integers(0, 20), max_size=8),
    ys=histories(st.integers(0, 20), max_size=6),
)
def test_linear_operators_on_product_times(
    workers: int, xs: list[Update], ys: list[Update]
) -> None:
    """Inside iterate, linear operators are correct at every Product(t, round) time."""
    rounds = 8  # data <= 20 halve to 0 within 5 rounds; then v stays = ys + its halvings
    inner_seen: list[Update] = []

    def build(xs: df.Collection, ys: df.Collection) -> df.Collection:
        def step(v: df.Collection) -> df.Collection:
            halved = (
                v.map(_halve)
                .flat_map(lambda d: [d])
                .explode(lambda d: [(d, -1)])
                .negate()
                .join_function(lambda d: [(d, Product(0, 0), 1)])
                .inspect(inner_seen.append)
            )
            return halved.filter(_alive).concat(ys).consolidate()

        return xs.iterate(step)

    out = run_checked(build, workers, xs=xs, ys=ys)

    # Inside the scope: the inspected stream at Product(t, i) is halve(v_i at outer time t).
    assert all(t.__class__ is Product and t.outer.__class__ is int for _, t, _ in inner_seen)
    outer = join_closure([t for _, t, _ in xs + ys] + [t.outer for _, t, _ in inner_seen]) | {0}
    last_round = max([rounds + 2] + [t.inner for _, t, _ in inner_seen])
    for t in sorted(outer):
        x_t = Counter(accumulate(xs, t))
        y_t = Counter(accumulate(ys, t))
        per_round = _round_model(x_t, y_t, last_round)
        for i, v in enumerate(per_round):
            want: Counter[Any] = Counter()
            for d, n in v.items():
                want[_halve(d)] += n
            want_clean = {d: n for d, n in want.items() if n}
            got = accumulate(inner_seen, Product(t, i))
            assert got == want_clean, f"at Product({t}, {i}): expected {want_clean}, got {got}"

    def fixed_point(c: dict[str, Counter[Any]]) -> Counter[Any]:
        per_round = _round_model(c["xs"], c["ys"], rounds + 2)
        assert per_round[-1] == per_round[-2], "the model did not converge"
        return per_round[-1]

    assert_matches_oracle(out, {"xs": xs, "ys": ys}, fixed_point)


@pytest.mark.parametrize(
    ("build", "operator", "message"),
    [
        (lambda a: a.explode(lambda d: [(d, 0.5)]), "explode(", r"gave diff 0\.5 .*diffs are ints"),
        (lambda a: a.explode(lambda d: [d]), "explode(", r"gave diff 'y' for 'x'"),
        (
            lambda a: a.join_function(lambda d: [(d, 1, 1.5)]),
            "join_function(",
            r"gave \('xy', 1, 1\.5\); diffs are ints",
        ),
        (
            lambda a: a.join_function(lambda d: [(d, 1.5, 1)]),
            "join_function(",
            r"gave \('xy', 1\.5, 1\); times here are ints",
        ),
        (
            lambda a: a.temporal_filter(lambda d: 1.5, lambda d: 3.5),
            "temporal_filter(",
            r"times here are ints",
        ),
        (
            lambda a: a.iterate(lambda x: x.temporal_filter(lambda d: 1, lambda d: 3).distinct()),
            "temporal_filter(",
            r"times here are Products",
        ),
    ],
)
def test_bad_diffs_and_times_from_user_functions_name_the_step(
    build: Any, operator: str, message: str, workers: int
) -> None:
    """Diffs are ints and times are the scope's: a function that gives anything else stops
    the job naming its own step, on any worker count (not a later operator, not silently)."""
    with pytest.raises(df.OperatorError, match=message) as info:
        df.run(pipeline_of(build), workers=workers, a=[("xy", 0, 2)])
    assert info.value.operator.startswith(operator)
    assert isinstance(info.value.__cause__, TypeError)


def test_an_exchange_key_runs_on_one_worker_too(workers: int) -> None:
    """A key that fails fails on any worker count, named as the exchange (on one worker
    nothing is routed, so the exchange calls the key itself)."""
    feed = [((5, 1), 0, 1)]
    with pytest.raises(df.OperatorError, match="IndexError") as info:
        df.run(pipeline_of(lambda a: a.exchange(lambda d: d[5])), workers=workers, a=feed)
    assert info.value.operator.startswith("exchange(")
    keyed = pipeline_of(lambda a: a.exchange(lambda d: d[0]))
    assert df.run(keyed, workers=workers, a=feed) == feed
