"""deltaflow.graphs: each algorithm on collections gives its plain-Python twin's answer."""

from __future__ import annotations

import random

import pytest

import deltaflow as df
from deltaflow.graphs import Bfs, Reachability, bfs_distances, reachable_pairs
from deltaflow.testing import accumulate


def _graph(seed: int) -> tuple[list[int], list[tuple[int, int]]]:
    rng = random.Random(seed)
    edges = [(rng.randrange(12), rng.randrange(12)) for _ in range(20)]
    return [0, 5], edges


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_reachability_and_bfs_match_their_plain_python_twins(seed: int, workers: int) -> None:
    """The pipelines' answers at the last time equal the searches over the live edges."""
    roots, edges = _graph(seed)
    removed = edges[::3]
    live = [e for i, e in enumerate(edges) if i % 3]
    inputs = {
        "roots": [(r, 0, 1) for r in roots],
        "edges": [(e, 0, 1) for e in edges] + [(e, 1, -1) for e in removed],
    }
    reach = accumulate(df.run(Reachability(), workers=workers, **inputs), 1)
    assert set(reach) == reachable_pairs(roots, live)
    assert all(n == 1 for n in reach.values())
    dists = accumulate(df.run(Bfs(), workers=workers, **inputs), 1)
    assert dict(dists) == dict.fromkeys(bfs_distances(roots, live).items(), 1)


def test_plain_python_twins_on_a_small_graph() -> None:
    """The searches follow edges one way and count the fewest hops."""
    edges = [(0, 1), (1, 2), (2, 0), (3, 2)]
    assert reachable_pairs([1], edges) == {(1, 1), (1, 2), (1, 0)}
    assert bfs_distances([3], edges) == {3: 0, 2: 1, 0: 2, 1: 3}
