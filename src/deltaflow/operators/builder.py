"""What a pipeline's ``build()`` records: the :class:`Scope` each collection lives in and the
:class:`DataflowBuilder` holding the graph, inputs, outputs and probes of one job.

A :class:`~deltaflow.operators.collection.Collection` names one node of the builder's graph in
one scope; the scheduler turns the builder into running actors.

    >>> builder = DataflowBuilder(workers=2)
    >>> xs = builder.new_input("xs")
    >>> len(builder.feeds["xs"]), xs.scope is builder.top
    (2, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import attrs

from ..framework.time_domain import TimeDomain, domain_for_depth
from .dataflow import DataflowSpec, Edge
from .io import InputFeed, InputOperator, OutputOperator, OutputStore, ProbeHandle

if TYPE_CHECKING:
    from .collection import Arranged, Collection

__all__ = ["DataflowBuilder", "Scope"]


@attrs.define(eq=False)
class Scope:
    """A (possibly nested) timestamp scope: depth 0 is the top, with ``int`` times.

    A collection's scope is ``collection.scope``; a loop's body runs in a scope nested in the
    one the loop was started in, one ``Product`` level deeper.

    >>> top = Scope()
    >>> inner = Scope(Scope(top, "outer"), "inner")
    >>> inner.depth, inner.describe()
    (2, "'inner' in 'outer'")
    """

    parent: Scope | None = None
    name: str = "top"

    @property
    def depth(self) -> int:
        """How many ``Product`` levels the scope's times have."""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def domain(self) -> TimeDomain:
        """The shape of the scope's times, chosen from its depth: what its operators and
        traces compute with (:mod:`deltaflow.framework.time_domain`)."""
        return domain_for_depth(self.depth)

    def ancestors(self) -> list[Scope]:
        """This scope and its parents, innermost first."""
        out: list[Scope] = []
        s: Scope | None = self
        while s is not None:
            out.append(s)
            s = s.parent
        return out

    def site(self) -> str | None:
        """Where the user made the scope (``file:line``), when known."""
        return None

    def describe(self) -> str:
        """The scope as errors name it: its name and where it was made, then the same for
        every loop scope it is nested in (two ``iterate`` calls make two scopes of one name)."""
        parts = []
        for s in self.ancestors()[:-1]:
            site = s.site()
            parts.append(f"{s.name!r}" if site is None else f"{s.name!r} (made at {site})")
        return " in ".join(parts) or "the top scope"


@attrs.define(eq=False)
class DataflowBuilder:
    """Everything recorded while a pipeline's ``build()`` runs, for one job.

    Holds the graph, the input feeds (one per worker and input), the output stores and the
    probes; the scheduler turns it into running actors.
    """

    workers: int = 1
    spec: DataflowSpec = attrs.field(factory=DataflowSpec)
    feeds: dict[str, list[InputFeed]] = attrs.field(factory=dict)
    stores: dict[str, OutputStore] = attrs.field(factory=dict)
    probes: list[ProbeHandle] = attrs.field(factory=list)
    top: Scope = attrs.field(factory=Scope)
    #: ``build`` returned one collection (the output ``"output"``), not a dict of them.
    single_output: bool = True
    #: Nodes added for how the job is laid out, not by ``build`` (the exchange before each
    #: output of a peer): a checkpoint's description of the pipeline leaves them out.
    layout_nodes: set[int] = attrs.field(factory=set)
    _entered: dict[tuple[int, int, int], Collection] = attrs.field(factory=dict)
    _arranged: dict[tuple[int, int, bool], Arranged] = attrs.field(factory=dict)
    #: The loop scopes whose bodies are being built, outermost first (see :meth:`building`).
    _open: list[Scope] = attrs.field(factory=list)

    @property
    def open_scope(self) -> Scope:
        """The innermost loop scope whose body is being built (the top scope outside any)."""
        return self._open[-1] if self._open else self.top

    def open_body(self, scope: Scope) -> None:
        """Mark ``scope``'s body as being built: loops started meanwhile nest in it."""
        self._open.append(scope)

    def close_body(self, scope: Scope) -> None:
        """``scope``'s body is built (see :meth:`open_body`)."""
        if scope in self._open:
            self._open.remove(scope)

    @contextmanager
    def building(self, scope: Scope) -> Iterator[None]:
        """:meth:`open_body` for the ``with`` block, :meth:`close_body` after it."""
        self.open_body(scope)
        try:
            yield
        finally:
            self.close_body(scope)

    def loop_parent(self, scope: Scope, what: str) -> Scope:
        """The scope a loop started from a collection of ``scope`` nests in.

        A loop started while another loop's body is being built nests in that body, whatever
        the scope of the collection it starts from (the collection enters it); started from a
        collection of a scope nested deeper still, it nests there.

        Raises:
            ValueError: ``scope`` neither encloses the open loop scope nor is nested in it (a
                loop's collection kept and used in another loop).
        """
        current = self.open_scope
        if scope is current or scope in current.ancestors():
            return current
        if current in scope.ancestors():
            return scope
        msg = (
            f"{what} started from a collection of scope {scope.describe()} while building "
            f"the body of scope {current.describe()}: a loop's collections can be used only "
            "inside it (and in loops nested in it); .leave() it to a scope enclosing both"
        )
        raise ValueError(msg)

    def new_input(self, name: str) -> Collection:
        """Add the source node of input ``name``."""
        feeds = [InputFeed() for _ in range(self.workers)]
        self.feeds[name] = feeds
        node = self.spec.add_node(
            f"input:{name}",
            factory=lambda w, _n: InputOperator(name, feeds[w]),
            inputs=[],
            outputs=1,
        )
        from .collection import Collection  # collection.py builds on this module

        return Collection(self, node, 0, self.top)

    def new_output(self, name: str, collection: Collection) -> OutputStore:
        """Add the sink node of output ``name``."""
        if collection.scope is not self.top:
            msg = (
                f"output {name!r} is inside an iteration scope; "
                "call .leave() (or return the result of iterate) instead"
            )
            raise ValueError(msg)
        store = OutputStore(name)
        self.stores[name] = store
        self.spec.add_node(
            f"output:{name}",
            factory=lambda _w, _n: OutputOperator(store),
            inputs=[Edge(collection.node, collection.port)],
            outputs=0,
        )
        return store
