"""A picture of the dataflow that runs: the planned graph as Mermaid or Graphviz DOT.

What is drawn is the *plan*, not the pipeline as written: one box per actor after fusion
(``map -> filter`` is one box), arrangements absorbed into their reader listed in it, shared
arrangements marked with their readers, loop scopes as nested groups, and edges that route
data between workers by key drawn dashed and labelled ``exchange``. Given a finished job,
each box also shows the records the operator received and the updates its arrangements hold
(``statistics()``), so one can see where the work went.

    >>> import deltaflow as df
    >>> class Counts(df.Pipeline):
    ...     def build(self, words):
    ...         return words.map(lambda w: (w, ())).count()
    >>> print(graph(Counts(), workers=2))
    flowchart TD
        n0["input:words"]
        n1["map(...)"]
        n2["count<br/>+ arrange_by_key"]
        n3["output:output"]
        n0 --> n1
        n1 -. exchange .-> n2
        n2 --> n3
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..operators.collection import Pipeline
from .plan import Plan, make_plan

if TYPE_CHECKING:
    from ..framework.dataflow import DataflowSpec
    from .runtime import Job

__all__ = ["FORMATS", "graph"]

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


def _labels(plan: Plan, spec: DataflowSpec, stats: list[dict[str, Any]] | None) -> list[list[str]]:
    """Each actor's lines of text: its name, what it absorbed, sharing, statistics."""
    out = []
    for i, node in enumerate(plan.nodes):
        lines = [_short(node.name)]
        for logical in node.logical:
            registry = spec.nodes[logical].meta.get("arrangement")
            if registry is None:
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


def _mermaid(plan: Plan, labels: list[list[str]]) -> str:
    def text(i: int) -> str:
        joined = "<br/>".join(labels[i]).replace('"', "#quot;")
        return f'n{i}["{joined}"]'

    lines = ["flowchart TD"]
    lines.extend(_grouped(plan, lambda i, pad: [f"{pad}{text(i)}"], _mermaid_group))
    for a, b, exchange in _edges(plan):
        arrow = "-. exchange .->" if exchange else "-->"
        lines.append(f"    n{a} {arrow} n{b}")
    return "\n".join(lines)


def _mermaid_group(depth: int, pad: str, body: list[str]) -> list[str]:
    return [f'{pad}subgraph loop{depth}["loop scope, depth {depth}"]', *body, f"{pad}end"]


def _dot(plan: Plan, labels: list[list[str]]) -> str:
    def text(i: int) -> str:
        joined = "\\n".join(s.replace("\\", "\\\\").replace('"', '\\"') for s in labels[i])
        return f'n{i} [label="{joined}"];'

    lines = ["digraph deltaflow {", "    node [shape=box];"]
    lines.extend(_grouped(plan, lambda i, pad: [f"{pad}{text(i)}"], _dot_group))
    for a, b, exchange in _edges(plan):
        style = ' [style=dashed, label="exchange"]' if exchange else ""
        lines.append(f"    n{a} -> n{b}{style};")
    lines.append("}")
    return "\n".join(lines)


def _dot_group(depth: int, pad: str, body: list[str]) -> list[str]:
    return [
        f"{pad}subgraph cluster_loop{depth} {{",
        f'{pad}    label="loop scope, depth {depth}";',
        *body,
        f"{pad}}}",
    ]


def _grouped(plan: Plan, node: Any, group: Any) -> list[str]:
    """The node lines, those of loop scopes nested in groups by depth (plan order kept)."""

    def at(depth: int, pad: str) -> list[str]:
        lines: list[str] = []
        deeper = False
        for i, n in enumerate(plan.nodes):
            if n.depth == depth:
                lines.extend(node(i, pad))
            elif n.depth > depth:
                deeper = True
        if deeper:
            lines.extend(group(depth + 1, pad, at(depth + 1, pad + "    ")))
        return lines

    return at(0, "    ")


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
    labels = _labels(plan, spec, stats)
    return _mermaid(plan, labels) if format == "mermaid" else _dot(plan, labels)
