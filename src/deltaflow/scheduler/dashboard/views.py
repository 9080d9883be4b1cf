"""What the dashboard page reads: the planned graph laid out once, and the job's live state.

:func:`graph_view` lays out the plan the job runs (one box per actor, as
:func:`deltaflow.scheduler.graph.graph` draws it) left to right in layers: an actor sits one
layer after the furthest of the actors feeding it along forward edges (an edge to an earlier
actor is a loop's feedback and does not push it on).

:class:`LiveView` answers each poll with ``job.statistics()`` and what the page derives from
it: records per second on each edge (the records its target port received, over the last
:attr:`LiveView.WINDOW_S` seconds), each output's frontier and lag (in times and in seconds
since the inputs passed it), and every other counter the statistics hold, flattened, so that
counters added to ``statistics()`` show without the page knowing them.

    >>> import deltaflow as df
    >>> class Counts(df.Pipeline):
    ...     def build(self, words):
    ...         return words.map(lambda w: (w, ())).count()
    >>> view = graph_view(df.Job(Counts()))
    >>> [n["label"][0] for n in view["nodes"]], [(e["source"], e["target"]) for e in view["edges"]]
    (['input:words', 'count', 'output:output'], [(0, 1), (1, 2)])
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

from ..graph import node_labels
from ..observe import processes_of

if TYPE_CHECKING:
    from ..runtime import Job

__all__ = ["LiveView", "counters", "graph_view"]

# Pixels the page gives a character of a label, a line, and the gaps between boxes.
_CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y = 7.3, 16, 8, 72, 24
# Characters a box is wide at least: its live lines ("123,456 in", "12,345 arranged").
_MIN_CHARS = 18

# statistics() keys the page shows in views of their own, not among the counters.
_SHOWN = frozenset({"time", "workers", "processes", "operators", "checkpoints"})


def _edges(job: Job) -> list[dict[str, Any]]:
    plan = job.plan
    out = []
    for target, node in enumerate(plan.nodes):
        for port, port_edges in enumerate(node.inputs):
            for e in port_edges:
                out.append(
                    {
                        "source": e.node,
                        "target": target,
                        "port": port,
                        "exchange": e.pact.is_exchange,
                        # Several edges into one port: its count is theirs together.
                        "shared": len(port_edges) > 1,
                    }
                )
    return out


def graph_view(job: Job) -> dict[str, Any]:
    """The job's planned graph with a position and size for every box (pixels)."""
    plan = job.plan
    labels = node_labels(plan, job.builder.spec, None)
    edges = _edges(job)
    layer = [0] * len(plan.nodes)
    for i in range(len(plan.nodes)):  # plan order: every forward edge comes from before
        for e in edges:
            if e["target"] == i and e["source"] < i:
                layer[i] = max(layer[i], layer[e["source"]] + 1)
    sizes = [
        (
            round(max(_MIN_CHARS, *(len(line) for line in lines)) * _CHAR_W + 2 * _PAD),
            (len(lines) + 2) * _LINE_H + _PAD,  # two lines more: the page's live figures
        )
        for lines in labels
    ]
    columns: dict[int, list[int]] = {}
    for i, n in enumerate(layer):
        columns.setdefault(n, []).append(i)
    x, y = [0] * len(labels), [0] * len(labels)
    left = 0
    for n in sorted(columns):
        top = 0
        for i in columns[n]:
            x[i], y[i] = left, top
            top += sizes[i][1] + _GAP_Y
        left += max(sizes[i][0] for i in columns[n]) + _GAP_X
    nodes = [
        {"id": i, "label": labels[i], "x": x[i], "y": y[i], "w": w, "h": h}
        for i, (w, h) in enumerate(sizes)
    ]
    height = max((y[i] + sizes[i][1] for i in range(len(labels))), default=0)
    return {
        "pipeline": type(job.pipeline).__name__,
        "nodes": nodes,
        "edges": edges,
        "width": max(left - _GAP_X, 0),
        "height": height,
    }


def counters(stats: dict[str, Any]) -> dict[str, float]:
    """Every number in ``stats`` outside the keys the page shows on their own, by its path
    of keys (lists of frontiers and such are left out).

    >>> counters({"time": 3, "late": {"window": 2}, "inputs": {"xs": {"read": 5}}})
    {'late.window': 2, 'inputs.xs.read': 5}
    """
    out: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            out[prefix] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)

    for key, value in stats.items():
        if key not in _SHOWN:
            walk(str(key), value)
    return out


def _outer(t: Any) -> int | None:
    """The outermost coordinate of a time (an output's are ints; a loop's, Products)."""
    while not isinstance(t, int):
        t = getattr(t, "outer", None)
        if t is None:
            return None
    return t


@attrs.define
class LiveView:
    """The job's state as the page polls it, with rates over a sliding window."""

    job: Job
    #: Seconds the records-per-second figures are averaged over.
    WINDOW_S = 2.0
    _started: float = attrs.field(factory=time.monotonic)
    _samples: list[tuple[float, list[int], int]] = attrs.field(factory=list)

    def _rates(self, now: float, ports: list[int], out: int) -> tuple[list[float], float]:
        """Per counted port and for the outputs, records per second over the window."""
        samples = self._samples
        samples.append((now, ports, out))
        while len(samples) > 2 and now - samples[1][0] >= self.WINDOW_S:
            samples.pop(0)
        then, before, out_before = samples[0]
        span = now - then
        if span <= 0 or len(before) != len(ports):
            return [0.0] * len(ports), 0.0
        return [(a - b) / span for a, b in zip(ports, before)], (out - out_before) / span

    def snapshot(self) -> dict[str, Any]:
        """What one poll answers (JSON-ready but for times, which it shows with ``str``)."""
        job = self.job
        stats = job.statistics()
        now = time.monotonic()
        ops = stats["operators"]
        counted = all("ports" in op for op in ops)
        flat = [n for op in ops for n in op.get("ports", [])]
        published = sum(o.published for o in job.outputs.values())
        port_rates, out_rate = self._rates(now, flat, published)
        base, offsets = 0, []
        for op in ops:
            offsets.append(base)
            base += len(op.get("ports", []))
        edges = []
        for e in _edges(job):
            at = offsets[e["target"]] + e["port"]
            edges.append(
                {
                    **e,
                    "records": flat[at] if counted else None,
                    "rate": port_rates[at] if counted else None,
                }
            )
        outputs = []
        for name, handle in job.outputs.items():
            frontier = list(handle.frontier)
            least = min((o for o in map(_outer, frontier) if o is not None), default=None)
            outputs.append(
                {
                    "name": name,
                    "frontier": [str(t) for t in frontier],
                    "done": not frontier,
                    "lag_times": 0 if least is None else max(0, job.time - least),
                    "lag_seconds": 0.0 if least is None else job.advances.lag(least, now),
                    "published": handle.published,
                }
            )
        workers = stats["workers"]
        missing = []
        if not workers:
            missing.append("workers: no worker process has reported yet")
        if any(w.get("rss") is None for w in workers):
            missing.append("memory: this system does not tell a process's resident memory")
        if len(stats.get("processes", [])) > 1:
            missing.append(
                "workers in other processes: as each last reported (when an output moved)"
            )
        state = "failed" if job.error is not None else "closed" if job.closed else "running"
        return {
            "pipeline": type(job.pipeline).__name__,
            "state": state,
            "error": None if job.error is None else f"{type(job.error).__name__}: {job.error}",
            "time": job.time,
            "elapsed": now - self._started,
            "output_rate": out_rate,
            "edges": edges,
            "operators": [
                {
                    "name": op["name"],
                    "arranged": op["arranged"],
                    "records": op.get("records"),
                }
                for op in ops
            ],
            "outputs": outputs,
            "workers": workers,
            "processes": stats.get("processes") or processes_of(workers),
            "checkpoints": stats.get("checkpoints"),
            "counters": counters(stats),
            "missing": missing,
        }
