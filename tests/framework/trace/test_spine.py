"""The spine against a naive list of updates: inserts, readers, compaction, exertion."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)
from tests.harness import accumulate

from deltaflow.framework.antichain import Antichain
from deltaflow.framework.lattice import Product
from deltaflow.framework.trace import (
    Batch,
    Description,
    Merger,
    Spine,
    TraceReader,
    TraceStatistics,
)


def desc(lo: int, hi: int) -> Description:
    return Description(Antichain([lo]), Antichain([hi]))


def cursor_contents(spine: Spine) -> dict[Any, list[tuple[Any, Any, int]]]:
    out: dict[Any, list[tuple[Any, Any, int]]] = {}
    c = spine.cursor()
    while c.key_valid:
        rows = out.setdefault(c.key(), [])
        while c.val_valid:
            rows.extend((c.val(), t, d) for t, d in c.history())
            c.step_val()
        c.step_key()
    return out


KEYS = [0, 1, 2, 3, 5, 8, "a", "b"]


class TinyMerger(Merger):
    """Merges in steps as small as one update, so merges stay half-done across operations
    (never at once in plain Python)."""

    MIN_STEP = 1
    MIN_OBJECT_STEP = 1
    SMALL_MERGE = 0


class NumpyMerger(Merger):
    """Never merges at once in plain Python: results stay encoded when they can."""

    SMALL_MERGE = 0


class NumpySpine(Spine):
    """A spine whose merges never run in plain Python: its batches stay encoded."""

    MERGER = NumpyMerger


class TinyStepSpine(Spine):
    """A spine whose merges advance in tiny steps."""

    MERGER = TinyMerger
    FUEL_PER_UPDATE = 1


READERS = Bundle("readers")


class ReadersMachine(RuleBasedStateMachine):
    """What the spine machines share: a spine from ``lower`` taking whole or tiny merge steps,
    readers made and dropped, merge work exerted; its subclasses insert, move the readers and
    check the reads."""

    lower: ClassVar[Any] = 0
    readers = READERS

    @initialize(tiny_steps=st.booleans(), list_batches=st.booleans())
    def start(self, tiny_steps: bool, list_batches: bool) -> None:
        # Small batches are lists, or (threshold 0) numpy whenever the data allows.
        self.saved_tiny = Batch.TINY
        Batch.TINY = Batch.TINY if list_batches else 0
        self.spine = (TinyStepSpine if tiny_steps else Spine)(Antichain([self.lower]))
        self.updates: list[tuple[Any, Any, Any, int]] = []
        self.upper = 0
        self.live: list[TraceReader] = []

    @rule(target=READERS)
    def new_reader(self) -> TraceReader:
        r = self.spine.reader()
        assert r.logical_compaction == self.spine.logical_compaction
        self.live.append(r)
        return r

    @rule(reader=consumes(READERS))
    def drop_reader(self, reader: TraceReader) -> None:
        reader.drop()
        if reader in self.live:
            self.live.remove(reader)

    @rule(fuel=st.integers(1, 200))
    def exert(self, fuel: int) -> None:
        self.spine.exert(fuel)

    def teardown(self) -> None:
        Batch.TINY = self.saved_tiny


class SpineMachine(ReadersMachine):
    """Random inserts, readers and exertion; reads must match a naive model beyond the frontier."""

    @rule(
        width=st.integers(1, 3),
        rows=st.lists(
            st.tuples(
                st.sampled_from(KEYS), st.integers(0, 2), st.integers(0, 2), st.integers(-2, 2)
            ),
            max_size=30,
        ),
        repeat=st.integers(1, 4),
    )
    def insert(self, width: int, rows: list[tuple[Any, int, int, int]], repeat: int) -> None:
        lo, hi = self.upper, self.upper + width
        ups = [(k, v, lo + (t % width), d) for k, v, t, d in rows] * repeat
        self.spine.insert(Batch.from_updates(ups, desc(lo, hi)))
        self.updates.extend(ups)
        self.upper = hi

    @rule(reader=READERS, step=st.integers(0, 4))
    def advance_reader(self, reader: TraceReader, step: int) -> None:
        if reader.dropped:
            with pytest.raises(ValueError, match="dropped"):
                reader.set_logical_compaction(Antichain([0]))
            return
        (current,) = reader.logical_compaction.elements
        reader.set_logical_compaction(Antichain([current + step]))
        if current + step > 0:
            with pytest.raises(ValueError, match="backwards"):
                reader.set_logical_compaction(Antichain([current + step - 1]))

    @rule(reader=READERS, step=st.integers(0, 3))
    def advance_physical(self, reader: TraceReader, step: int) -> None:
        if reader.dropped:
            return
        if reader.physical_compaction is None:
            (current,) = self.spine.physical_compaction.elements
        else:
            (current,) = reader.physical_compaction.elements
        reader.set_physical_compaction(Antichain([current + step]))

    @invariant()
    def consistent(self) -> None:
        spine = self.spine
        spine._check()
        assert spine.upper == Antichain([self.upper])
        frontier = spine.logical_compaction
        for r in self.live:
            assert frontier.dominates(r.logical_compaction)
        (f,) = frontier.elements
        times = range(f, max(f, self.upper) + 2)
        from_cursor = cursor_contents(spine)
        for key in KEYS:
            expected = [(v, t, d) for k, v, t, d in self.updates if k == key]
            got = spine.lookup(key)
            via_cursor = from_cursor.get(key, [])
            for u in times:
                want = accumulate(expected, u)
                assert accumulate(got, u) == want, (key, u)
                assert accumulate(via_cursor, u) == want, (key, u)
        stats = spine.statistics()
        assert stats.batches == len(spine.batches())
        assert stats.updates == sum(len(b) for b in spine.batches())
        probes = [*KEYS, 4, 2.0, "zz"]
        assert spine.lookup_many(probes) == {k: spine.lookup(k) for k in probes if spine.lookup(k)}


TestSpineMachine = SpineMachine.TestCase
TestSpineMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


# ---------------------------------------------------------------------- focused tests


def test_size_stays_bounded_when_updates_cancel() -> None:
    """+1 at t and -1 at t+1, with the reader following: the trace stays small."""
    spine = Spine(Antichain([0]))
    reader = spine.reader()
    worst = TraceStatistics(0, 0, 0, 0)
    for t in range(1000):
        ups = [(t % 10, t, t, 1)]
        if t:
            ups.append(((t - 1) % 10, t - 1, t, -1))
        spine.insert(Batch.from_updates(ups, desc(t, t + 1)))
        reader.set_logical_compaction(Antichain([t]))
        stats = spine.statistics()
        if stats.updates > worst.updates:
            worst = stats
        assert stats.batches <= 12
    assert worst.updates <= 30, worst
    assert accumulate(spine.lookup(9), 999) == {999: 1}
    assert all(accumulate(spine.lookup(k), 999) == {} for k in range(9))
    spine._check()
    assert spine._forced_merges == 0


def test_no_readers_compacts_to_upper() -> None:
    """With nobody reading, merges may compact to the upper frontier: everything cancels."""
    spine = Spine(Antichain([0]))
    for t in range(64):
        ups = [("k", (), t, 1 if t % 2 == 0 else -1)]
        spine.insert(Batch.from_updates(ups, desc(t, t + 1)))
    while spine.exert(1 << 20):
        pass
    spine._check()
    stats = spine.statistics()
    assert stats.batches == 1 and stats.updates == 0
    assert spine.logical_compaction == Antichain([64])


def test_exert_merges_everything_into_one_batch() -> None:
    """Idle-time exertion keeps merging until a single, compacted batch remains."""
    spine = Spine(Antichain([0]))
    reader = spine.reader()
    for t in range(37):
        spine.insert(Batch.from_updates([(t % 5, 0, t, 1)] * (1 + t % 7), desc(t, t + 1)))
    reader.set_logical_compaction(Antichain([37]))
    calls = 0
    while spine.exert(16):
        calls += 1
        assert calls < 1000
    stats = spine.statistics()
    assert stats.batches == 1 and stats.merges_in_progress == 0
    assert sorted(spine.lookup(2)) == [(0, 37, sum(1 + t % 7 for t in range(37) if t % 5 == 2))]
    spine._check()


def test_large_batches_spread_merge_work() -> None:
    """Merges at high levels stay in progress across insertions and never need forcing."""
    spine = Spine(Antichain([0]))
    spine.reader()
    seen_in_progress = False
    for t in range(40):
        n = 3000 + 500 * (t % 3)
        ups = [((i * 7919 + t) % 1000, i % 3, t, 1) for i in range(n)]
        spine.insert(Batch.from_updates(ups, desc(t, t + 1)))
        seen_in_progress |= spine.statistics().merges_in_progress > 0
    assert seen_in_progress
    assert spine._forced_merges == 0
    assert spine.statistics().batches <= 2 * 8
    spine._check()


def test_physical_hold_keeps_batches_apart() -> None:
    """Batches beyond a physical hold are not merged until the hold advances."""
    spine = Spine(Antichain([0]))
    reader = spine.reader()
    reader.set_physical_compaction(Antichain([0]))
    for t in range(10):
        spine.insert(Batch.from_updates([(1, 0, t, 1)], desc(t, t + 1)))
    assert spine.statistics().batches == 10
    assert spine.lookup(1) == [(0, t, 1) for t in range(10)]
    reader.set_physical_compaction(Antichain([10]))
    while spine.exert(100):
        pass
    assert spine.statistics().batches == 1
    with pytest.raises(ValueError, match="backwards"):
        reader.set_physical_compaction(Antichain([3]))
    late = spine.reader()
    with pytest.raises(ValueError, match="already"):
        late.set_physical_compaction(Antichain([5]))
    spine._check()


def test_empty_batches_extend_the_newest_batch_unless_they_compact_it() -> None:
    """An empty batch whose merge would change no time extends the newest batch in place (no
    merge, no new batch); once the reader's frontier passes its times it merges and compacts."""
    spine = Spine(Antichain([0]))
    reader = spine.reader()
    spine.insert(Batch.from_updates([("a", 1, 0, 1), ("b", 2, 1, 1)], desc(0, 2)))
    first = spine.batches()[0]
    for t in range(2, 6):
        spine.insert(Batch.empty(desc(t, t + 1)))
    (only,) = spine.batches()
    assert only._keys is first._keys and only.upper == Antichain([6])
    reader.set_logical_compaction(Antichain([4]))
    spine.insert(Batch.empty(desc(6, 7)))
    while spine.exert(100):
        pass
    spine._check()
    assert spine.lookup("a") == [(1, 4, 1)] and spine.lookup("b") == [(2, 4, 1)]
    assert spine.upper == Antichain([7]) and spine.statistics().batches == 1


def test_insert_validates_descriptions() -> None:
    """Out-of-order batches, reversed intervals and premature compaction are rejected."""
    spine = Spine(Antichain([0]))
    spine.reader()
    spine.insert(Batch.from_updates([(1, 0, 0, 1)], desc(0, 2)))
    with pytest.raises(ValueError, match="does not match"):
        spine.insert(Batch.empty(desc(3, 4)))
    with pytest.raises(ValueError, match="not beyond"):
        spine.insert(Batch.empty(desc(2, 1)))
    early = Description(Antichain([2]), Antichain([3]), Antichain([2]))
    with pytest.raises(ValueError, match="since"):
        spine.insert(Batch.empty(early))
    spine.insert(Batch.empty(desc(2, 2)))  # an empty interval is a no-op
    assert spine.upper == Antichain([2])
    spine._check()


def test_dropped_reader_releases_its_hold() -> None:
    """Dropping the slowest reader lets the frontier advance to the next one."""
    spine = Spine(Antichain([0]))
    slow, fast = spine.reader(), spine.reader()
    fast.set_logical_compaction(Antichain([5]))
    assert spine.logical_compaction == Antichain([0])
    slow.drop()
    assert spine.logical_compaction == Antichain([5])
    with pytest.raises(ValueError, match="dropped"):
        slow.set_logical_compaction(Antichain([6]))
    slow.drop()  # idempotent
    fast.drop()
    assert spine.logical_compaction == Antichain([5])  # never moves back
    spine._check()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 3), st.integers(0, 1), st.integers(0, 3), st.integers(-1, 1)),
            max_size=8,
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4)), max_size=12),
)
def test_product_time_spine(
    rounds: list[list[tuple[int, int, int, int]]], moves: list[tuple[int, int]]
) -> None:
    """With Product times and a two-element reader frontier, accumulations stay exact."""
    spine = Spine(Antichain([Product(0, 0)]))
    reader = spine.reader()
    updates: list[tuple[int, int, Product, int]] = []
    frontier = Antichain([Product(0, 0)])
    for i, batch in enumerate(rounds):
        ups = [(k, v, Product(i, j), d) for k, v, j, d in batch]
        d = Description(Antichain([Product(i, 0)]), Antichain([Product(i + 1, 0)]))
        spine.insert(Batch.from_updates(ups, d))
        updates.extend(ups)
        if i < len(moves):
            a, b = moves[i]
            cand = Antichain([Product(max(0, i - a), b + 2), Product(i, b)])
            if frontier.dominates(cand):
                reader.set_logical_compaction(cand)
                frontier = cand
        spine.exert(8)
        spine._check()
    n = len(rounds)
    for k in range(4):
        expected = [(v, t, d) for kk, v, t, d in updates if kk == k]
        got = spine.lookup(k)
        for u in (Product(a, b) for a in range(n + 2) for b in range(8)):
            if frontier.less_equal(u):
                assert accumulate(got, u) == accumulate(expected, u), (k, u)


# ---------------------------------------------------------------------- Product times


PKEYS: list[Any] = [0, 1, 3, (0, 1), (2, 5), (1, 0), "s"]
KEY_SETS = [[0, 1, 3], [(0, 1), (2, 5), (1, 0)], [0, 1, 3, "s"], [(0, 1), (1, 0), "s"]]


class ProductSpineMachine(ReadersMachine):
    """Product(round, iteration) times, int or int-pair keys (encoded batches) and some string
    keys (object batches), readers holding one- and two-element frontiers: every read must
    match a naive model at every time beyond the spine's compaction frontier."""

    lower = Product(0, 0)

    @rule(
        keys=st.sampled_from(KEY_SETS),
        rows=st.lists(
            st.tuples(st.integers(0, 9), st.integers(0, 2), st.integers(0, 4), st.integers(-2, 2)),
            max_size=30,
        ),
        unit=st.booleans(),
        repeat=st.integers(1, 3),
    )
    def insert(
        self, keys: list[Any], rows: list[tuple[int, int, int, int]], unit: bool, repeat: int
    ) -> None:
        lo = self.upper
        ups = [
            (keys[k % len(keys)], () if unit else v, Product(lo, j), d) for k, v, j, d in rows
        ] * repeat
        desc = Description(Antichain([Product(lo, 0)]), Antichain([Product(lo + 1, 0)]))
        self.spine.insert(Batch.from_updates(ups, desc))
        self.updates.extend(ups)
        self.upper = lo + 1

    @rule(reader=READERS, back=st.integers(0, 2), inner=st.integers(0, 4), two=st.booleans())
    def advance_reader(self, reader: TraceReader, back: int, inner: int, two: bool) -> None:
        if reader.dropped:
            return
        top = max(0, self.upper - back)
        elems = [Product(top, inner)]
        if two and top > 0:
            elems.append(Product(top - 1, inner + 2))
        cand = Antichain(elems)
        if reader.logical_compaction.dominates(cand):
            reader.set_logical_compaction(cand)

    @invariant()
    def consistent(self) -> None:
        spine = self.spine
        spine._check()
        frontier = spine.logical_compaction
        grid = [Product(a, b) for a in range(self.upper + 2) for b in range(9)]
        beyond = [u for u in grid if frontier.less_equal(u)]
        probes = [*PKEYS, (0, 1.0), 7, (9, 9)]
        many = spine.lookup_many(probes)
        unsorted = spine.lookup_many(probes, sort=False)
        for key in probes:
            got = spine.lookup(key)
            assert many.get(key, []) == got
            assert sorted(unsorted.get(key, []), key=repr) == sorted(got, key=repr)
            expected = [(v, t, d) for k, v, t, d in self.updates if k == key]
            for u in beyond:
                assert accumulate(got, u) == accumulate(expected, u), (key, u)


TestProductSpineMachine = ProductSpineMachine.TestCase
TestProductSpineMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


@pytest.mark.parametrize(("numpy_merges", "size"), [(True, 40), (False, 40), (False, 12)])
def test_spine_lookup_many_of_product_batches(numpy_merges: bool, size: int) -> None:
    """Encoded Product batches in a spine (or, merged in Python, list batches): lookup_many
    equals lookup key by key."""
    spine = (NumpySpine if numpy_merges else Spine)(Antichain([Product(0, 0)]))
    reader = spine.reader()
    for r in range(30):
        ups = [((r % 4, k), (), Product(r, k % 3), 1 - 2 * (k % 2)) for k in range(size)]
        desc = Description(Antichain([Product(r, 0)]), Antichain([Product(r + 1, 0)]))
        spine.insert(Batch.from_updates(ups, desc))
        reader.set_logical_compaction(Antichain([Product(max(0, r - 3), 1)]))
    layouts = {b.encoded for b in spine.batches() if len(b)}
    if numpy_merges:
        assert layouts == {True}
    elif size <= Batch.TINY:
        assert False in layouts  # the latest small batches (and merges of them) are lists
    keys = [(a, k) for a in range(5) for k in range(0, 45, 2)]
    many = spine.lookup_many(iter(keys))
    assert many == {k: spine.lookup(k) for k in keys if spine.lookup(k)}
    assert len(many) == 4 * ((size + 1) // 2)
    spine._check()
