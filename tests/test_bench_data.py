"""The benchmarks' data helpers give exactly the shared workloads' data.

``benchmarks/w2_stream.py`` rebuilds W2's rounds on demand for a million-round run, and
``benchmarks/bench_pathway.py`` hands W1-W3 to Pathway and to deltaflow through a file: a
figure measured on other data than the generator's would compare nothing, so both are
checked here against ``benchmarks/workloads.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_pathway  # noqa: E402
import workloads  # noqa: E402
from w2_stream import W2Stream  # noqa: E402


@pytest.mark.parametrize(("rounds", "edges"), [(5, 3), (40, 7), (7, 40)])
def test_w2_stream_is_w2_reach(rounds: int, edges: int) -> None:
    stream = W2Stream(rounds=rounds, nodes=20, edges=edges, roots=3)
    roots, init, expected = workloads.w2_reach(nodes=20, edges=edges, roots=3, rounds=rounds)
    assert stream.roots == roots
    assert stream.initial == init
    assert [stream.round(t) for t in range(1, rounds + 1)] == expected
    for t in (0, 1, rounds // 2, rounds):
        live = workloads.live_multiset(init, expected[:t])
        assert sorted(stream.live(t)) == sorted(live.elements())
    with pytest.raises(ValueError, match="round must be in"):
        stream.round(rounds + 1)


@pytest.mark.parametrize("wid", ["w1", "w2", "w3"])
def test_pathway_data_file_holds_the_workload(wid: str, tmp_path: Path) -> None:
    path = tmp_path / f"{wid}.npz"
    expected = bench_pathway.write_data(wid, True, path)
    load, rounds = bench_pathway.read_data(wid, path)
    n = bench_pathway.QUICK_ROUNDS[wid]
    assert len(rounds) == n
    if wid == "w3":
        given = workloads.w3_triangles()[:n]
        assert [[e for e, r in batch if r == 1] for batch in rounds] == given
        assert all(r == 1 for batch in rounds for _, r in batch)
        assert expected == workloads.w3_expected(given)
        return
    if wid == "w1":
        init, pairs = workloads.w1_count()
        assert load == {"records": init}
    else:
        roots, init, pairs = workloads.w2_reach()
        assert load == {"edges": init, "roots": roots}
    pairs = pairs[:n]
    assert rounds == [[(ins, 1), (ret, -1)] for ins, ret in pairs]
