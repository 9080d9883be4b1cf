"""The programs in ``examples/`` run, and their answers equal a plain-Python recompute.

Each example is imported from its file and its ``main(argv)`` called with small sizes; the
returned answer is compared with the same question answered here from scratch, and the
printed ``answer:`` line is checked too. Examples whose operators do not exist yet are
skipped with the reason.
"""

from __future__ import annotations

from collections import Counter
from types import ModuleType

import pytest
from tests.harness import import_example

import deltaflow as df
from deltaflow.graphs import reachable_pairs


def load(name: str, *needs: str) -> ModuleType:
    """Import ``examples/<name>.py``, or skip if ``Collection`` lacks an operator it needs."""
    missing = [m for m in needs if not hasattr(df.Collection, m)]
    if missing:
        pytest.skip(f"examples/{name}.py needs Collection.{', '.join(missing)} (not built yet)")
    return import_example(name)


def live_edges(
    init: list[tuple[int, int]], changes: list[tuple[tuple[int, int], tuple[int, int]]]
) -> list[tuple[int, int]]:
    """The live edge multiset after ``(insert, retract)`` changes, with repeats."""
    live = Counter(init)
    for new, old in changes:
        live[new] += 1
        live[old] -= 1
    assert all(n >= 0 for n in live.values())
    return list(live.elements())


def hop_distances(root: int, edges: list[tuple[int, int]]) -> dict[int, int]:
    """Shortest hop counts from ``root`` by Bellman-Ford style relaxation."""
    dist = {root: 0}
    changed = True
    while changed:
        changed = False
        for s, d in edges:
            if s in dist and dist[s] + 1 < dist.get(d, 1 << 60):
                dist[d] = dist[s] + 1
                changed = True
    return dist


@pytest.mark.parametrize("workers", [1, 2])
def test_reachability_example(workers: int, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/reachability.py ends with exactly the reachable pairs of the live edges."""
    ex = load("reachability", "join_map", "iterate", "distinct")
    args = ["--rounds", "30", "--nodes", "40", "--edges", "50", "--roots", "3"]
    pairs = ex.main([*args, "--workers", str(workers), "--report-every", "10", "--check"])
    init, rounds = ex.generate(40, 50, 30)
    assert pairs == reachable_pairs([0, 1, 2], live_edges(init, rounds))
    out = capsys.readouterr().out
    assert f"answer: {len(pairs)} reachable pairs" in out
    assert "check: ok" in out
    assert out.count(" p99 ") == 3  # one latency report per 10 rounds


def test_reachability_default_data_is_w2() -> None:
    """With default arguments the example generates the W2 benchmark's roadmap data."""
    ex = load("reachability")
    init, rounds = ex.generate(1000, 2000, 1000)
    assert len(reachable_pairs(list(range(10)), live_edges(init, rounds))) == 6_573


def test_bfs_example(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/bfs.py ends with the BFS distances of the live edges, and their histogram."""
    ex = load("bfs", "join_map", "iterate", "min", "count")
    dists = ex.main(["--nodes", "60", "--edges", "120", "--rounds", "8", "--batch", "3", "--check"])
    init, rounds = ex.generate(60, 120, 8, 3)
    expected = hop_distances(0, live_edges(init, [c for r in rounds for c in r]))
    assert dists == expected
    out = capsys.readouterr().out
    hist = dict(sorted(Counter(expected.values()).items()))
    assert f"nodes per distance: {hist}" in out
    assert f"answer: {len(expected)} reached, sum of distances {sum(expected.values())}" in out


def test_wordcount_example(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/wordcount.py ends with the word counts of the last ``window`` lines."""
    ex = load("wordcount", "count")
    counts = ex.main(["--window", "3", "--rounds", "17", "--report-every", "5", "--check"])
    lines = ex.TEXT.splitlines()
    window = [lines[i % len(lines)] for i in range(14, 17)]
    words = [w.strip(".,:;") for line in window for w in line.lower().split()]
    assert counts == dict(Counter(w for w in words if w))
    out = capsys.readouterr().out
    assert f"answer: {dict(sorted(counts.items()))}" in out
    assert "check: ok" in out


def test_degrees_example(workers: int, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/degrees.py ends with the out-degree distribution of the live edges."""
    ex = load("degrees", "count")
    args = ["--nodes", "30", "--edges", "100", "--rounds", "6", "--batch", "4"]
    result = ex.main([*args, "--workers", str(workers), "--check"])
    init, rounds = ex.generate(30, 100, 6, 4)
    live = live_edges(init, [c for r in rounds for c in r])
    degree = Counter(s for s, _ in live)
    assert result == dict(Counter(degree.values()))
    assert "check: ok" in capsys.readouterr().out


def test_temporal_filter_example(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/temporal_filter.py: live readings per sensor and the expiring ones, at the end."""
    ex = load("temporal_filter", "count", "temporal_filter", "join_function")
    per_sensor, expiring = ex.main(["--rounds", "25", "--window", "5", "--check"])
    rounds = ex.generate(25, 4, 3)
    last = 24
    fed = [r for batch in rounds for r in batch]
    assert per_sensor == dict(Counter(s for s, _, v in fed if v <= last < v + 5))
    assert expiring == {r for r in fed if r[2] + 3 <= last < r[2] + 5}
    assert "check: ok" in capsys.readouterr().out


def test_triangles_example(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/triangles.py: the three versions agree with a plain-Python count."""
    ex = load("triangles", "half_join", "index_by_key")
    args = ["--nodes", "200", "--edges", "1500", "--rounds", "60", "--report-every", "20"]
    answers = ex.main([*args, "--check"])
    rounds = ex.generate(200, 1500)[:60]
    expected = ex.triangles([e for r in rounds for e in r])
    assert expected > 0
    assert answers == {"binary": expected, "delta": expected, "wcoj": expected}
    out = capsys.readouterr().out
    assert f"answer: wcoj {expected} triangles" in out
    assert "check: ok" in out
    assert out.count("memory held") == 3  # one summary per version


def test_triangles_default_data_is_w3() -> None:
    """With default arguments the example generates the W3 benchmark's graph."""
    ex = load("triangles")
    assert ex.triangles([e for r in ex.generate() for e in r]) == 151_802
