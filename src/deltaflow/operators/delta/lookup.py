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

With product times an update met at ``t2`` moves ``t_out`` to ``join(t_out, t2)``, so a
proposal or validation yields one record per distinct resulting time.

    >>> _sum_upto([(1, 2), (3, 5), (4, 7)], 3, strict=True, t_out=3)
    [(3, 2)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ...framework.lattice import join as time_join
from ..base import Interest, Operator, UpdateBatch

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from ..base import Capability, OperatorContext
    from .index import IndexRegistry, IndexStore

__all__ = [
    "CountPhase",
    "Extender",
    "Phase",
    "ProposePhase",
    "RuleOperator",
    "Runner",
    "Tally",
    "ValidatePhase",
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
    hist: Sequence[tuple[Time, int]], t: Time, strict: bool, t_out: Time
) -> list[tuple[Time, int]]:
    """The non-zero sums of ``hist``'s diffs at times before (or not after) ``t``, per
    resulting time ``join(t_out, t2)``."""
    sums: dict[Any, int] = {}
    for t2, d in hist:
        if t2 < t or (not strict and t2 == t):
            at = t_out if t2.__class__ is int else time_join(t_out, t2)
            sums[at] = sums.get(at, 0) + d
    return [(at, s) for at, s in sums.items() if s]


class Phase:
    """One step of a rule: how its records are routed between workers, and what it does."""

    extenders: tuple[Extender, ...] = ()

    def route(self, rec: Record) -> Any:
        """The key whose worker runs this phase for ``rec``."""
        raise NotImplementedError

    def runner(self, worker: int, tally: Tally) -> Runner:
        """This phase on ``worker`` (its index stores resolved)."""
        raise NotImplementedError


@attrs.frozen
class CountPhase(Phase):
    """Candidate ``which``'s count for each prefix; the least so far wins (the first sets it)."""

    extenders: tuple[Extender, ...]
    which: int

    def route(self, rec: Record) -> Any:
        """The candidate's key."""
        return self.extenders[self.which].key(rec[0])

    def runner(self, worker: int, tally: Tally) -> Runner:
        """Count on ``worker``."""
        ext = self.extenders[self.which]
        count = ext.registry.store(worker).count
        key, strict, which = ext.key, ext.strict, self.which

        def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
            out = []
            for rec in recs:
                b = rec[0]
                n = count(key(b), t, strict)
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

    def runner(self, worker: int, tally: Tally) -> Runner:
        """Propose on ``worker``."""
        exts = self.extenders
        stores: list[IndexStore] = [e.registry.store(worker) for e in exts]
        combine = self.combine

        def run(recs: list[Record], diffs: list[int], t: Any) -> tuple[list[Record], list[int]]:
            out: list[Record] = []
            out_diffs: list[int] = []
            total = t.__class__ is int
            seen = 0
            for rec, r in zip(recs, diffs):
                b, t_out, _, which = rec
                ext = exts[which]
                rows = stores[which].keys.get(ext.key(b))
                if rows is None:
                    continue
                n = rows.upto(t, ext.strict)
                seen += n
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

    def runner(self, worker: int, tally: Tally) -> Runner:
        """Validate on ``worker``."""
        ext = self.extender
        keys = ext.registry.store(worker).keys
        key, val, strict, which = self.key, self.val, ext.strict, self.which

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
                if len(hist) == 1:  # the usual case, inline
                    t2, d = hist[0]
                    if t2 < t or (not strict and t2 == t):
                        at = rec[1] if t2.__class__ is int else time_join(rec[1], t2)
                        out.append(rec if at == rec[1] else (b, at, rec[2], rec[3]))
                        out_diffs.append(r * d)
                    continue
                for at, s in _sum_upto(hist, t, strict, rec[1]):
                    out.append(rec if at == rec[1] else (b, at, rec[2], rec[3]))
                    out_diffs.append(r * s)
            return out, out_diffs

        return run


class RuleOperator(Operator):
    """Run phases of a delta rule on the records that arrive, once their indexes allow.

    Input 0 carries the records (or, with ``first``, the data that start the rule: each
    becomes ``(datum, t, 0, 0)``); inputs ``1..`` are the outputs of the indexes the phases
    read, followed only for their frontiers. ``waits[i] = (port, strict)``: a record at ``t``
    waits until no element of that port's frontier is before ``t`` (``strict``) or not after
    it. The result goes on at ``t`` to the next operator of the rule, or, with ``emit``, as
    ``emit(binding)`` (``emit(record)`` with ``whole``) at its ``t_out``, summed per time and
    datum.
    """

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
    ) -> None:
        self.name = name
        self.runners = runners
        self.waits = waits
        self.first = first
        self.emit = emit
        self.whole = whole
        self.stash: dict[Any, tuple[list[Record], list[int], Capability]] = {}

    def _ready(self, ctx: OperatorContext, t: Any) -> bool:
        for port, strict in self.waits:
            for f in ctx.frontier(port).elements:
                if f < t or (not strict and f == t):
                    return False
        return True

    def schedule(self, ctx: OperatorContext) -> None:
        """Run what may run now, stash the rest."""
        stash = self.stash
        for t, batch in ctx.messages(0):
            recs = [(d, t, 0, 0) for d in batch.data] if self.first else batch.data
            if t in stash:
                slot = stash[t]
                slot[0].extend(recs)
                slot[1].extend(batch.diffs)
            elif self._ready(ctx, t):
                self._run(ctx, t, recs, batch.diffs)
            else:
                stash[t] = (list(recs), list(batch.diffs), ctx.capability(t))
        if stash:
            for t in sorted(stash):
                if self._ready(ctx, t):
                    recs, diffs, cap = stash.pop(t)
                    self._run(ctx, t, recs, diffs)
                    cap.drop()

    def _run(self, ctx: OperatorContext, t: Any, recs: list[Record], diffs: list[int]) -> None:
        for run in self.runners:
            if not recs:
                return
            recs, diffs = run(recs, diffs, t)
        if not recs:
            return
        emit = self.emit
        if emit is None:
            ctx.send(0, t, UpdateBatch(recs, diffs))
            return
        out: dict[Any, dict[Any, int]] = {}
        whole = self.whole
        for rec, r in zip(recs, diffs):
            slot = out.get(rec[1])
            if slot is None:
                slot = out[rec[1]] = {}
            d = emit(rec) if whole else emit(rec[0])
            slot[d] = slot.get(d, 0) + r
        for at in sorted(out) if len(out) > 1 else out:
            sums = out[at]
            data = [d for d, r in sums.items() if r]
            if data:
                ctx.send(0, at, UpdateBatch(data, [r for r in sums.values() if r], True))
