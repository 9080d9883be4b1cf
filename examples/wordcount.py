"""Word counts over a sliding window of lines of text.

The text arrives one line per round; the window holds the last ``--window`` lines, so each
round inserts the newest line and retracts the one that left the window. The pipeline splits
lines into lowercase words (``flat_map``) and counts each word (``count`` on ``(word, _)``
gives ``(word, n)``). After every ``--report-every`` rounds the program prints the most
frequent words in the window; at the end it prints the whole count (checked against
``collections.Counter`` with ``--check``).

Run: ``python examples/wordcount.py [--window 4] [--rounds 40] [--top 5] [--workers 1]
[--check]``.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

import trio

import deltaflow as df

TEXT = """\
A collection is a multiset of records that changes over time.
Every change is an update: a record, the time it happens, and a signed count.
The collection at a time adds up every update at or before that time.
An operator is a function of collections, and so is a pipeline of operators.
When an input changes, only the change flows through the pipeline.
A count per key changes for the keys that changed, and for no others.
Times inside a loop are pairs: the outer time and the round of the loop.
Those pairs are only partially ordered, so a round may finish before another starts.
A frontier says which times may still change; the others are complete.
Once a time is complete its answer is final, and old history can be compacted.
Compacted history keeps the latency flat however long the computation runs.
Workers split the keys between them and exchange updates by key.
"""

WORD = re.compile(r"[a-z]+")


class WordCount(df.Pipeline):
    """``(word, n)``: how often each word occurs in the lines."""

    def build(self, lines: df.Collection) -> df.Collection:
        return lines.flat_map(lambda line: WORD.findall(line.lower())).map(
            lambda w: (w, 1)
        ).count()  # fmt: skip


def text_lines(rounds: int) -> list[str]:
    """``rounds`` lines: the text, repeated as often as needed."""
    base = TEXT.splitlines()
    return [base[i % len(base)] for i in range(rounds)]


def counts(lines: list[str]) -> dict[str, int]:
    """The answer in plain Python."""
    return dict(Counter(w for line in lines for w in WORD.findall(line.lower())))


async def run(
    lines: list[str], window: int, report_every: int, top: int, workers: int
) -> dict[str, int]:
    """Feed one line per round through the window; return ``{word: n}`` at the end."""
    async with df.open(WordCount(), workers=workers) as job:
        handle = job.inputs["lines"]
        for t, line in enumerate(lines):
            # Round t is time t: the newest line enters, the line ``window`` back leaves.
            handle.insert(line)
            if t >= window:
                handle.remove(lines[t - window])
            await job.advance_to(t + 1)
            if (t + 1) % report_every == 0:
                now = job.output.at(t)
                best = sorted(now, key=lambda wn: (-wn[1], wn[0]))[:top]
                print(f"time {t:>3}: " + ", ".join(f"{w} {n}" for w, n in best))
        final = job.output.at(len(lines) - 1) if lines else {}
    return {w: n for (w, n), c in final.items() if c > 0}


def main(argv: list[str] | None = None) -> dict[str, int]:
    """Parse the arguments, run, print the answer; returns ``{word: count}`` of the window."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4, help="lines in the window")
    parser.add_argument("--rounds", type=int, default=40, help="lines fed, one per round")
    parser.add_argument("--report-every", type=int, default=10, metavar="N")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="compare with plain Python")
    args = parser.parse_args(argv)
    lines = text_lines(args.rounds)
    result = trio.run(run, lines, args.window, max(1, args.report_every), args.top, args.workers)
    print("answer:", dict(sorted(result.items())))
    if args.check:
        ok = result == counts(lines[-args.window :] if args.window > 0 else [])
        print("check:", "ok" if ok else "MISMATCH")
    return result


if __name__ == "__main__":
    main()
