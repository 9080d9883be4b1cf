"""Lookups of prefixes in indexes as of their time: count, propose, validate, and the operator.

A *prefix* is a record on its way through one delta rule (see :mod:`.query`): ``(binding,
t_out, n, which)``, where ``binding`` is the values bound so far, ``t_out`` the time the
result will have (the join of the times of every update it met), and ``n`` / ``which`` the
fewest candidates an extender offered it and which one (set by the counts). The message
carrying it is at the time of the update that started the rule (``t``): every lookup is made
*as of* ``t``, that is against the index's updates at times before ``t`` (``strict``) or not
after it, in a total order of times that extends their partial order (lexicographic on
products). Rule ``i`` of a query looks atoms before it up not after ``t`` and atoms after it
strictly before, so that of the updates of several atoms at the same time each combination is
counted by exactly one rule: the one of the latest update, ties going to the later atom.

A lookup as of ``t`` may only be made once its index holds every update it will ever hold at
the times it reads: once no element of the index's frontier is before ``t`` (``strict``) or
not after it. A :class:`RuleOperator` stashes what arrives too early, under a capability, and
runs it when its index frontiers allow.

Phases (each one job, bound to a worker by :meth:`~Phase.runner`):

* :class:`CountPhase` — how many updates the extender's key has as of ``t``; keeps the least.
* :class:`ProposePhase` — the winning extender proposes its values, diffs multiplied.
* :class:`ValidatePhase` — another extender keeps the proposals it has, diffs multiplied.
* :class:`IntersectPhase` — all three in one pass, where every index is local (one worker):
  a proposal is built only once every other extender has its value.

Each lookup is on the worker whose part of the index holds the key: with several workers a
phase's records are exchanged by its key first (:mod:`.build`). A rule operator works through
its records in chunks and within a budget per activation, so one hub's proposals are never
all held at once and other operators run between its slices.

With product times an update met at ``t2`` moves ``t_out`` to ``join(t_out, t2)``, so a
proposal or validation yields one record per distinct resulting time.

    >>> from deltaflow.framework.time_domain import domain_for_depth
    >>> _sum_upto([(1, 2), (3, 5), (4, 7)], 3, True, 3, domain_for_depth(0).join)
    [(3, 2)]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ...framework.antichain import Antichain
from ...framework.durable.tables import Rows
from ...framework.lattice import less_equal
from ..base import Interest, Operator, UpdateBatch
from ..durable import covering
from .index import updates_of

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.time_domain import TimeDomain
    from ..base import Capability, OperatorContext
    from ..durable import StateSink, StateSource
    from .index import History, IndexRegistry, IndexStore, KeyRows

__all__ = [
    "CountPhase",
    "Extender",
    "IntersectPhase",
    "Phase",
    "ProposePhase",
    "RuleOperator",
    "Runner",
    "Tally",
    "ValidatePhase",
    "extension_phases",
    "identity",
]

Record = tuple[Any, Any, int, int]
Runner = Callable[[list[Record], list[int], Any], tuple[list[Record], list[int]]]
"""A phase bound to a worker: ``(records, diffs, t) -> (records, diffs)``."""


@attrs.define
class Tally:
    """How many candidates the proposing phases of one operator node looked at (all
    workers of this process)."""

    proposals: int = 0


@attrs.frozen
class Extender:
    """One index read with one key: ``key(binding)`` is the key a prefix looks up, as of its
    time, ``strict`` (before it) or not (not after it)."""

    registry: IndexRegistry
    key: Callable[[Any], Any]
    strict: bool


def _sum_upto(
    hist: History, t: Time, strict: bool, t_out: Time, join: Callable[[Any, Any], Any]
) -> list[tuple[Time, int]]:
    """The non-zero sums of ``hist``'s diffs at times before (or not after) ``t``, per
    resulting time ``join(t_out, t2)`` (``join``: the time domain's)."""
    sums: dict[Any, int] = {}
    for t2, d in updates_of(hist):
        if t2 < t or (not strict and t2 == t):
            at = join(t_out, t2)
            sums[at] = sums.get(at, 0) + d
    return [(at, s) for at, s in sums.items() if s]


def _met(hist: History, t: Time, strict: bool) -> int:
    """The sum of ``hist``'s diffs at int times before (or not after) ``t``."""
    return sum(d for t2, d in updates_of(hist) if t2 < t or (not strict and t2 == t))


class Phase:
    """One step of a rule: how its records are routed between workers, and what it does."""

    extenders: tuple[Extender, ...] = ()

    def route(self, rec: Record) -> Any:
        """The key whose worker runs this phase for ``rec``."""
        raise NotImplementedError

    def runner(self, worker: int, tally: Tally, domain: TimeDomain) -> Runner:
        """This phase on ``worker`` (its index stores resolved), at the times of ``domain``."""
        raise NotImplementedError


@attrs.frozen
class CountPhase(Phase):
    """Candidate ``which``'s count for each prefix; the least so far wins (the first sets it)."""

    extenders: tuple[Extender, ...]
    which: int

    def route(self, rec: Record) -> Any:
        """The candidate's key."""
        return self.extenders[self.which].key(rec[0])

    def runner(self, worker: int, tally: Tally, domain: TimeDomain) -> Runner:
        """Count on ``worker``."""
        ext = self.extenders[self.which]
        keys = ext.registry.store(worker).keys
        key, strict, which = ext.key, ext.strict, self.which

        def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
            out = []
            for rec in recs:
                b = rec[0]
                rows = keys.get(key(b))
                if rows is None:
                    n = 0
                else:  # rows.upto(t, strict), inline
                    times = rows.times
                    last = times[-1]
                    if last < t or (not strict and last == t):
                        n = len(times)
                    else:
                        n = bisect_left(times, t) if strict else bisect_right(times, t)
                out.append((b, rec[1], n, which) if which == 0 or n < rec[2] else rec)
            return out, diffs

        return run


@attrs.frozen
class ProposePhase(Phase):
    """The winning candidate proposes its values: ``combine(binding, val)``, diffs multiplied."""

    extenders: tuple[Extender, ...]
    combine: Callable[[Any, Any], Any]

    def route(self, rec: Record) -> Any:
        """The winner's key."""
        return self.extenders[rec[3]].key(rec[0])

    def runner(self, worker: int, tally: Tally, domain: TimeDomain) -> Runner:
        """Propose on ``worker``."""
        exts = self.extenders
        stores: list[IndexStore] = [e.registry.store(worker) for e in exts]
        combine = self.combine
        total = domain.total
        time_join = domain.join

        def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
            out: list[Record] = []
            out_diffs: list[int] = []
            seen = 0
            for rec, r in zip(recs, diffs):
                b, t_out, _, which = rec
                ext = exts[which]
                rows = stores[which].keys.get(ext.key(b))
                if rows is None:
                    continue
                n = rows.upto(t, ext.strict)
                seen += n
                if total and rows.plain:
                    for v in rows.vals[:n] if n < len(rows.vals) else rows.vals:
                        out.append((combine(b, v), t_out, 0, which))
                    out_diffs.extend([r] * n)
                    continue
                if total:
                    sums: dict[Any, int] = {}
                    for v, d in zip(rows.vals[:n], rows.diffs[:n]):
                        sums[v] = sums.get(v, 0) + d
                    for v, s in sums.items():
                        if s:
                            out.append((combine(b, v), t_out, 0, which))
                            out_diffs.append(r * s)
                    continue
                at_sums: dict[tuple[Any, Any], int] = {}
                for v, t2, d in zip(rows.vals[:n], rows.times[:n], rows.diffs[:n]):
                    vt = (v, time_join(t_out, t2))
                    at_sums[vt] = at_sums.get(vt, 0) + d
                for (v, at), s in at_sums.items():
                    if s:
                        out.append((combine(b, v), at, 0, which))
                        out_diffs.append(r * s)
            tally.proposals += seen
            return out, out_diffs

        return run


@attrs.frozen
class ValidatePhase(Phase):
    """Keep the proposals whose value ``val(record's binding)`` the extender has, diffs
    multiplied; records that candidate ``which`` proposed pass untouched (``-1``: none)."""

    extender: Extender
    which: int
    key: Callable[[Any], Any]
    val: Callable[[Any], Any]

    @property
    def extenders(self) -> tuple[Extender, ...]:  # type: ignore[override]
        """The one extender."""
        return (self.extender,)

    def route(self, rec: Record) -> Any:
        """The extender's key."""
        return self.key(rec[0])

    def runner(self, worker: int, tally: Tally, domain: TimeDomain) -> Runner:
        """Validate on ``worker``."""
        ext = self.extender
        keys = ext.registry.store(worker).keys
        key, val, strict, which = self.key, self.val, ext.strict, self.which
        total = domain.total
        join = domain.join

        def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
            out: list[Record] = []
            out_diffs: list[int] = []
            for rec, r in zip(recs, diffs):
                if rec[3] == which:
                    out.append(rec)
                    out_diffs.append(r)
                    continue
                b = rec[0]
                rows = keys.get(key(b))
                if rows is None:
                    continue
                hist = rows.by_val.get(val(b))
                if hist is None:
                    continue
                if total:  # every time met leaves t_out as it is
                    if hist.__class__ is tuple:
                        t2, d = hist
                        if t2 < t or (not strict and t2 == t):
                            out.append(rec)
                            out_diffs.append(r * d)
                        continue
                    d = _met(hist, t, strict)
                    if d:
                        out.append(rec)
                        out_diffs.append(r * d)
                    continue
                for at, s in _sum_upto(hist, t, strict, rec[1], join):
                    out.append(rec if at == rec[1] else (b, at, rec[2], rec[3]))
                    out_diffs.append(r * s)
            return out, out_diffs

        return run


@attrs.frozen
class IntersectPhase(Phase):
    """Count, propose and validate in one pass, for one worker (every index is local): per
    prefix, the candidate with the fewest updates as of ``t`` proposes, and each of its values
    is looked up in the others before anything is built for it."""

    extenders: tuple[Extender, ...]
    combine: Callable[[Any, Any], Any]

    def route(self, rec: Record) -> Any:
        """Unused: this phase only runs where every index is local (one worker)."""
        return None

    def runner(self, worker: int, tally: Tally, domain: TimeDomain) -> Runner:
        """Intersect on ``worker``: two candidates at int times by :func:`_intersect_two`
        (the usual case), anything else by :func:`_intersect_any`."""
        parts = [(e.registry.store(worker).keys, e.key, e.strict) for e in self.extenders]
        if len(parts) == 2 and domain.total:
            return _intersect_two(parts, self.combine, tally)
        return _intersect_any(parts, self.combine, tally, domain)


Part = tuple[dict[Any, "KeyRows"], Callable[[Any], Any], bool]
"""An extender on one worker: its store's rows by key, the key of a binding, ``strict``."""


def _intersect_any(
    parts: list[Part], combine: Callable[[Any, Any], Any], tally: Tally, domain: TimeDomain
) -> Runner:
    """:class:`IntersectPhase` over any number of candidates, at the times of ``domain``: per
    prefix, look each candidate's key up, and the one with the fewest updates as of ``t``
    proposes."""
    total = domain.total
    join = domain.join

    def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
        out: list[Record] = []
        out_diffs: list[int] = []
        seen = 0
        for rec, r in zip(recs, diffs):
            b = rec[0]
            found: list[tuple[KeyRows, bool]] = []
            best = best_n = -1
            for keys, key, strict in parts:
                rows = keys.get(key(b))
                if rows is None:
                    break
                times = rows.times  # rows.upto(t, strict), inline
                last = times[-1]
                if last < t or (not strict and last == t):
                    n = len(times)
                else:
                    n = bisect_left(times, t) if strict else bisect_right(times, t)
                    if not n:
                        break
                if best < 0 or n < best_n:
                    best, best_n = len(found), n
                found.append((rows, strict))
            else:
                seen += best_n
                rows, strict = found.pop(best)
                if total:
                    _intersect_counted(
                        b, rec[1], r, rows, best_n, found, t, combine, out, out_diffs
                    )
                else:
                    _intersect_general(
                        b, rec[1], r, rows, strict, found, t, combine, join, out, out_diffs
                    )
        tally.proposals += seen
        return out, out_diffs

    return run


def _intersect_two(parts: list[Part], combine: Callable[[Any, Any], Any], tally: Tally) -> Runner:
    """:class:`IntersectPhase` over two candidates at int times, agreeing with
    :func:`_intersect_any`: the keys and rows of a whole chunk are looked up by C-level maps,
    and a plain proposer's values are checked against the other's inline."""
    (keys_a, key_a, strict_a), (keys_b, key_b, strict_b) = parts

    def run(recs: list[Record], diffs: list[int], t: int) -> tuple[list[Record], list[int]]:
        out: list[Record] = []
        out_diffs: list[int] = []
        seen = 0
        bs = [rec[0] for rec in recs]
        found_a = map(keys_a.get, map(key_a, bs))
        found_b = map(keys_b.get, map(key_b, bs))
        for rec, r, ra, rb in zip(recs, diffs, found_a, found_b):
            if ra is None or rb is None:
                continue
            na = ra.upto(t, strict_a)
            if not na:
                continue
            nb = rb.upto(t, strict_b)
            if not nb:
                continue
            if na <= nb:
                rows, n, other, ostrict = ra, na, rb, strict_b
            else:
                rows, n, other, ostrict = rb, nb, ra, strict_a
            seen += n
            b = rec[0]
            if not rows.plain:
                found = [(other, ostrict)]
                _intersect_counted(b, rec[1], r, rows, n, found, t, combine, out, out_diffs)
                continue
            get = other.by_val.get
            t_out = rec[1]
            for v in rows.vals if n == len(rows.vals) else rows.vals[:n]:
                hist = get(v)
                if hist is None:
                    continue
                if hist.__class__ is tuple:
                    t2, d = hist
                    if not (t2 < t or (not ostrict and t2 == t)):
                        continue
                else:
                    d = _met(hist, t, ostrict)
                    if not d:
                        continue
                out.append((combine(b, v), t_out, 0, 0))
                out_diffs.append(r * d)
        tally.proposals += seen
        return out, out_diffs

    return run


def _intersect_counted(
    b: Any,
    t_out: Any,
    r: int,
    rows: KeyRows,
    n: int,
    found: list[tuple[KeyRows, bool]],
    t: Any,
    combine: Callable[[Any, Any], Any],
    out: list[Record],
    out_diffs: list[int],
) -> None:
    """One prefix at an int time: the proposer ``rows``' first ``n`` updates, summed per
    value, each multiplied by what every row of ``found`` has of it as of ``t`` (built only
    if none has nothing)."""
    pairs: Any
    if rows.plain:
        pairs = ((v, 1) for v in (rows.vals if n == len(rows.vals) else rows.vals[:n]))
    else:
        sums: dict[Any, int] = {}
        for v, d in zip(rows.vals[:n], rows.diffs[:n]):
            sums[v] = sums.get(v, 0) + d
        pairs = sums.items()
    for v, m in pairs:
        if not m:
            continue
        m *= r
        for other, ostrict in found:
            hist = other.by_val.get(v)
            if hist is None:
                m = 0
                break
            if hist.__class__ is tuple:
                t2, d = hist
                if not (t2 < t or (not ostrict and t2 == t)):
                    m = 0
                    break
                m *= d
            else:
                m *= _met(hist, t, ostrict)
                if not m:
                    break
        if m:
            out.append((combine(b, v), t_out, 0, 0))
            out_diffs.append(m)


def _intersect_general(
    b: Any,
    t_out: Any,
    r: int,
    rows: KeyRows,
    strict: bool,
    found: list[tuple[KeyRows, bool]],
    t: Any,
    combine: Callable[[Any, Any], Any],
    join: Callable[[Any, Any], Any],
    out: list[Record],
    out_diffs: list[int],
) -> None:
    """:class:`IntersectPhase` for one prefix at partially ordered times: each update met
    moves the result's time to its join (``join``, the domain's) with the update's."""
    n = rows.upto(t, strict)
    per_val: dict[Any, list[tuple[Any, int]]] = {}
    for v, t2, d in zip(rows.vals[:n], rows.times[:n], rows.diffs[:n]):
        per_val.setdefault(v, []).append((t2, d))
    for v, hist in per_val.items():
        terms = [(at, s * r) for at, s in _sum_upto(hist, t, strict, t_out, join)]
        for other, ostrict in found:
            if not terms:
                break
            ohist = other.by_val.get(v)
            if ohist is None:
                terms = []
                break
            sums: dict[Any, int] = {}
            for at, s in terms:
                for at2, s2 in _sum_upto(ohist, t, ostrict, at, join):
                    sums[at2] = sums.get(at2, 0) + s * s2
            terms = [(at, s) for at, s in sums.items() if s]
        if terms:
            bv = combine(b, v)
            for at, s in terms:
                out.append((bv, at, 0, 0))
                out_diffs.append(s)


def extension_phases(
    extenders: tuple[Extender, ...],
    combine: Callable[[Any, Any], Any],
    keyed: Callable[[Extender], Callable[[Any], Any]],
    val: Callable[[Any], Any],
    *,
    local: bool,
) -> list[Phase]:
    """The phases extending prefixes by the values every extender has (worst-case optimal):
    one :class:`IntersectPhase` when every index is ``local``; else a count per extender,
    the winner's proposal, and a validation by each of the others (``keyed(e)`` and ``val``
    give an extended prefix's key in ``e`` and its new value)."""
    if local and len(extenders) > 1:
        return [IntersectPhase(extenders, combine)]
    phases: list[Phase] = []
    if len(extenders) > 1:
        phases.extend(CountPhase(extenders, j) for j in range(len(extenders)))
    phases.append(ProposePhase(extenders, combine))
    if len(extenders) > 1:
        phases.extend(ValidatePhase(e, j, keyed(e), val) for j, e in enumerate(extenders))
    return phases


def identity(d: Any) -> Any:
    """``d`` itself: the emit of a rule whose bindings are its output (summed without a
    call per record)."""
    return d


_binding = itemgetter(0)

UNKNOWN = object()
"""What :meth:`RuleOperator.lowest` says before it can tell."""


class _Job:
    """Records at ``time`` under way: ``todo`` is a stack of ``(phase, records, diffs)``,
    ``results`` the output summed so far per time and datum (``held`` records went in)."""

    __slots__ = ("held", "results", "time", "todo")

    def __init__(self, time: Any, recs: list[Record], diffs: list[int]) -> None:
        self.time = time
        self.todo: list[tuple[int, list[Record], list[int]]] = [(0, recs, diffs)]
        self.results: dict[Any, dict[Any, int]] = {}
        self.held = 0


class RuleOperator(Operator):
    """Run phases of a delta rule on the records that arrive, once their indexes allow.

    Input 0 carries the records (or, with ``first``, the data that start the rule: each
    becomes ``(prepare(datum), t, 0, 0)``, or ``(datum, t, 0, 0)`` without ``prepare``);
    inputs ``1..`` are the outputs of the indexes the phases read, followed only for their
    frontiers. ``waits[i] = (port, strict)``: a record at ``t``
    waits until no element of that port's frontier is before ``t`` (``strict``) or not after
    it. The result goes on at ``t`` to the next operator of the rule, or, with ``emit``, as
    ``emit(binding)`` (``emit(record)`` with ``whole``) at its ``t_out``, summed per time and
    datum.
    """

    #: Records made per activation before the others may run (and what was summed is
    #: sent): a hub's round is spread over activations instead of held at once.
    BUDGET: ClassVar[int] = 100_000
    #: Records a phase takes at once (see :meth:`_run`): small enough that a hub key's
    #: proposals for a chunk stay a few megabytes, large enough that per-chunk costs vanish.
    CHUNK: ClassVar[int] = 64

    interest = Interest.ALWAYS

    def __init__(
        self,
        name: str,
        runners: list[Runner],
        waits: list[tuple[int, bool]],
        *,
        first: bool,
        emit: Callable[[Any], Any] | None,
        whole: bool = False,
        stores: Sequence[IndexStore] = (),
        prepare: Callable[[Any], Any] | None = None,
        route: Callable[[Record], Any] | None = None,
        layout: tuple[int, int] = (0, 1),
        total: bool,
    ) -> None:
        self.name = name
        #: The times are ints (the time domain's ``total``): one sum per chunk, and a time
        #: not ready yet holds back every later one.
        self.total = total
        self.prepare = prepare
        #: The key a record is exchanged by into this operator (``None``: not exchanged),
        #: and which of how many operators of its rule this is: what a checkpoint needs to
        #: hand stashed records back to the right worker and operator.
        self.route = route
        self.layout = layout
        self.runners = runners
        self.waits = waits
        self.first = first
        self.emit = emit
        self.whole = whole
        self.stash: dict[Any, tuple[list[Record], list[int]]] = {}
        self.jobs: deque[_Job] = deque()
        self.caps: list[Capability] = []
        # The records' frontier when last scheduled (None: not yet): with what is stashed
        # and under way, how far back this operator may still look (``lowest``).
        self.seen: tuple[Any, ...] | None = None
        for store in stores:
            store.readers.append(self)

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Keep capabilities for records a restored state stashed (none on a fresh start)."""
        self.caps = covering(capabilities, self.stash)

    def save(self, sink: StateSink) -> None:
        """Hand the records waiting for their indexes to a checkpoint.

        Raises:
            RuntimeError: records are still being worked through (not quiescent).
        """
        if self.jobs:
            msg = f"{self.name}: records still under way at a checkpoint"
            raise RuntimeError(msg)
        route = self.route
        recs = [rec for rs, _ in self.stash.values() for rec in rs]
        sink.rows(
            "stash",
            Rows({
                "key": [None] * len(recs) if route is None else [route(rec) for rec in recs],
                "rec": recs,
                "time": [t for t, (rs, _) in self.stash.items() for _ in rs],
                "diff": [r for _, ds in self.stash.values() for r in ds],
            }),
            None if route is None else "key",
        )  # fmt: skip
        sink.value("layout", list(self.layout))

    def load(self, source: StateSource) -> None:
        """Take this worker's share of the stashed records back.

        Raises:
            ValueError: there are some, and the rule was split into operators otherwise when
                they were saved (a checkpoint of one worker resumed on several, or back).
        """
        rows = source.rows("stash")
        if rows is None or not len(rows):
            return
        layout = source.value("layout")
        if layout is not None and tuple(layout) != self.layout:
            msg = (
                f"{self.name}: the checkpoint holds records of this rule waiting for later "
                f"times as operator {layout[0]} of {layout[1]}, and this job splits the rule "
                f"into {self.layout[1]}: resume it with a worker count on the same side of one"
            )
            raise ValueError(msg)
        cols = rows.columns
        for rec, t, r in zip(cols["rec"], cols["time"], cols["diff"]):
            slot = self.stash.get(t)
            if slot is None:
                self.stash[t] = ([rec], [r])
            else:
                slot[0].append(rec)
                slot[1].append(r)

    def lowest(self) -> Any:
        """The least time this operator may still look its indexes up as of (``None``: never
        again; ``UNKNOWN`` before it first ran). A stale answer is only lower."""
        if self.seen is None:
            return UNKNOWN
        owed = [*self.seen, *self.stash, *(job.time for job in self.jobs)]
        return min(owed) if owed else None

    def _records(self, t: Any, data: list[Any]) -> list[Record]:
        """The records starting the rule from ``data`` at ``t``."""
        prepare = self.prepare
        if prepare is None:
            return [(d, t, 0, 0) for d in data]
        return [(prepare(d), t, 0, 0) for d in data]

    def _ready(self, ctx: OperatorContext, t: Any) -> bool:
        for port, strict in self.waits:
            for f in ctx.frontier(port).elements:
                if f < t or (not strict and f == t):
                    return False
        return True

    def schedule(self, ctx: OperatorContext) -> None:
        """Queue what may run now, stash the rest; work through the queue within
        :attr:`BUDGET`, holding capabilities at the least times still owed."""
        stash = self.stash
        jobs = self.jobs
        changed = False
        self.seen = ctx.frontier(0).elements
        for t, batch in ctx.messages(0):
            recs = self._records(t, batch.data) if self.first else batch.data
            if t in stash:
                slot = stash[t]
                slot[0].extend(recs)
                slot[1].extend(batch.diffs)
            elif self._ready(ctx, t):
                jobs.append(_Job(t, recs, batch.diffs))
            else:
                stash[t] = (list(recs), list(batch.diffs))
                self._hold(ctx, t)
        if stash:
            for t in sorted(stash):
                if self._ready(ctx, t):
                    recs, diffs = stash.pop(t)
                    jobs.append(_Job(t, recs, diffs))
                    changed = True
                elif self.total:
                    break  # later int times wait for the same frontiers
        budget = self.BUDGET
        while jobs and budget > 0:
            job = jobs[0]
            budget = self._work(ctx, job, budget)
            if not job.todo:
                jobs.popleft()
                changed = True
        if jobs:
            for job in jobs:
                self._hold(ctx, job.time)
            ctx.activate()
        if changed:
            self._rehold()

    def _hold(self, ctx: OperatorContext, t: Any) -> None:
        """Keep a capability at or before ``t`` (one per least time owed: the progress
        tracker's work grows with the capabilities held)."""
        caps = self.caps
        for cap in caps:
            if less_equal(cap.time, t):
                return
        keep = [ctx.capability(t)]
        for cap in caps:
            if less_equal(t, cap.time):
                cap.drop()
            else:
                keep.append(cap)
        self.caps = keep

    def _rehold(self) -> None:
        """Move the capabilities up to the least times still owed."""
        caps = self.caps
        owed = Antichain([*self.stash, *(job.time for job in self.jobs)]).elements
        new = [next(c for c in caps if less_equal(c.time, t)).delayed(t) for t in owed]
        for cap in caps:
            cap.drop()
        self.caps = new

    def _work(self, ctx: OperatorContext, job: _Job, budget: int) -> int:
        """Run the phases on ``job``'s records, depth first in chunks of :attr:`CHUNK` (what
        one phase makes goes through the rest before the next chunk, so a hub's proposals
        are never all held at once) until ``budget`` records were made; returns what is left
        of it. Results are summed, and sent when many or when the job is done."""
        runners = self.runners
        last = len(runners)
        emit = self.emit
        results = job.results
        todo = job.todo
        t = job.time
        while todo and budget > 0:
            phase, recs, diffs = todo.pop()
            if len(recs) > self.CHUNK:
                chunks = range(0, len(recs), self.CHUNK)
                todo.extend(
                    (phase, recs[i : i + self.CHUNK], diffs[i : i + self.CHUNK])
                    for i in reversed(chunks)
                )
                continue
            if phase < last:
                out, out_diffs = runners[phase](recs, diffs, t)
                budget -= len(out)
                if out:
                    todo.append((phase + 1, out, out_diffs))
            elif emit is None:
                ctx.send(0, t, UpdateBatch(recs, diffs))
            else:
                self._sum(results, recs, diffs, t)
                job.held += len(recs)
                if job.held > self.BUDGET:
                    self._flush(ctx, job)
        if not todo or budget <= 0:
            self._flush(ctx, job)
        return budget

    def _sum(
        self, results: dict[Any, dict[Any, int]], recs: list[Record], diffs: list[int], t: Any
    ) -> None:
        """Add what ``recs`` emit to ``results``, per time ``t_out`` and datum. At an int time
        every record's ``t_out`` is ``t`` (the times it met are not after it), so one sum
        takes the whole chunk, its data emitted by C-level maps."""
        emit = self.emit
        assert emit is not None
        if self.total:
            sums = results.get(t)
            if sums is None:
                sums = results[t] = {}
            get = sums.get
            data: Iterable[Any]
            if self.whole:
                data = map(emit, recs)
            else:
                data = map(_binding, recs)
                if emit is not identity:
                    data = map(emit, data)
            for d, r in zip(data, diffs):
                sums[d] = get(d, 0) + r
            return
        for rec, r in zip(recs, diffs):
            at = rec[1]
            sums = results.get(at)
            if sums is None:
                sums = results[at] = {}
            d = emit(rec) if self.whole else emit(rec[0])
            sums[d] = sums.get(d, 0) + r

    def _flush(self, ctx: OperatorContext, job: _Job) -> None:
        """Send the results summed so far."""
        results = job.results
        for at in sorted(results) if len(results) > 1 else results:
            self._send(ctx, at, results[at])
        results.clear()
        job.held = 0

    @staticmethod
    def _send(ctx: OperatorContext, t: Any, sums: dict[Any, int]) -> None:
        """Send the non-zero sums at ``t``, marked consolidated."""
        if 0 in sums.values():
            data = [d for d, r in sums.items() if r]
            if data:
                ctx.send(0, t, UpdateBatch(data, [r for r in sums.values() if r], True))
        elif sums:
            ctx.send(0, t, UpdateBatch(list(sums), list(sums.values()), True))
