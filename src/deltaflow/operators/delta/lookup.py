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
not after it. A :class:`~.rule.RuleOperator` stashes what arrives too early, under a
capability, and runs it when its index frontiers allow.

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
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import attrs

from .index import updates_of

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ...framework.time_domain import TimeDomain
    from .index import History, IndexRegistry, IndexStore, KeyRows

__all__ = [
    "CountPhase",
    "Extender",
    "IntersectPhase",
    "Phase",
    "ProposePhase",
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
