"""Word counts kept up to date on Spark Structured Streaming, one micro-batch at a time.

A directory of text files is the stream: every new file is one micro-batch (the source reads
one file per trigger), each line a row. ``dfspark.stream`` keeps the word counts in one
long-lived barrier job of ``--partitions`` workers, and after every micro-batch hands the
changed counts to a ``foreach_batch`` sink as a DataFrame ``(word, n, time, diff)``: the old
count retracted (``diff -1``), the new one inserted. Nothing is recomputed: a micro-batch
costs work in proportion to its words.

With ``--input DIR`` the program watches ``DIR`` for ``--seconds`` (drop text files into it);
without it, it writes ``--batches`` files of random lines into a temporary directory itself,
waits for each to be processed, and prints the final counts (checked against counting every
line in plain Python with ``--check``).

Run (from the repository, after ``make .venv/.installed``)::

    SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=.venv/bin/python \\
        .venv/bin/python examples/spark_streaming_wordcount.py --batches 5 --check

Slots: the workers hold ``--partitions`` task slots while the stream runs, and each
micro-batch needs at least one more, so the master needs ``partitions + 1`` cores
(``local[3]`` for the default two workers).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import deltaflow as df

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "after", "it"]


class WordCount(df.Pipeline):
    """``(word, n)``: how many times each word occurs in the lines."""

    def build(self, lines: df.Collection) -> df.Collection:
        return lines.flat_map(lambda line: line.split()).map(lambda w: (w, w)).count()


def main(argv: list[str] | None = None, spark: Any = None) -> dict[str, int]:
    """Parse the arguments, stream, print each micro-batch's changes and the final counts;
    returns the final counts."""
    from deltaflow.adapters import spark as dfspark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", help="a directory to watch (default: write batches here)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to watch --input")
    parser.add_argument("--batches", type=int, default=5, help="files to write without --input")
    parser.add_argument("--lines", type=int, default=4, help="lines per written file")
    parser.add_argument("--partitions", type=int, default=2, help="workers (barrier tasks)")
    parser.add_argument("--master", default="local[3]")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    own = spark is None
    if own:
        spark = dfspark.local_session(args.master, "deltaflow-streaming-wordcount")
    counts: Counter[str] = Counter()

    def show(frame: Any, batch_id: int) -> None:
        rows = sorted(tuple(r) for r in frame.collect())
        for word, n, _, diff in rows:
            counts[word] += n * diff
        changes = ", ".join(f"{w}={n}" for w, n, _, d in rows if d > 0)
        print(f"micro-batch {batch_id}: {changes or '(no change)'}")

    written: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.input or Path(tmp) / "in")
        directory.mkdir(parents=True, exist_ok=True)
        lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))
        try:
            with dfspark.stream(
                WordCount(),
                spark,
                lines=lines,
                schema="word string, n long",
                foreach_batch=show,
                partitions=args.partitions,
            ) as running:
                if args.input:
                    running.await_termination(int(args.seconds))
                else:
                    rng = random.Random(args.seed)
                    for b in range(args.batches):
                        text = [" ".join(rng.choices(WORDS, k=5)) for _ in range(args.lines)]
                        written += text
                        staged = Path(tmp) / f"batch-{b}.txt"
                        staged.write_text("\n".join(text) + "\n")
                        staged.rename(directory / staged.name)
                        running.process_all_available()
                stats = running.statistics()
        finally:
            if own:
                spark.stop()
    final = {w: n for w, n in sorted(counts.items()) if n}
    print(
        f"{stats['batches']} micro-batches: median {stats['batch_median_s'] * 1e3:.0f} ms each, "
        f"{stats['worker_median_s'] * 1e3:.1f} ms of it in the workers"
    )
    print("counts:", final)
    print(f"answer: {sum(final.values())} words, {len(final)} distinct")
    if args.check and not args.input:
        ok = final == dict(sorted(Counter(w for line in written for w in line.split()).items()))
        print("check:", "ok" if ok else "MISMATCH")
    return final


if __name__ == "__main__":
    main()
