"""The visitors pipeline over file and batch inputs, shared by the source tests: the
random rows, files in each format, and the recompute they are checked against."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from tests.strategies import nonnegative

import deltaflow as df

USERS = st.sampled_from(["ann", "bob", "cy"])
PAGES = st.sampled_from(["home", "cart", "faq"])
ROWS = st.lists(st.tuples(USERS, PAGES, st.sampled_from([1, 1, 1, -1])), min_size=0, max_size=6)


def batches_as_collection(batches: list[list[Any]]) -> list[list[Any]]:
    """``batches`` of ``(data, diff)`` (batch ``i`` at time ``i``) with, in the first, as many
    more insertions of each datum as it is ever retracted: no count is negative at any time (a
    collection, as reductions require) and every retraction still retracts.

    >>> batches_as_collection([[("a", 1)], [("b", -1)]])
    [[('a', 1), ('b', 1)], [('b', -1)]]
    """
    fed = nonnegative([(d, i, r) for i, batch in enumerate(batches) for d, r in batch])
    out: list[list[Any]] = [[] for _ in batches]
    for d, i, r in fed:
        out[i].append((d, r))
    return out


def files_as_collection(files: list[tuple[list[Any], str]]) -> list[tuple[list[Any], str]]:
    """``files`` of ``(user, page, diff)`` rows with, in the first, rows inserting each click
    as many times as it is ever retracted (see :func:`batches_as_collection`)."""
    batches = [[((u, p), r) for u, p, r in rows] for rows, _ in files]
    return [
        ([(u, p, r) for (u, p), r in batch], fmt)
        for batch, (_, fmt) in zip(batches_as_collection(batches), files)
    ]


FILES = st.lists(st.tuples(ROWS, st.sampled_from(["csv", "jsonl", "parquet"])), max_size=6).map(
    files_as_collection
)


class Visitors(df.Pipeline):
    """How many distinct users visited each page."""

    def build(self, clicks: df.Collection) -> df.Collection:
        return clicks.map(lambda c: (c[1], c[0])).distinct().count()


class TypedVisitors(Visitors):
    schemas = {"clicks": "user string, page string"}


def visitors(c: dict[str, Counter[Any]]) -> Counter[Any]:
    pages: Counter[Any] = Counter()
    for (_, page), n in c["clicks"].items():
        if n > 0:
            pages[page] += 1
    return Counter(dict.fromkeys(pages.items(), 1))


def write(folder: Path, index: int, rows: list[tuple[str, str, int]], fmt: str) -> Path:
    """File ``index`` of a directory, its rows with a diff column, in ``fmt``, appearing whole:
    written beside it under a name a files source skips (a leading ``.``), then renamed into
    place, as ``df.sources.files`` asks of a directory it follows (a file it sees while still
    empty would be read as no rows, and never read again).
    """
    path = folder / f"part-{index:04d}.{fmt}"
    part = folder / f".{path.name}.part"
    if fmt == "csv":
        body = "".join(f"{u},{p},{r}\n" for u, p, r in rows)
        part.write_text("user,page,diff\n" + body)
    elif fmt == "jsonl":
        part.write_text(
            "".join(json.dumps({"user": u, "page": p, "diff": r}) + "\n" for u, p, r in rows)
        )
    else:
        columns = list(zip(*rows)) if rows else [[], [], []]
        table = pa.table(
            {
                "user": pa.array(columns[0], pa.string()),
                "page": pa.array(columns[1], pa.string()),
                "diff": pa.array(columns[2], pa.int64()),
            }
        )
        pq.write_table(table, part)
    part.replace(path)
    return path


def updates_of(files: list[tuple[list[tuple[str, str, int]], str]]) -> list[Any]:
    """What the files feed, file ``i`` at time ``i`` (a JSON-lines file without rows feeds
    nothing, but is still a time)."""
    return [((u, p), i, r) for i, (rows, _) in enumerate(files) for u, p, r in rows]
