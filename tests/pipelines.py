"""Pipelines several test modules run, in one place (importable by name, as Spark's executors
need: see tests/adapters/spark_pipelines.py)."""

from __future__ import annotations

import deltaflow as df


class Reachability(df.Pipeline):
    """The contract's Reachability: ``(root, node)`` pairs with ``node`` reachable from
    ``root``, by ``iterate`` and ``distinct``."""

    def build(self, roots: df.Collection, edges: df.Collection) -> df.Collection:
        def step(reach: df.Collection) -> df.Collection:
            return (
                reach.map(lambda rn: (rn[1], rn[0]))
                .join_map(edges, lambda node, root, dst: (root, dst))
                .concat(roots.map(lambda r: (r, r)))
                .distinct()
            )

        return roots.map(lambda r: (r, r)).iterate(step)
