"""W4x10 on Spark beside one process and ``processes=2``; streaming W4x10; Spark's I/O paths.

W4x10 is W4 (BFS distances from node 0) at ten times the size: 1,000,000 nodes, 2,000,000
edges, then single edge changes (``workloads.w4_bfs``). Each system runs in a child process
of its own (so one's memory does not slow the next) and prints JSON lines:

* ``w4x10.one_process`` — ``df.open()``, one worker: ``load_s`` (time 0 fed and complete),
  then ``rounds_per_s`` over ``--rounds`` single-edge rounds.
* ``w4x10.processes2`` — ``df.open(workers=2, processes=2)``: ``start_s`` (the processes
  started and connected) apart from ``load_s`` and ``rounds_per_s``, as above.
* ``w4x10.spark_run`` — ``dfspark.run`` on ``local[2]``, 2 partitions, the edges read from
  parquet: ``startup_s`` (the session and a first job), ``total_s`` (the call), and the
  barrier job's phases (``phase_timings``): ``input_s`` (from submission to the first
  task's start: Spark reads the parquet and shuffles the rows to 2 partitions), ``read_s``
  (a task turns its partition into updates), ``rendezvous_s``, ``dataflow_s`` (the load in
  the workers, to the output) and ``output_s``. ``load_s`` = rendezvous + dataflow is the
  figure set beside ``processes=2``'s ``start_s + load_s`` (``vs_processes2``, target <=
  1.3).
* ``w4x10.spark_run1`` — the same call on ``local[1]``, 1 partition; ``spark_run`` then
  gives ``speedup_vs_local1`` (``total_s``, the whole call) and ``load_speedup_vs_local1``
  (``load_s``): what a second core buys (target >= 1.6). Run them in that order:
  ``--only spark_run1,spark_run``.
* ``w4x10.spark_stream`` — ``dfspark.stream`` on ``local[3]`` (2 workers and a slot for
  the micro-batches): micro-batch 0 is the load (roots and edges, through the driver), then
  one changed edge (an insertion and a retraction) per micro-batch from a file each:
  ``micro_batches_per_s`` end to end, ``batch_median_s`` (the ``foreachBatch`` call), and
  ``worker_median_ms``: the slowest worker's time from the changes in to the output complete
  (target <= 10 ms).
* ``spark.paths`` — the two ways in and out of barrier tasks, on the same edges, each task
  reading its rows into Python tuples and returning them: ``mapInArrow(barrier=True)``
  (Arrow both ways) and ``rdd.barrier().mapPartitions`` with ``createDataFrame`` (rows
  pickled both ways).
* ``w4x10.cluster_run``, ``w4x10.cluster_stream`` — ``spark_run`` and ``spark_stream`` on a
  standalone cluster started for the figure (a master and two workers of two slots, each its
  own JVM, on loopback; ``_standalone.StandaloneCluster``), 2 partitions; ``startup_s``
  includes starting the cluster.
* ``stream_w1.local`` / ``stream_w1.cluster`` — W1-style counting streamed: the keyed count of
  ``workloads.w1_count`` (10,000 keys), micro-batch 0 its ``--batch-rows`` (100,000) initial
  records and every later one as many rows (half of them records in, as many of the oldest
  out: a FIFO window), in ``--batch-files`` (1) parquet files each, ``--batches`` in all;
  ``local[3]`` or the standalone cluster, 2 partitions. The sink sums each micro-batch's
  output in Spark (every output row computed, one row to the driver). ``rows_per_s``: the
  rows of micro-batches 1.. over the time from micro-batch 0's end to the last one's;
  ``batch_median_s``: a micro-batch's median ``foreachBatch`` time; ``driver_cpu_ms``: the
  driver's Python process CPU per micro-batch over the same span; ``start_s``: from the
  ``dfspark.stream`` call to micro-batch 0's sink done; per micro-batch after the first, the
  medians of ``feed_median_s`` (reading and dealing its rows), ``worker_median_s``,
  ``sink_median_s`` (the output fetched, the sink's job) and ``beyond_work_median_s`` (the
  ``foreachBatch`` time less the workers' and the checkpoint's).
* ``stream_w1_checkpointed`` — ``stream_w1.local`` with ``checkpoint_location``: the workers'
  state checkpointed with every micro-batch; also ``checkpoint_median_s`` (a micro-batch's
  checkpoint: settle, shares written, manifest committed) and ``state_mb`` (the checkpoint's
  size on disk at the end).

Every figure carries ``check``: the final answer equals the from-scratch BFS (the W1 answer
for ``stream_w1``).

Run: ``python benchmarks/bench_spark.py [--quick] [--only one_process,processes2,spark_run1,
spark_run,spark_stream,paths,cluster_run,cluster_stream,stream_w1,stream_w1_cluster,
stream_w1_checkpointed] [--rounds 100]
[--batches 11]`` (``--quick``: W4 at its own size, fewer rounds and micro-batches; by default
every system but the ``stream_w1`` ones).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SYSTEMS = (
    "one_process", "processes2", "spark_run1", "spark_run", "spark_stream", "paths", "cluster_run",
    "cluster_stream",
)  # fmt: skip
STREAM_W1 = ("stream_w1", "stream_w1_cluster", "stream_w1_checkpointed")
#: The standalone cluster's workers and slots on each; its executors' heap.
CLUSTER_WORKERS, CLUSTER_CORES, CLUSTER_MEMORY = 2, 2, "2g"
FULL = {"nodes": 1_000_000, "edges": 2_000_000}
QUICK = {"nodes": 100_000, "edges": 200_000}


def emit(record: dict[str, Any]) -> None:
    """Print one figure as a JSON line (floats rounded for reading)."""
    clean = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in record.items()}
    print(json.dumps(clean), flush=True)


def data(args: argparse.Namespace) -> tuple[int, list[Any], list[Any]]:
    from workloads import w4_bfs

    size = QUICK if args.quick else FULL
    return w4_bfs(size["nodes"], size["edges"], args.rounds)


def check(out: dict[Any, int], root: int, init: list[Any], rounds: list[Any]) -> str:
    """``"ok"`` when ``out`` (``{(node, dist): n}``) is the BFS of the live edges."""
    from bench_workloads import answer_w4
    from workloads import w4_expected

    got, want = answer_w4(out), w4_expected(root, init, rounds)
    return "ok" if got == want else f"MISMATCH {got} != {want}"


# -- in-process and processes=2 -------------------------------------------------------------
def run_open(args: argparse.Namespace, processes: int) -> dict[str, Any]:
    import trio
    from bench_workloads import Bfs

    import deltaflow as df

    root, init, rounds = data(args)
    record: dict[str, Any] = {"nodes": len({n for e in init for n in e}), "edges": len(init)}

    async def main() -> dict[Any, int]:
        begin = time.perf_counter()
        workers = 2 if processes == 2 else 1
        async with df.open(Bfs(), workers, processes=processes) as job:
            start = time.perf_counter()
            record["start_s"] = start - begin
            job.inputs["roots"].insert(root)
            job.inputs["edges"].insert_many(init)
            await job.advance_to(1)
            record["load_s"] = time.perf_counter() - start
            edges = job.inputs["edges"]
            start = time.perf_counter()
            for t, (new, old) in enumerate(rounds, start=1):
                edges.insert(new)
                edges.remove(old)
                await job.advance_to(t + 1)
            record["rounds_per_s"] = len(rounds) / (time.perf_counter() - start)
            return job.output.at(len(rounds))

    out = trio.run(main)
    record["check"] = check(out, root, init, rounds)
    return record


# -- Spark ----------------------------------------------------------------------------------
def session(cores: int) -> tuple[Any, float]:
    """A local session with ``cores`` slots, and the seconds to start it and run a job."""
    from deltaflow.adapters import spark as dfspark

    start = time.perf_counter()
    config = {
        "spark.ui.enabled": "false",
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "2",
    }
    spark = dfspark.local_session(f"local[{cores}]", "deltaflow-bench", config)
    spark.range(10).count()
    spark.sparkContext.parallelize(range(10), 2).map(lambda x: x).count()
    return spark, time.perf_counter() - start


def cluster_session(tmp: Path) -> tuple[Any, float, Any]:
    """A session on a standalone cluster started under ``tmp``, the seconds to start both and
    run a job, and the cluster (to stop after the session)."""
    from deltaflow.adapters.spark._standalone import StandaloneCluster

    start = time.perf_counter()
    cluster = StandaloneCluster(
        tmp / "cluster",
        workers=CLUSTER_WORKERS,
        cores=CLUSTER_CORES,
        memory="3g",
        executor_memory=CLUSTER_MEMORY,
    )
    cluster.start()
    config = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    if os.environ.get("PYTHONPATH"):
        # The executors import what the driver imports (a tree under test on the path).
        config["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    spark = cluster.session("deltaflow-bench", config)
    spark.range(10).count()
    spark.sparkContext.parallelize(range(10), 2).map(lambda x: x).count()
    return spark, time.perf_counter() - start, cluster


def session_for(tmp: Path, cores: int, on_cluster: bool) -> tuple[Any, float, Any]:
    """A local session with ``cores`` slots, or one on a fresh standalone cluster."""
    if on_cluster:
        return cluster_session(tmp)
    spark, startup = session(cores)
    return spark, startup, None


def write_parquet(path: Path, columns: dict[str, list[int]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({k: pa.array(v, pa.int64()) for k, v in columns.items()}), path)


def write_edges(tmp: Path, init: list[Any]) -> None:
    """The edges written as parquet under ``tmp/edges``."""
    (tmp / "edges").mkdir()
    write_parquet(
        tmp / "edges" / "0.parquet", {"src": [s for s, _ in init], "dst": [d for _, d in init]}
    )


def run_spark(
    args: argparse.Namespace, tmp: Path, on_cluster: bool = False, cores: int = 2
) -> dict[str, Any]:
    from bench_workloads import Bfs

    from deltaflow.adapters import spark as dfspark
    from deltaflow.adapters.spark._batch import phase_timings

    root, init, _ = data(args)
    write_edges(tmp, init)
    spark, startup, cluster = session_for(tmp, cores, on_cluster)
    record: dict[str, Any] = {"startup_s": startup, "edges": len(init), "cores": cores}
    try:
        edges = spark.read.parquet(str(tmp / "edges"))
        roots = spark.createDataFrame([(root,)], "root long")
        start = time.perf_counter()
        with phase_timings(spark) as phases:
            out = dfspark.run(
                Bfs(), spark, roots=roots, edges=edges, schema="node long, dist long",
                partitions=cores,
            )  # fmt: skip
        record["total_s"] = time.perf_counter() - start
        record["input_s"] = phases["started"] - phases["submitted"]
        for phase in ("read_s", "rendezvous_s", "dataflow_s", "output_s"):
            record[phase] = phases[phase]
        record["load_s"] = phases["rendezvous_s"] + phases["dataflow_s"]
        final = {(r[0], r[1]): r[2] for r in out.groupBy("node", "dist").sum("diff").collect()}
        record["check"] = check(final, root, init, [])
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
    return record


def run_stream(args: argparse.Namespace, tmp: Path, on_cluster: bool = False) -> dict[str, Any]:
    from bench_workloads import Bfs

    from deltaflow.adapters import spark as dfspark

    root, init, rounds = data(args)
    (tmp / "roots").mkdir()
    (tmp / "edges").mkdir()
    write_parquet(tmp / "roots" / "0.parquet", {"root": [root]})
    write_parquet(
        tmp / "edges" / "00000.parquet",
        {"src": [s for s, _ in init], "dst": [d for _, d in init], "diff": [1] * len(init)},
    )
    for t, (new, old) in enumerate(rounds, start=1):
        write_parquet(
            tmp / "edges" / f"{t:05d}.parquet",
            {"src": [new[0], old[0]], "dst": [new[1], old[1]], "diff": [1, -1]},
        )
    spark, startup, cluster = session_for(tmp, 3, on_cluster)
    record: dict[str, Any] = {"startup_s": startup, "edges": len(init), "rounds": len(rounds)}
    final: dict[Any, int] = {}
    ends: list[float] = []

    def sink(frame: Any, _batch_id: int) -> None:
        for node, dist, _, diff in frame.collect():
            final[(node, dist)] = final.get((node, dist), 0) + diff
        ends.append(time.perf_counter())

    try:
        read = spark.readStream.option("maxFilesPerTrigger", 1)
        roots = read.schema("root long").parquet(str(tmp / "roots"))
        edges = read.schema("src long, dst long, diff long").parquet(str(tmp / "edges"))
        start = time.perf_counter()
        with dfspark.stream(
            Bfs(),
            spark,
            roots=roots,
            edges=edges,
            schema="node long, dist long",
            foreach_batch=sink,
            partitions=2,
        ) as running:
            record["workers_start_s"] = time.perf_counter() - start
            running.process_all_available()
            stats = running.statistics()
            per_batch = running.worker_seconds
        record["batches"] = stats["batches"]
        record["load_batch_s"] = running.batch_seconds[0]
        record["load_worker_s"] = per_batch[0]
        if len(ends) > 1:
            record["micro_batches_per_s"] = (len(ends) - 1) / (ends[-1] - ends[0])
            later = sorted(per_batch[1:])
            record["worker_median_ms"] = later[len(later) // 2] * 1e3
            record["worker_p90_ms"] = later[int(0.9 * len(later))] * 1e3
            batch = sorted(running.batch_seconds[1:])
            record["batch_median_s"] = batch[len(batch) // 2]
        record["check"] = check({k: v for k, v in final.items() if v}, root, init, rounds)
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
    return record


def w1_batches(args: argparse.Namespace) -> tuple[list[list[tuple[int, int]]], dict[str, int]]:
    """W1's records as micro-batches of ``(key, diff)`` rows (see the module), and the W1
    answer after all of them."""
    from workloads import w1_count, w1_expected

    half = args.batch_rows // 2
    init, rounds = w1_count(initial=2 * half, rounds=half * (args.batches - 1))
    batches = [[(k, 1) for k in init]]
    for b in range(args.batches - 1):
        part = rounds[b * half : (b + 1) * half]
        batches.append([(new, 1) for new, _ in part] + [(old, -1) for _, old in part])
    return batches, w1_expected(init, rounds)


def run_stream_w1(
    args: argparse.Namespace, tmp: Path, on_cluster: bool, checkpointed: bool = False
) -> dict[str, Any]:
    from bench_workloads import KeyCount

    from deltaflow.adapters import spark as dfspark

    batches, want = w1_batches(args)
    (tmp / "records").mkdir()
    files = args.batch_files
    written = time.time() - len(batches)
    for b, rows in enumerate(batches):
        for f in range(files):
            name = tmp / "records" / f"{b:05d}-{f}.parquet"
            part = rows[f::files]
            write_parquet(name, {"key": [k for k, _ in part], "diff": [d for _, d in part]})
            # Spark's file source takes files in the order of their modification times: a
            # second apart, micro-batch b's files are read before b + 1's however fast they
            # were written (a record is retracted only after it was inserted).
            os.utime(name, (written + b, written + b))
    spark, startup, cluster = session_for(tmp, 3, on_cluster)
    record: dict[str, Any] = {"startup_s": startup, "batch_rows": len(batches[1]), "files": files}
    ends: list[float] = []
    cpu: list[float] = []
    totals = {"keys": 0, "checksum": 0}

    def sink(frame: Any, _batch_id: int) -> None:
        # Every output row computed in Spark; one row to the driver.
        (row,) = frame.selectExpr("sum(diff)", "sum(key * n * diff)").collect()
        totals["keys"] += row[0] or 0
        totals["checksum"] += row[1] or 0
        ends.append(time.perf_counter())
        cpu.append(time.process_time())

    try:
        read = spark.readStream.option("maxFilesPerTrigger", files)
        records = read.schema("key long, diff long").parquet(str(tmp / "records"))
        location = str(tmp / "query") if checkpointed else None
        called = time.perf_counter()
        with dfspark.stream(
            KeyCount(),
            spark,
            records=records,
            schema="key long, n long",
            foreach_batch=sink,
            partitions=2,
            checkpoint_location=location,
        ) as running:
            running.process_all_available()
            seconds = running.batch_seconds
            if checkpointed:
                saves = sorted(running.checkpoint_seconds[1:])
                record["checkpoint_median_s"] = saves[len(saves) // 2]
                record["first_checkpoint_s"] = running.checkpoint_seconds[0]
                state = tmp / "query" / "deltaflow"
                size = sum(f.stat().st_size for f in state.rglob("*") if f.is_file())
                record["state_mb"] = size / 1e6
            later_feeds = sorted(getattr(running, "feed_seconds", [])[1:])
            workers = sorted(running.worker_seconds[1:])
            sinks = sorted(running.sink_seconds[1:])
            saved = running.checkpoint_seconds or [0.0] * len(seconds)
            beyond = sorted(
                b - w - c
                for b, w, c in zip(seconds[1:], running.worker_seconds[1:], saved[1:], strict=True)
            )
        record["start_s"] = ends[0] - called
        record["sink_median_s"] = sinks[len(sinks) // 2]
        record["beyond_work_median_s"] = beyond[len(beyond) // 2]
        record["batches"] = len(ends)
        if later_feeds:
            record["feed_median_s"] = later_feeds[len(later_feeds) // 2]
        record["worker_median_s"] = workers[len(workers) // 2]
        rows = sum(len(b) for b in batches[1:])
        record["rows_per_s"] = rows / (ends[-1] - ends[0])
        # The driver's own (Python) CPU per micro-batch after the first.
        record["driver_cpu_ms"] = (cpu[-1] - cpu[0]) / (len(cpu) - 1) * 1e3
        record["first_batch_s"] = seconds[0]
        later = sorted(seconds[1:])
        record["batch_median_s"] = later[len(later) // 2]
        record["check"] = "ok" if totals == want else f"MISMATCH {totals} != {want}"
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
    return record


def run_paths(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The edges through barrier tasks and back, by Arrow and by the RDD path."""
    _, init, _ = data(args)
    write_edges(tmp, init)
    spark, startup = session(2)
    record: dict[str, Any] = {"startup_s": startup, "rows": len(init)}

    def arrow_task(batches: Any) -> Any:
        import pyarrow as pa

        rows = []
        for b in batches:
            rows += list(zip(b.column(0).to_pylist(), b.column(1).to_pylist()))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([r[0] for r in rows], pa.int64()),
                pa.array([r[1] for r in rows], pa.int64()),
            ],
            names=["src", "dst"],
        )

    def rdd_task(rows: Any) -> Any:
        return [(r[0], r[1]) for r in rows]

    try:
        edges = spark.read.parquet(str(tmp / "edges"))
        for attempt in range(2):
            start = time.perf_counter()
            n = edges.repartition(2).mapInArrow(arrow_task, "src long, dst long", barrier=True)
            count = n.localCheckpoint(eager=True).count()
            record[f"arrow_s_{attempt}"] = time.perf_counter() - start
            start = time.perf_counter()
            rdd = edges.repartition(2).rdd.barrier().mapPartitions(rdd_task)
            back = spark.createDataFrame(rdd, "src long, dst long").localCheckpoint(eager=True)
            record[f"rdd_s_{attempt}"] = time.perf_counter() - start
            assert count == back.count() == len(init)
    finally:
        spark.stop()
    return record


def child(system: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if system == "one_process":
            record = run_open(args, 1)
        elif system == "processes2":
            record = run_open(args, 2)
        elif system == "spark_run":
            record = run_spark(args, Path(tmp))
        elif system == "spark_run1":
            record = run_spark(args, Path(tmp), cores=1)
        elif system == "spark_stream":
            record = run_stream(args, Path(tmp))
        elif system == "cluster_run":
            record = run_spark(args, Path(tmp), on_cluster=True)
        elif system == "cluster_stream":
            record = run_stream(args, Path(tmp), on_cluster=True)
        elif system in STREAM_W1:
            record = run_stream_w1(
                args,
                Path(tmp),
                on_cluster=system == "stream_w1_cluster",
                checkpointed=system == "stream_w1_checkpointed",
            )
        else:
            record = run_paths(args, Path(tmp))
    import resource

    record["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(record), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="W4 at its own size")
    parser.add_argument("--only", default=",".join(SYSTEMS))
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--batches", type=int, default=None, help="stream_w1's micro-batches")
    parser.add_argument("--batch-rows", type=int, default=None, help="rows per micro-batch")
    parser.add_argument("--batch-files", type=int, default=1, help="files per micro-batch")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 20 if args.quick else 100
    if args.batches is None:
        args.batches = 4 if args.quick else 11
    if args.batch_rows is None:
        args.batch_rows = 20_000 if args.quick else 100_000
    if args.child:
        child(args.child, args)
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    name = "w4" if args.quick else "w4x10"
    results: dict[str, dict[str, Any]] = {}
    for system in args.only.split(","):
        cmd = [sys.executable, __file__, "--child", system, "--rounds", str(args.rounds)]
        cmd += ["--batches", str(args.batches), "--batch-rows", str(args.batch_rows)]
        cmd += ["--batch-files", str(args.batch_files)]
        if args.quick:
            cmd.append("--quick")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            emit({"figure": f"{name}.{system}", "error": proc.stderr.strip().splitlines()[-3:]})
            continue
        record = json.loads(lines[-1].removeprefix("RESULT "))
        results[system] = record
        if system in ("spark_run", "cluster_run") and "processes2" in results:
            p2 = results["processes2"]
            record["vs_processes2"] = record["load_s"] / (p2["start_s"] + p2["load_s"])
            record["target_vs_processes2"] = 1.3
        if system == "spark_run" and "spark_run1" in results:
            # local[2] against local[1], the same call: what a second core buys.
            one = results["spark_run1"]
            record["speedup_vs_local1"] = one["total_s"] / record["total_s"]
            record["load_speedup_vs_local1"] = one["load_s"] / record["load_s"]
            record["target_speedup_vs_local1"] = 1.6
        if system in ("spark_stream", "cluster_stream"):
            record["target_worker_median_ms"] = 10.0
        if system in STREAM_W1:
            figure = {"stream_w1_cluster": "stream_w1.cluster"}.get(system, "stream_w1.local")
            if system == "stream_w1_checkpointed":
                figure = "stream_w1.checkpointed"
        else:
            figure = "spark.paths" if system == "paths" else f"{name}.{system}"
        emit({"figure": figure, **record})


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
