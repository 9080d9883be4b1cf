"""The counting reductions' numpy kernels at int times against their per-key path.

Each test runs ``count``, ``distinct`` and ``threshold`` with the kernels forced on
(``always``), off (``never``), or switched at random from one activation to the next (the two
paths sharing one state), on int keys, values and times with retractions, many times in one
batch, frontiers that leave updates for later activations, and batches that arrive before the
frontier passes them. The outputs must be equal, equal to the oracle's, and the states the
operators are left with equal too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.harness import (
    FakeContext,
    consolidated,
    drive,
    frontier_chains,
    kernel_mode,
    switching,
)
from tests.reference import assert_matches_oracle
from tests.strategies import nonnegative

import deltaflow as df
from deltaflow.framework import kernels
from deltaflow.framework.antichain import Antichain
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators import reduce as R
from deltaflow.operators.arrange import RawBatch
from deltaflow.operators.reduce import total
from deltaflow.operators.reduce.columnar import (
    KERNEL_MIN,
    correct_counts,
    counting_kernel,
    int_columns,
)
from deltaflow.operators.reduce.logics import threshold_functions
from deltaflow.testing import accumulate

INT_KEYS = st.integers(-3, 3)
INT_VALS = st.integers(-2, 4)


def int_updates(max_size: int = 24, max_time: int = 7) -> st.SearchStrategy[list[Any]]:
    """``((key, val), time, diff)`` of ints, with retractions and repeats."""
    return st.lists(
        st.tuples(
            st.tuples(INT_KEYS, INT_VALS),
            st.integers(0, max_time),
            st.integers(-2, 3).filter(bool),
        ),
        max_size=max_size,
    )


def _square_minus_two(_key: Any, n: int) -> int:
    return n * n - 2 if n > -2 else 0


_THRESHOLD_LOGIC, _THRESHOLD_BY_COUNT = threshold_functions(_square_minus_two, "threshold(t)")

# name: (logic, positive_only, by_count, by self, oracle of {(key, val): n} -> output)
REDUCTIONS: dict[str, tuple[Any, bool, Any, bool, Any]] = {
    "count": (R._count_logic, False, None, False, None),
    "distinct": (R._distinct_logic, True, R._distinct_by_count, True, None),
    "threshold": (_THRESHOLD_LOGIC, False, _THRESHOLD_BY_COUNT, True, None),
}


def _oracle(name: str) -> Any:
    def query(c: dict[str, Counter[Any]]) -> Counter[Any]:
        out: Counter[Any] = Counter()
        if name == "count":
            totals: Counter[Any] = Counter()
            for (k, _v), n in c["xs"].items():
                totals[k] += n
            return Counter({(k, n): 1 for k, n in totals.items() if n > 0})
        for d, n in c["xs"].items():
            if not n:
                continue
            key = d[0]  # reductions by self output the key alone
            m = (1 if n > 0 else 0) if name == "distinct" else _square_minus_two(key, n)
            if m:
                out[key] += m
        return out

    return query


def _as_input(name: str, updates: list[Any]) -> list[Any]:
    """Reductions by self take the key alone (the value ``()``)."""
    if REDUCTIONS[name][3]:
        return [((k, ()), t, r) for (k, _v), t, r in updates]
    return updates


def _operator(name: str) -> R.ReduceOperator:
    """A reduce operator for one of :data:`REDUCTIONS`, fed by worker 0 at time 0."""
    logic, positive_only, by_count, _, _ = REDUCTIONS[name]
    return R.ReduceOperator(
        "reduce(test)",
        Spine(Antichain([0])),
        None,
        logic,
        positive_only=positive_only,
        key_only=by_count is not None,
        by_count=by_count,
    )


def _raw_batch(name: str, updates: list[Any], at: int = 0) -> RawBatch:
    """``updates`` as one batch of many times (none before ``at``), as an arrangement
    forwards them to the reduction ``name``."""
    by_count = REDUCTIONS[name][2]
    rows = [(k, v, max(t, at), r) for (k, v), t, r in _as_input(name, updates)]
    return RawBatch(
        [r[0] for r in rows],
        None if by_count is not None else [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
    )


def _run(
    name: str, updates: list[Any], frontiers: list[Antichain], modes: list[str], **how: Any
) -> tuple[list[Any], FakeContext, R.ReduceOperator]:
    """:func:`drive` one of :data:`REDUCTIONS` from time 0, taking the kernel or not in turn
    as ``modes`` says; ``how`` goes to ``drive``."""
    logic, positive_only, by_count, _, _ = REDUCTIONS[name]
    with kernel_mode():
        return drive(
            _as_input(name, updates),
            frontiers,
            logic,
            0,
            positive_only=positive_only,
            key_only=by_count is not None,
            by_count=by_count,
            operator=switching(modes),
            **how,
        )


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=60, deadline=None)
@given(
    updates=int_updates(),
    frontiers=frontier_chains(st.integers(0, 8)),
    modes=st.lists(st.sampled_from(["always", "never"]), min_size=1, max_size=4),
    early=st.integers(0, 2),
    lag=st.lists(st.booleans(), min_size=1, max_size=3),
)
def test_kernels_match_the_per_key_path_and_the_oracle(
    name: str,
    updates: list[Any],
    frontiers: list[Antichain],
    modes: list[str],
    early: int,
    lag: list[bool],
) -> None:
    """The kernel alone, and the kernel and the per-key path taking turns over one state,
    give the per-key path's output, the oracle's, and leave the per-key path's state."""
    data = _as_input(name, updates)
    rows, ctx, op = _run(name, updates, frontiers, ["never"], early=early, lag=lag)
    mixed, mixed_ctx, mixed_op = _run(name, updates, frontiers, modes, early=early, lag=lag)
    assert consolidated(mixed) == consolidated(rows)
    assert_matches_oracle(mixed, {"xs": data}, _oracle(name))
    assert mixed_ctx.held == {} and ctx.held == {}
    assert mixed_op.accs == op.accs
    assert mixed_op.outs == op.outs
    assert mixed_op.buffered == op.buffered == {}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=40, deadline=None)
@given(updates=int_updates(max_size=60, max_time=20), data=st.data())
def test_kernel_state_after_each_step_is_the_per_key_paths(
    name: str, updates: list[Any], data: st.DataObject
) -> None:
    """All updates in one batch (many times, as an arrangement forwards them), then the
    frontier moving in steps, updates beyond it buffered: after every activation the kernel
    leaves the per-key path's accumulations, outputs, buffered updates and output."""
    cuts = sorted(data.draw(st.lists(st.integers(1, 21), max_size=4, unique=True)))
    batch = _raw_batch(name, updates)
    steps: list[list[Any]] = [[], []]
    with kernel_mode():
        for i, mode in enumerate(["never", "always"]):
            kernels.set_mode(mode)
            op = _operator(name)
            ctx = FakeContext(0)
            if updates:
                ctx.mailbox.append((0, batch))
            for cut in [*cuts, None]:
                ctx.run(op, Antichain() if cut is None else Antichain([cut]))
                state = (
                    {k: dict(acc) for k, acc in op.accs.items()},
                    {k: dict(out) for k, out in op.outs.items()},
                    {k: sorted(rows) for k, rows in op.buffered.items()},
                    op.buffered_low,
                    consolidated(ctx.sent),
                )
                steps[i].append(state)
    assert steps[0] == steps[1]


def test_the_kernel_is_chosen_by_logic_once() -> None:
    """``count`` (every count), ``distinct`` and ``threshold`` have a kernel; ``min``, a
    user's logic and ``count`` of positive counts only do not."""
    assert counting_kernel(R._count_logic, False, None) is not None
    assert counting_kernel(R._distinct_logic, True, R._distinct_by_count) is not None
    assert counting_kernel(R._min_logic, True, None) is None
    assert counting_kernel(R._count_logic, True, None) is None


@pytest.mark.parametrize(
    ("keys", "vals", "times", "diffs"),
    [
        (["a", "b"], [1, 2], [0, 0], [1, 1]),  # str keys
        ([1, True], [1, 2], [0, 0], [1, 1]),  # a bool is not an int here
        ([1, 2], [1.5, 2], [0, 0], [1, 1]),  # float values
        ([1, 2], [(1,), 2], [0, 0], [1, 1]),  # tuple values
        ([1, 2**64], [1, 2], [0, 0], [1, 1]),  # beyond 64 bits
        ([1, 2], [1, 2], [0, 0], [1, 2**70]),
    ],
)
def test_columns_that_are_not_plain_ints_are_refused(
    keys: list[Any], vals: list[Any], times: list[Any], diffs: list[Any]
) -> None:
    assert int_columns(RawBatch(keys, vals, times, diffs)) is None


@pytest.mark.parametrize("mode", ["always", "never", "auto"])
def test_data_the_kernel_refuses_take_the_per_key_path(mode: str) -> None:
    """Mixed key types, diffs near 64 bits and huge counts still give the exact answer."""
    big = 2**61
    xs = [
        ((1, 1), 0, big),
        ((1, 2), 0, big),
        ((1, 3), 1, big),
        (("a", 1), 1, 1),
        ((2, 1), 2, 3),
        ((2, 1), 3, -3),
    ]
    with kernel_mode(mode):
        out = df.run(_Count(), xs=[(d, t, r) for d, t, r in xs])
    assert_matches_oracle(out, {"xs": xs}, _oracle("count"))


class _Count(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.count()


class _Counting(df.Pipeline):
    """Each counting reduction over int records, at int times."""

    def build(self, xs: df.Collection) -> dict[str, df.Collection]:
        return {
            "count": xs.map(lambda x: (x % 7, x % 3)).count(),
            "distinct": xs.map(lambda x: x % 11).distinct(),
            "threshold": xs.map(lambda x: x % 13).threshold(_square_minus_two),
        }


@pytest.mark.parametrize("mode", ["always", "never", "auto"])
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 6), st.sampled_from([1, 1, 2, -1])),
        max_size=40,
    ).map(nonnegative)
)
def test_counting_reductions_in_a_job_match_the_oracle(
    mode: str, records: list[Any], workers: int
) -> None:
    """Through ``df.run`` (arrangements forward lists, one batch with many times) on one and
    two workers."""
    with kernel_mode(mode):
        out = df.run(_Counting(), workers, xs=records)
    views = {
        "count": [((x % 7, x % 3), t, r) for x, t, r in records],
        "distinct": [((x % 11, ()), t, r) for x, t, r in records],
        "threshold": [((x % 13, ()), t, r) for x, t, r in records],
    }
    for name, data in views.items():
        assert_matches_oracle(out[name], {"xs": data}, _oracle(name))


def test_a_large_batch_takes_the_kernel_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``auto``, a batch of more than :data:`KERNEL_MIN` updates (here also forwarded
    as a numpy batch) takes the kernel and answers as the oracle does."""
    n = 40_000
    records = [(i * 7919 % 1000, i % 50, 1 if i % 9 else -1) for i in range(n)]
    assert n > KERNEL_MIN
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        fixes = correct_counts(*args)
        calls.append(fixes is not None)
        return fixes

    monkeypatch.setattr(total, "correct_counts", counted)
    with kernel_mode("auto"):
        out = df.run(_Counting(), xs=records)
    assert calls == [True, True, True]
    assert_matches_oracle(
        out["count"], {"xs": [((x % 7, x % 3), t, r) for x, t, r in records]}, _oracle("count")
    )


class _Memory:
    """A checkpoint of one operator on one worker, kept in memory (sink and source)."""

    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    def index(
        self,
        name: str,
        index: Any,
        columns: tuple[str, ...],
        changed: set[Any] | None,
        rows: Any = None,
        *,
        single: bool = False,
    ) -> None:
        self.saved[name] = {k: list(rows(v) if rows else v) for k, v in index.items()}

    def history(
        self,
        name: str,
        index: Any,
        columns: tuple[str, ...],
        appended: Any,
        size: int,
        rows: Any = None,
        domain: Any = None,
    ) -> None:
        self.index(name, index, columns, None, rows)

    def rows(self, name: str, rows: Any, key: str | None = None) -> Any:
        if key is None and not isinstance(rows, str):
            self.saved[name] = rows
            return None
        return self.saved.get(name)

    def value(self, name: str, value: Any = None) -> Any:
        if value is not None:
            self.saved[name] = value
            return None
        return self.saved.get(name)


class _Source:
    def __init__(self, memory: _Memory) -> None:
        self.saved = memory.saved

    def index(self, name: str) -> Any:
        return self.saved.get(name)

    def history(self, name: str) -> Any:
        return self.saved.get(name)

    def rows(self, name: str) -> Any:
        return self.saved.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        return self.saved.get(name, default)


class _Sink(_Memory):
    def rows(self, name: str, rows: Any, key: str | None = None) -> Any:
        self.saved[name] = rows


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=30, deadline=None)
@given(
    first=int_updates(max_size=40, max_time=9),
    second=int_updates(max_size=40, max_time=9),
    cut=st.integers(1, 9),
)
def test_a_checkpoint_between_kernel_batches_resumes_exactly(
    name: str, first: list[Any], second: list[Any], cut: int
) -> None:
    """A checkpoint taken with a batch received for the kernel but not yet applied (and
    updates beyond the frontier waiting) resumes into an operator that finishes with the
    per-key path's output and state."""
    outputs = []
    with kernel_mode():
        for mode in ("never", "always"):
            kernels.set_mode(mode)
            op, ctx = _operator(name), FakeContext(0)
            if first:
                ctx.mailbox.append((0, _raw_batch(name, first)))
            ctx.run(op, Antichain([cut]))
            if second:
                ctx.mailbox.append((cut, _raw_batch(name, second, at=cut)))
                ctx.run(op)  # received, the frontier not moved: waiting whole
            sink = _Sink()
            op.save(sink)  # type: ignore[arg-type]
            resumed, again = _operator(name), FakeContext(0)
            resumed.load(_Source(sink))  # type: ignore[arg-type]
            # The runtime hands a resumed operator capabilities at the checkpoint's time.
            again._frontier = Antichain([cut])
            again.rights.append(cut)
            resumed.initialize(again, [again.capability(cut)])  # type: ignore[arg-type]
            again.rights.clear()
            again.run(resumed, Antichain())
            assert again.held == {}
            outputs.append(
                (consolidated(ctx.sent + again.sent), resumed.accs, resumed.outs, resumed.buffered)
            )
    assert outputs[0] == outputs[1]
    data = _as_input(name, [((k, v), t, r) for (k, v), t, r in first])
    data += _as_input(name, [((k, v), max(t, cut), r) for (k, v), t, r in second])
    sent = [(d, t, r) for (d, t), r in outputs[1][0].items()]
    assert_matches_oracle(sent, {"xs": data}, _oracle(name))


class _Huge(df.Pipeline):
    def build(self, xs: df.Collection) -> df.Collection:
        return xs.threshold(lambda _k, n: n * 2**70)


@pytest.mark.parametrize("mode", ["always", "never"])
def test_threshold_counts_beyond_64_bits_are_exact(mode: str) -> None:
    """A ``threshold`` whose counts leave 64 bits falls back to the per-key path."""
    xs = [(k, t, 1) for k in range(5) for t in range(3)]
    with kernel_mode(mode):
        out = df.run(_Huge(), xs=xs)
    want = Counter(dict.fromkeys(range(5), 3 * 2**70))
    assert accumulate(out, 2) == want
