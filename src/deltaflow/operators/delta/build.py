"""Adding indexes and delta rules to a dataflow under construction.

:func:`index_of` adds (once per collection and way of splitting it) the index node that every
reader shares. :func:`add_rule` adds the operators of one rule: with one worker a single
:class:`~.rule.RuleOperator` runs every phase; with several, each phase is an operator of its
own, its records exchanged by the key that phase looks up (so each runs on the worker whose
part of the index holds that key).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from ..dataflow import NodeTraits, Pact
from .index import IndexOperator, IndexRegistry, IndexStore
from .lookup import Phase, Tally
from .rule import RuleOperator

if TYPE_CHECKING:
    from ..builder import DataflowBuilder
    from ..collection import Collection
    from ..dataflow import DataflowSpec
    from .index import Split

__all__ = ["add_rule", "index_of", "statistics"]

# Per pipeline under construction: its indexes by (collection node, port, way of splitting).
_INDEXES: weakref.WeakKeyDictionary[DataflowBuilder, dict[tuple[Any, ...], IndexRegistry]] = (
    weakref.WeakKeyDictionary()
)


def index_of(
    collection: Collection, how: Hashable, split: Split, key: Callable[[Any], Any], label: str
) -> IndexRegistry:
    """The index of ``collection`` split by ``split`` into ``(key, val)`` (``key(d)`` is the
    key alone, for routing); ``how`` names the way of splitting, so that asking again with
    the same ``how`` returns the same index."""
    cache = _INDEXES.setdefault(collection.builder, {})
    ident = (collection.node, collection.port, how)
    registry = cache.get(ident)
    if registry is not None:
        return registry
    registry = IndexRegistry(f"index({label})")

    def factory(w: int, _n: int) -> IndexOperator:
        store = registry.stores[w] = IndexStore()
        return IndexOperator(registry.name, store, split)

    registry.output = collection.builder.add(
        registry.name, factory, [collection], pacts=[Pact(key)], traits=NodeTraits(index=registry)
    )
    cache[ident] = registry
    return registry


def add_rule(
    start: Collection,
    phases: list[Phase],
    emit: Callable[[Any], Any],
    name: str,
    *,
    whole: bool = False,
    prepare: Callable[[Any], Any] | None = None,
) -> Collection:
    """The operators running ``phases`` on the data of ``start`` (each datum the first
    binding, or ``prepare(datum)``), whose output is ``emit(binding)`` of the records that
    get through (``emit(record)`` with ``whole``)."""
    tally = Tally()
    domain = start.scope.domain
    groups = [phases] if start.builder.workers == 1 else [[p] for p in phases]
    current = start
    for i, group in enumerate(groups):
        first, last = i == 0, i == len(groups) - 1
        indexes: list[IndexRegistry] = []
        waits: list[tuple[int, bool]] = []
        for phase in group:
            for ext in phase.extenders:
                if ext.registry not in indexes:
                    indexes.append(ext.registry)
                wait = (1 + indexes.index(ext.registry), ext.strict)
                if wait not in waits:
                    waits.append(wait)
        route = group[0].route
        key = _start_key(route, prepare) if first else route
        label = name if len(groups) == 1 else f"{name}[{i}]"

        def factory(
            w: int,
            _n: int,
            group: list[Phase] = group,
            waits: list[tuple[int, bool]] = waits,
            first: bool = first,
            last: bool = last,
            label: str = label,
            indexes: list[IndexRegistry] = indexes,
            position: int = i,
        ) -> RuleOperator:
            runners = [p.runner(w, tally, domain) for p in group]
            stores = [r.store(w) for r in indexes]
            return RuleOperator(
                label,
                runners,
                waits,
                first=first,
                emit=emit if last else None,
                whole=whole,
                stores=stores,
                prepare=prepare if first else None,
                route=group[0].route,
                layout=(position, len(groups)),
                total=domain.total,
            )

        inputs = [current, *(r.output for r in indexes)]
        pacts = [Pact(key), *(Pact() for _ in indexes)]
        traits = NodeTraits(tally=tally)
        current = current.builder.add(label, factory, inputs, pacts=pacts, traits=traits)
    return current


def _start_key(
    route: Callable[[Any], Any], prepare: Callable[[Any], Any] | None
) -> Callable[[Any], Any]:
    """The routing key of a datum that starts a rule: its first phase's, of its binding."""
    if prepare is None:
        return lambda d: route((d, None, 0, 0))
    return lambda d: route((prepare(d), None, 0, 0))


def statistics(spec: DataflowSpec) -> dict[str, int]:
    """Counts of a dataflow for ``Job.statistics()``: ``arrangements`` (arrangements and
    indexes, each once however many operators read it) and ``proposals`` (candidates the
    delta rules' proposing phases looked at, over every worker of this process)."""
    traits = [n.traits for n in spec.nodes]
    arrangements = sum(1 for t in traits if t.arrangement is not None or t.index is not None)
    proposals = sum(t.tally.proposals for t in traits if t.tally is not None)
    return {"arrangements": arrangements, "proposals": proposals}
