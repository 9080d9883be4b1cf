"""Building and running one-off pipelines in tests, and reaching into the finished job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

import deltaflow as df
from deltaflow.framework.trace.spine import Spine
from deltaflow.operators.arrange import ArrangeOperator
from deltaflow.scheduler.runtime import Job


def pipeline_of(build: Callable[..., Any]) -> df.Pipeline:
    """A pipeline whose ``build`` is ``build`` (input names = its parameter names)."""
    return type("Built", (df.Pipeline,), {"build": staticmethod(build)})()


def run_job(pipe: df.Pipeline, workers: int, **inputs: list[tuple[Any, int, int]]) -> Job:
    """Feed every update at its own time, close, and return the finished job for inspection."""

    async def main() -> Job:
        async with df.open(pipe, workers=workers) as job:
            for name, ups in inputs.items():
                handle = job.inputs[name]
                for d, t, r in ups:
                    handle.update_at(d, t, r)
        return job

    return trio.run(main)


def input_spines(job: Job, name: str) -> dict[int, Spine]:
    """Each worker's spine of the arrangement fed directly by input ``name`` (an arrange actor,
    or an inlet of the arrangement's only reader)."""
    nodes = job.plan.nodes
    out: dict[int, Spine] = {}
    for worker in job.workers:
        for actor in worker.actors:
            op = actor.operator
            if isinstance(op, ArrangeOperator):
                arranges = [(0, op)]
            else:
                arranges = [(p, i.arrange) for p, i in enumerate(actor.inlets) if i is not None]
            for port, arrange in arranges:
                upstream = nodes[nodes[actor.index].inputs[port][0].node]
                if upstream.name == f"input:{name}":
                    out[worker.index] = arrange.spine
    return out
