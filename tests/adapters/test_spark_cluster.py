"""The Spark adapter on a standalone cluster: separate executor JVMs, each in a directory of
its own, which import nothing of the driver's but installed packages.

A pipeline from a module only the driver can import runs as ``df.run`` does, a failing user
function fails with ``df.run``'s error, and a stream keeps its state across micro-batches, and
across a restart on its checkpoint location.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.adapters.spark_data import (
    BATCHES,
    WordCounts,
    expected,
    line_updates,
    random_edges,
    rows,
    triples,
    word_counts,
)

import deltaflow as df

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

dfspark = pytest.importorskip("deltaflow.adapters.spark")


class Degrees(df.Pipeline):
    """Out-degree of every node, and how many nodes have each degree (defined here, in a test
    module the executors cannot import)."""

    def build(self, edges: df.Collection) -> df.Collection:
        return edges.count().map(lambda nd: (nd[1], nd[0])).count()


class Fails(df.Pipeline):
    """A map whose function raises on 13."""

    def build(self, xs: df.Collection) -> df.Collection:
        return xs.map(unlucky)


def unlucky(x: int) -> int:
    if x == 13:
        msg = "thirteen is unlucky"
        raise ValueError(msg)
    return x


def test_the_executors_are_apart(cluster: Any) -> None:
    """Two executors, each in a working directory of its own, none of them this one."""

    def where(_: Any) -> Any:
        import os

        yield os.getcwd()

    places = set(cluster.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect())
    assert len(places) == 2 and str(Path.cwd()) not in places


def test_a_pipeline_of_the_test_module(cluster: Any) -> None:
    """A pipeline class of this test module runs over four tasks on two executors."""
    edges = random_edges(5, 30, 80, 4)
    out = dfspark.run(
        Degrees(),
        cluster,
        edges=cluster.createDataFrame(edges, "src long, dst long, time long, diff long"),
        schema="degree long, nodes long",
        partitions=4,
    )
    assert rows(out) == expected(df.run(Degrees(), edges=triples(edges)))


def test_a_pipeline_from_a_module_beside_the_script(cluster: Any, tmp_path: Path) -> None:
    """Reachability from a module (and a helper module beside it) that only the driver's path
    holds: no addPyFile, the same answer as df.run."""
    (tmp_path / "cluster_helpers.py").write_text("def flip(e):\n    return (e[1], e[0])\n")
    (tmp_path / "cluster_pipes.py").write_text(
        "import deltaflow as df\nfrom cluster_helpers import flip\n\n"
        "class Reach(df.Pipeline):\n"
        "    def build(self, roots, edges):\n"
        "        def step(reach):\n"
        "            return (reach.map(flip)\n"
        "                    .join_map(edges, lambda node, root, dst: (root, dst))\n"
        "                    .concat(roots.map(lambda r: (r, r))).distinct())\n"
        "        return roots.map(lambda r: (r, r)).iterate(step)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import cluster_pipes  # type: ignore[import-not-found]

        edges = random_edges(11, 25, 40, 3)
        roots = [(0, 0, 1), (3, 1, 1)]
        out = dfspark.run(
            cluster_pipes.Reach(),
            cluster,
            roots=cluster.createDataFrame(roots, "root long, time long, diff long"),
            edges=cluster.createDataFrame(edges, "src long, dst long, time long, diff long"),
            schema="root long, node long",
            partitions=4,
        )
        want = df.run(cluster_pipes.Reach(), roots=triples(roots), edges=triples(edges))
        assert len(want) > 10 and rows(out) == expected(want)
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("cluster_pipes", "cluster_helpers"):
            sys.modules.pop(name, None)


def test_a_failing_user_function(cluster: Any) -> None:
    """User code raising on one executor fails the job within seconds with df.run's error."""
    xs = cluster.createDataFrame([(n,) for n in range(40)], "x long")
    start = time.monotonic()
    with pytest.raises(df.OperatorError) as info:
        dfspark.run(Fails(), cluster, xs=xs, schema="x long", partitions=4)
    assert time.monotonic() - start < 30
    with pytest.raises(df.OperatorError) as local:
        df.run(Fails(), xs=[(n, 0, 1) for n in range(40)])
    assert str(info.value) == str(local.value) and "unlucky" in info.value.operator


def test_a_stream_across_micro_batches(cluster: Any, tmp_path: Path) -> None:
    """Word counts streamed over the cluster: every micro-batch's changes equal df.run's at
    its time, so the workers kept their state between micro-batches."""
    words = WordCounts(tmp_path)
    with words.stream(cluster) as running:
        for b, batch in enumerate(BATCHES):
            words.feed(running, b, batch)
    assert words.sink.rows() == word_counts(line_updates(BATCHES))
    assert sorted(words.sink.batches) == list(range(len(BATCHES)))


def test_a_stream_restarted_on_a_relative_checkpoint_location(cluster: Any, tmp_path: Path) -> None:
    """A checkpoint location relative to the driver's working directory means the same place
    to the workers, in the executors' own directories: stopped after two micro-batches and
    restarted on it, the stream resumes its state and its changes equal df.run's."""
    jvm = cluster.sparkContext._jvm
    location = os.path.relpath(tmp_path / "query", jvm.System.getProperty("user.dir"))
    assert not os.path.isabs(location)
    words = WordCounts(tmp_path)
    for run, (first, last) in enumerate([(0, 2), (2, len(BATCHES))]):
        with words.stream(cluster, checkpoint_location=location) as running:
            assert running.resumed_at == (first or None)
            for b in range(first, last):
                words.feed(running, b, BATCHES[b])
        assert (tmp_path / "query" / "deltaflow" / f"checkpoint-{last:06d}.json").exists(), run
    assert words.sink.rows() == word_counts(line_updates(BATCHES))
