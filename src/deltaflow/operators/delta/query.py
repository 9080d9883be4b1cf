"""``multiway_join``: a conjunctive query maintained by worst-case optimal delta queries.

The query ``head :- atom_1, ..., atom_n`` changes, when atom ``i`` changes, by the *delta
rule* ``d_i = d(atom_i) ⋈ (every other atom)``. Each rule starts from the changed tuples of its
atom (their variables bound) and extends the binding one step at a time; a step looks the
other atoms up in their indexes (:mod:`.index`), as of the time of the change: atoms before
``i`` not after it, atoms after ``i`` strictly before it (:mod:`.lookup`), so that changes to
several atoms at one time are counted once. Nothing but the indexes of the inputs is kept.

**Variable order.** Each rule binds its own atom's variables first. Then, while atoms are
left: an atom whose variables are all bound only validates (a lookup of its tuple); otherwise
the next variables to bind are the unbound variables of one atom, chosen among the atoms that
share a bound variable (any atom if none does: a cross product), with the fewest unbound
variables (one at a time when possible), then the most atoms with exactly those unbound
variables (more atoms to intersect), then the earliest atom. The atoms with exactly those
unbound variables are the step's *candidates*: per prefix, each counts how many values its
index has for the prefix's key, the one with the fewest proposes them, and the others
validate them (worst-case optimal: never more proposals than the smallest relation offers).
Atoms left with only some of those variables unbound validate after. Each atom is multiplied
in exactly once, at the step that binds its last variables, so counts multiply.

Indexes are shared: every atom over one collection looked up by the same columns reads the
same index, in every rule and every query of the pipeline.

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> tri = lambda e: df.multiway_join(("a", "b", "c"), (e, ("a", "b")), (e, ("b", "c")),
    ...                                  (e, ("a", "c")))
    >>> example(tri, e=[((1, 2), 0, 1), ((2, 3), 0, 1), ((1, 3), 1, 1)])
    [((1, 2, 3), 1, 1)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from ..collection import Collection
from ..scope import innermost_scope
from .build import add_rule, index_of
from .lookup import Extender, Phase, ValidatePhase, extension_phases, identity

__all__ = ["multiway_join"]


def _variables(what: str, variables: object) -> tuple[str, ...]:
    """``variables`` as a tuple of names (a name alone is a tuple of one)."""
    names = (variables,) if isinstance(variables, str) else variables
    if not isinstance(names, (tuple, list)) or not all(isinstance(v, str) and v for v in names):
        msg = f"multiway_join: {what} must be a variable name or a tuple of them, got {variables!r}"
        raise TypeError(msg)
    return tuple(names)


def _getter(positions: Sequence[int]) -> Callable[[Any], Any]:
    """The values at ``positions`` of a tuple: nothing (``()``), one bare, or a tuple."""
    if not positions:
        return _unit
    return itemgetter(*positions)


def _unit(_b: Any) -> tuple[()]:
    return ()


def _extend_one(b: tuple[Any, ...], v: Any) -> tuple[Any, ...]:
    return (*b, v)


def _extend_many(b: tuple[Any, ...], v: tuple[Any, ...]) -> tuple[Any, ...]:
    return b + v


class _Atom:
    """One atom: its collection with repeated variables resolved (data over ``dvars``, the
    distinct variables in order: tuples, or bare values for one variable), and its index
    reads."""

    def __init__(self, number: int, collection: Collection, variables: tuple[str, ...]) -> None:
        self.number = number
        self.variables = variables
        self.label = f"atom {number} {variables!r}"
        dvars = tuple(dict.fromkeys(variables))
        self.dvars = dvars
        self.collection = collection
        arity = len(variables)
        label = self.label
        if dvars != variables:
            cols = [variables.index(v) for v in dvars]
            same = [
                (variables.index(v), i) for i, v in enumerate(variables) if variables.index(v) != i
            ]
            take = _getter(cols)

            def resolve(d: Any) -> list[Any]:
                _check(d, arity, label)
                return [take(d)] if all(d[a] == d[b] for a, b in same) else []

            self.collection = collection.flat_map(resolve)

    def split(self, key_cols: tuple[int, ...], val_cols: tuple[int, ...]) -> Any:
        """``split(d) -> (key, val)`` for this atom's resolved data, checking its shape."""
        n = len(self.dvars)
        label = self.label
        if n == 1:
            key_of = _unit if not key_cols else identity
            val_of = _unit if not val_cols else identity
            return lambda d: (key_of(d), val_of(d))
        key_get, val_get = _getter(key_cols), _getter(val_cols)

        def split(d: Any) -> tuple[Any, Any]:
            if d.__class__ is not tuple or len(d) != n:
                _check(d, n, label)
            return key_get(d), val_get(d)

        return split

    def extender(
        self, bound: list[str], key_vars: Sequence[str], val_vars: Sequence[str], strict: bool
    ) -> Extender:
        """Looking this atom up by ``key_vars`` (bound, at their places in ``bound``) for
        ``val_vars``."""
        dvars = self.dvars
        key_cols = tuple(dvars.index(v) for v in key_vars)
        val_cols = tuple(dvars.index(v) for v in val_vars)
        split = self.split(key_cols, val_cols)
        registry = index_of(
            self.collection,
            ("columns", len(dvars), key_cols, val_cols),
            split,
            lambda d: split(d)[0],
            f"{self.label} by {key_vars!r}",
        )
        return Extender(registry, _getter([bound.index(v) for v in key_vars]), strict)


def _check(d: Any, arity: int, label: str) -> None:
    """Raise ``TypeError`` unless ``d`` is a tuple of ``arity`` values."""
    if not isinstance(d, tuple) or len(d) != arity:
        msg = f"multiway_join: {label} holds tuples of {arity} values, got {d!r}"
        raise TypeError(msg)


def _key_of(e: Extender) -> Callable[[Any], Any]:
    """An extended binding's key in ``e``: the prefix's places are where they were."""
    return e.key


def _rule(
    atoms: list[_Atom], i: int, canon: list[str], head: tuple[str, ...], local: bool
) -> tuple[list[Phase], Callable[[Any], Any]]:
    """The phases of rule ``i`` (see the module docstring for the order), and its emit."""
    bound = list(atoms[i].dvars)
    unused = [a for a in atoms if a.number != i]
    phases: list[Phase] = []
    while unused:
        for atom in [a for a in unused if all(v in bound for v in a.dvars)]:
            # Fully bound: a lookup of its tuple, by all but its last column.
            ext = atom.extender(bound, atom.dvars[:-1], atom.dvars[-1:], atom.number > i)
            phases.append(ValidatePhase(ext, -1, ext.key, _getter([bound.index(atom.dvars[-1])])))
            unused.remove(atom)
        if not unused:
            break
        unbound = {
            a.number: tuple(v for v in canon if v in a.dvars and v not in bound) for a in unused
        }
        same = {u: sum(1 for x in unbound.values() if x == u) for u in unbound.values()}
        # Connected first, then fewest unbound variables, most atoms sharing them, earliest.
        _, chosen = min(
            (
                (
                    not any(v in bound for v in a.dvars),
                    len(unbound[a.number]),
                    -same[unbound[a.number]],
                ),
                a.number,
            )
            for a in unused
        )
        step = unbound[chosen]
        candidates = [a for a in unused if unbound[a.number] == step]
        partial = [
            a for a in unused if unbound[a.number] != step and set(unbound[a.number]) < set(step)
        ]
        exts = tuple(
            a.extender(bound, [v for v in a.dvars if v in bound], step, a.number > i)
            for a in candidates
        )
        partial_exts = [
            a.extender(bound, [v for v in a.dvars if v in bound], unbound[a.number], a.number > i)
            for a in partial
        ]
        extended = bound + list(step)
        phases += extension_phases(
            exts,
            _extend_one if len(step) == 1 else _extend_many,
            _key_of,
            _getter([extended.index(v) for v in step]),
            local=local,
        )
        for a, e in zip(partial, partial_exts):
            val = _getter([extended.index(v) for v in unbound[a.number]])
            phases.append(ValidatePhase(e, -1, e.key, val))
        bound = extended
        for a in candidates + partial:
            unused.remove(a)
    if len(head) > 1 and list(head) == bound:
        return phases, identity
    return phases, _getter([bound.index(v) for v in head])


def multiway_join(
    head: str | tuple[str, ...], *atoms: tuple[Collection, str | tuple[str, ...]]
) -> Collection:
    """The natural join of ``atoms``, projected on ``head``, maintained by worst-case optimal
    delta queries.

    Args:
        head: the output variables: a tuple of names, or one name (the output then holds bare
            values, not 1-tuples).
        atoms: ``(collection, variables)`` pairs. The collection holds tuples as long as its
            variables (bare values for one variable); a variable repeated inside one atom
            means equality.

    Returns:
        A collection of head tuples; at every time, the count of each is the sum, over the
        assignments of the variables that produce it, of the product of the atoms' counts.

    Raises:
        ValueError: an empty head, no atoms, or a head variable that no atom has (named).
        TypeError: an atom that is not ``(collection, variables)``; at run time, a datum of
            an atom that is not a tuple of its variables' length (naming the atom).

    Each atom's changes drive one delta rule (in atom order, so that simultaneous changes
    count once). A rule binds its atom's variables, then extends prefixes one step at a time:
    an atom whose variables are all bound validates; otherwise the next variables are the
    unbound ones of an atom sharing a bound variable, fewest first (one at a time when
    possible), then those that most atoms have left unbound, then the earliest atom's. Per
    prefix, the atom with the fewest candidates for them proposes and the others validate.
    Only indexes of the inputs are kept, shared by every rule.

    >>> import deltaflow as df
    >>> from deltaflow.testing import example
    >>> two_hops = lambda e: df.multiway_join(("a", "c"), (e, ("a", "b")), (e, ("b", "c")))
    >>> example(two_hops, e=[((1, 2), 0, 1), ((2, 3), 0, 2), ((1, 4), 1, 1), ((4, 3), 1, 1)])
    [((1, 3), 0, 2), ((1, 3), 1, 1)]
    """
    head_vars = _variables("head", head)
    if not head_vars:
        msg = "multiway_join: the head is empty; name at least one output variable"
        raise ValueError(msg)
    if not atoms:
        msg = "multiway_join: no atoms; give (collection, variables) pairs"
        raise ValueError(msg)
    parsed = _parse_atoms(atoms)
    first = parsed[0][0]
    for coll, _ in parsed[1:]:
        first.builder.check_same_pipeline(coll)
    canon = list(dict.fromkeys(v for _, vs in parsed for v in vs))
    missing = [v for v in head_vars if v not in canon]
    if missing:
        msg = f"multiway_join: head variable {missing[0]!r} appears in no atom (atoms have {canon})"
        raise ValueError(msg)
    scope = innermost_scope([c for c, _ in parsed])
    resolved = [_Atom(n, c.enter_scope(scope), vs) for n, (c, vs) in enumerate(parsed)]
    outputs = []
    for i, res in enumerate(resolved):
        phases, emit = _rule(resolved, i, canon, head_vars, first.builder.workers == 1)
        n = len(res.dvars)
        label = res.label

        def start(d: Any, n: int = n, label: str = label) -> tuple[Any, ...]:
            if n == 1:
                return (d,)
            if d.__class__ is not tuple or len(d) != n:
                _check(d, n, label)
                return tuple(d)
            return d

        name = f"multiway_join rule {i} ({label})"
        if phases:
            outputs.append(add_rule(res.collection, phases, emit, name, prepare=start))
        else:
            outputs.append(res.collection.map(start).map(emit))
    return outputs[0].concat(*outputs[1:]) if len(outputs) > 1 else outputs[0]


def _parse_atoms(
    atoms: tuple[tuple[Collection, str | tuple[str, ...]], ...],
) -> list[tuple[Collection, tuple[str, ...]]]:
    """Each atom as ``(collection, variables)``, checked (naming the atom when it is not)."""
    parsed: list[tuple[Collection, tuple[str, ...]]] = []
    for n, given in enumerate(atoms):
        atom: object = given
        if not (isinstance(atom, tuple) and len(atom) == 2 and isinstance(atom[0], Collection)):
            msg = f"multiway_join: atom {n} must be a (collection, variables) pair, got {atom!r}"
            raise TypeError(msg)
        variables = _variables(f"atom {n}'s variables", atom[1])
        if not variables:
            msg = f"multiway_join: atom {n} has no variables"
            raise ValueError(msg)
        parsed.append((atom[0], variables))
    return parsed
