"""A picture of the dataflow that runs: the planned graph as Mermaid or Graphviz DOT.

What is drawn is the *plan*, not the pipeline as written: one box per actor after fusion
(``map -> filter`` is one box), arrangements absorbed into their reader listed in it, shared
arrangements marked with their readers, loop scopes as nested groups (named by where the
loop was written), and edges that route
data between workers by key drawn dashed and labelled ``exchange``. Given a finished job,
each box also shows the records the operator received and the updates its arrangements hold
(``statistics()``), so one can see where the work went.

    >>> import deltaflow as df
    >>> class Counts(df.Pipeline):
    ...     def build(self, words):
    ...         return words.map(lambda w: (w, ())).count()
    >>> print(graph(Counts(), workers=2))
    flowchart TD
        n0["input:words<br/>+ map(...)"]
        n1["count<br/>+ arrange_by_key"]
        n2["output:output"]
        n0 -. exchange .-> n1
        n1 --> n2
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..operators.pipeline import Pipeline
from .local.plan import Plan, make_plan

if TYPE_CHECKING:
    from ..operators.dataflow import DataflowSpec
    from .runtime import Job

__all__ = ["FORMATS", "graph", "node_labels"]

FORMATS = ("mermaid", "dot")
"""The formats :func:`graph` writes."""

# A user function's name in an operator label is ``module.qualname:line``; the picture keeps
# the function's own name, which is what a reader recognises.
_FUNCTION = re.compile(r"\(([\w.<>]+):\d+\)")


def _short(name: str) -> str:
    def own(match: re.Match[str]) -> str:
        qualname = match.group(1).rsplit(".", 1)[-1]
        return "(...)" if qualname == "<lambda>" else f"({qualname})"

    return _FUNCTION.sub(own, name)


def node_labels(
    plan: Plan, spec: DataflowSpec, stats: list[dict[str, Any]] | None
) -> list[list[str]]:
    """Each actor's lines of text: its name, what it absorbed, sharing, statistics."""
    out = []
    for i, node in enumerate(plan.nodes):
        lines = [_short(node.name)]
        for logical in node.logical:
            registry = spec.nodes[logical].traits.arrangement
            if registry is None:
                name = spec.nodes[logical].name
                if name not in node.name:  # a linear step absorbed into this actor's inlet
                    lines.append(f"+ {_short(name)}")
                continue
            if spec.nodes[logical].name != node.name:
                lines.append(f"+ {registry.name}")  # absorbed into its only reader
            elif registry.readers > 1:
                lines.append(f"shared by {registry.readers} readers")
        if stats is not None:
            op = stats[i]
            if "records" in op and node.inputs:
                lines.append(f"{op['records']:,} records in")
            if op.get("arranged"):
                lines.append(f"{op['arranged']:,} updates arranged")
        out.append(lines)
    return out


def _edges(plan: Plan) -> list[tuple[int, int, bool]]:
    """``(source actor, target actor, exchanges)`` for every connection, in plan order."""
    edges = []
    for target, node in enumerate(plan.nodes):
        for port_edges in node.inputs:
            for e in port_edges:
                edges.append((e.node, target, e.pact.is_exchange))
    return edges


def _scope_of(plan: Plan, spec: DataflowSpec, index: int) -> Any:
    """The scope an actor runs in (None: the top), from what its nodes recorded."""
    for logical in plan.nodes[index].logical:
        traits = spec.nodes[logical].traits
        scope = traits.scope
        if scope is None and traits.variable is not None:
            scope = traits.variable.scope
        if scope is not None:
            return scope if scope.parent is not None else None
    return None


def _outer(scope: Any) -> Any:
    """The loop scope enclosing ``scope`` (None: the top)."""
    parent = scope.parent
    return parent if parent is not None and parent.parent is not None else None


def _tree(plan: Plan, spec: DataflowSpec) -> tuple[dict[Any, list[int]], dict[Any, list[Any]]]:
    """The actors of each scope, and the loop scopes inside each (None: the top), in plan
    order."""
    members: dict[Any, list[int]] = {None: []}
    children: dict[Any, list[Any]] = {None: []}

    def register(scope: Any) -> None:
        if scope in members:
            return
        outer = _outer(scope)
        register(outer)
        members[scope] = []
        children[scope] = []
        children[outer].append(scope)

    for i in range(len(plan.nodes)):
        scope = _scope_of(plan, spec, i)
        register(scope)
        members[scope].append(i)
    return members, children


def _grouped(
    plan: Plan,
    spec: DataflowSpec,
    node: Callable[[int, str], str],
    group: Callable[[str, str, str, list[str]], list[str]],
) -> list[str]:
    """The node lines, each loop scope's in a group nested in its enclosing scope's."""
    members, children = _tree(plan, spec)
    count = iter(range(1, len(members)))

    def at(scope: Any, pad: str) -> list[str]:
        lines = [node(i, pad) for i in members[scope]]
        for inner in children[scope]:
            site = getattr(inner, "created_at", None)
            label = f"loop {inner.name}" + (f" at {site}" if site else "")
            lines.extend(group(f"loop{next(count)}", label, pad, at(inner, pad + "    ")))
        return lines

    return at(None, "    ")


def _mermaid(plan: Plan, spec: DataflowSpec, labels: list[list[str]]) -> str:
    def quoted(text: str) -> str:
        return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")

    def text(i: int, pad: str) -> str:
        joined = "<br/>".join(quoted(s) for s in labels[i])
        return f'{pad}n{i}["{joined}"]'

    def group(ident: str, label: str, pad: str, body: list[str]) -> list[str]:
        return [f'{pad}subgraph {ident}["{quoted(label)}"]', *body, f"{pad}end"]

    lines = ["flowchart TD", *_grouped(plan, spec, text, group)]
    for a, b, exchange in _edges(plan):
        arrow = "-. exchange .->" if exchange else "-->"
        lines.append(f"    n{a} {arrow} n{b}")
    return "\n".join(lines)


def _dot(plan: Plan, spec: DataflowSpec, labels: list[list[str]]) -> str:
    def quoted(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"')

    def text(i: int, pad: str) -> str:
        joined = "\\n".join(quoted(s) for s in labels[i])
        return f'{pad}n{i} [label="{joined}"];'

    def group(ident: str, label: str, pad: str, body: list[str]) -> list[str]:
        return [
            f"{pad}subgraph cluster_{ident} {{",
            f'{pad}    label="{quoted(label)}";',
            *body,
            f"{pad}}}",
        ]

    lines = ["digraph deltaflow {", "    node [shape=box];", *_grouped(plan, spec, text, group)]
    for a, b, exchange in _edges(plan):
        style = ' [style=dashed, label="exchange"]' if exchange else ""
        lines.append(f"    n{a} -> n{b}{style};")
    lines.append("}")
    return "\n".join(lines)


def graph(
    pipeline: Pipeline | Job,
    format: str = "mermaid",
    *,
    workers: int = 1,
    fuse: bool = True,
) -> str:
    """The planned graph of ``pipeline`` (or of a job, annotated with its statistics).

    Args:
        pipeline: a :class:`~deltaflow.Pipeline`, or a :class:`~deltaflow.Job` (then its own
            plan, and its ``statistics()``: records received per operator when the job was
            opened with ``profile=True``, updates arranged).
        format: ``"mermaid"`` (a ``flowchart``, for Markdown) or ``"dot"`` (Graphviz).
        workers, fuse: as for :func:`deltaflow.open` (with one worker, the linear chain before
            an absorbed arrangement joins it, so the picture differs).

    Raises:
        ValueError: an unknown ``format``.
        TypeError: ``pipeline`` is neither a Pipeline nor a Job.
    """
    if format not in FORMATS:
        msg = f"graph: format must be one of {FORMATS}, not {format!r}"
        raise ValueError(msg)
    stats = None
    if isinstance(pipeline, Pipeline):
        spec = pipeline.instantiate(workers).spec
        plan = make_plan(spec, fuse=fuse, workers=workers)
    elif hasattr(pipeline, "plan") and hasattr(pipeline, "statistics"):
        plan, spec = pipeline.plan, pipeline.builder.spec
        stats = pipeline.statistics()["operators"]
    else:
        msg = f"graph: expected a deltaflow Pipeline or Job, got {pipeline!r}"
        raise TypeError(msg)
    labels = node_labels(plan, spec, stats)
    return _mermaid(plan, spec, labels) if format == "mermaid" else _dot(plan, spec, labels)
