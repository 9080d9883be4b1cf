"""df.graph: the planned graph as Mermaid or DOT, loop scopes nested, statistics annotated."""

from __future__ import annotations

import pytest
import trio

import deltaflow as df


class Loops(df.Pipeline):
    """A loop nested in a loop, and a second loop beside the first."""

    def build(self, xs: df.Collection) -> df.Collection:
        def outer(x: df.Collection) -> df.Collection:
            inner = x.iterate(lambda y: y.map(lambda n: min(n + 1, 5)).concat(y).distinct())
            return inner.concat(x).distinct()

        first = xs.iterate(outer)
        second = xs.iterate(lambda z: z.map(lambda n: n * 2 % 7).concat(z).distinct())
        return first.concat(second)


def test_loop_scopes_nest_as_written() -> None:
    lines = df.graph(Loops()).splitlines()
    opens = [(i, line) for i, line in enumerate(lines) if "subgraph" in line]
    assert [line.index("subgraph") for _, line in opens] == [4, 8, 4]
    ends = [i for i, line in enumerate(lines) if line.strip() == "end"]
    # The inner loop closes before the outer one, which closes before the second loop opens.
    assert ends[0] < ends[1] < opens[2][0] < ends[2]
    assert all("loop iterate at " in line and "test_graph.py:" in line for _, line in opens)


def test_dot_has_the_same_clusters_and_edges() -> None:
    mermaid, dot = df.graph(Loops()), df.graph(Loops(), "dot")
    assert dot.count("subgraph cluster_loop") == mermaid.count("subgraph loop") == 3
    assert dot.count(" -> ") == mermaid.count(" --> ") + mermaid.count(" .-> ")


def test_a_finished_job_annotates_records_and_arrangements() -> None:
    class Shared(df.Pipeline):
        def build(self, a: df.Collection, b: df.Collection) -> df.Collection:
            arranged = b.arrange_by_key()
            return a.join(arranged).concat(a.semijoin(b.map(lambda p: p[0])).join(arranged))

    async def main() -> df.Job:
        async with df.open(Shared(), 2, profile=True) as job:
            job.inputs["a"].insert_many([(1, "x"), (2, "y")])
            job.inputs["b"].insert_many([(1, "p"), (1, "q")])
        return job

    picture = df.graph(trio.run(main))
    assert "shared by 2 readers<br/>2 records in<br/>2 updates arranged" in picture
    assert "input:a" in picture and "input:a<br/>" not in picture  # sources get no count


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="format must be one of"):
        df.graph(Loops(), "svg")
    with pytest.raises(TypeError, match="expected a deltaflow Pipeline or Job"):
        df.graph(42)  # type: ignore[arg-type]
