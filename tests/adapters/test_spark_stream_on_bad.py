"""``dfspark.stream(..., on_bad=...)`` on a real local Spark: bad rows (a null diff, a NaN, a
null in a column declared NOT NULL)
skipped or quarantined per input, the output equal to ``df.run``'s over the good rows alone,
every bad row counted, and each quarantined one kept exactly once, across a restart on the
checkpoint location too."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")


class CountBoth(df.Pipeline):
    """``(x, n)``: how many times each ``x`` occurs in ``xs`` and ``ys`` together."""

    schemas = {"xs": "x double not null", "ys": "x double not null"}

    def build(self, xs: df.Collection, ys: df.Collection) -> df.Collection:
        return xs.concat(ys).map(lambda x: (x, x)).count()


def write_batch(directory: Path, index: int, batch: dict[str, list[dict[str, Any]]]) -> None:
    """One JSON-lines file of both inputs' rows: one micro-batch (the source reads one file
    per trigger)."""
    rows = [{"src": name, **r} for name, rs in batch.items() for r in rs]
    tmp = directory.parent / f".{directory.name}-{index}.json"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))  # a NaN is written NaN
    tmp.rename(directory / f"{index:04d}.json")


def batches(seed: int, count: int) -> list[dict[str, list[dict[str, Any]]]]:
    """Per micro-batch and input, rows with bad ones at random places: a null diff, a NaN."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        batch: dict[str, list[dict[str, Any]]] = {}
        for name in ("xs", "ys"):
            rows: list[dict[str, Any]] = []
            for _ in range(rng.randrange(1, 6)):
                kind = rng.random()
                if kind < 0.15:
                    rows.append({"x": float(rng.randrange(4))})  # no diff: null
                elif kind < 0.25:
                    rows.append({"diff": 1})  # no x: null, declared NOT NULL
                elif kind < 0.35:
                    rows.append({"x": math.nan, "diff": 1})
                else:
                    rows.append({"x": float(rng.randrange(4)), "diff": rng.choice([1, 2])})
            batch[name] = rows
        out.append(batch)
    return out


def fault(row: dict[str, Any]) -> str | None:
    """What is wrong with a row, or None."""
    if row.get("diff") is None:
        return "diff"
    if row.get("x") is None:
        return "null"
    return "nan" if math.isnan(row["x"]) else None


def good(row: dict[str, Any]) -> bool:
    return fault(row) is None


class Query:
    """A stream of CountBoth over two file sources, xs quarantined and ys skipped."""

    def __init__(self, spark: Any, root: Path, location: str | None = None) -> None:
        self.spark = spark
        self.directory = root / "in"
        self.directory.mkdir(exist_ok=True)
        self.location = location
        self.out: dict[int, list[tuple[Any, ...]]] = {}

    def sink(self, frame: Any, batch_id: int) -> None:
        self.out[batch_id] = [tuple(r) for r in frame.collect()]

    def start(self) -> Any:
        both = (
            self.spark.readStream.schema("src string, x double, diff long")
            .option("maxFilesPerTrigger", 1)
            .json(str(self.directory))
        )
        frames = {name: both.where(both.src == name).select("x", "diff") for name in ("xs", "ys")}
        return dfspark.stream(
            CountBoth(),
            self.spark,
            schema="x double, n long",
            foreach_batch=self.sink,
            partitions=2,
            checkpoint_location=self.location,
            on_bad={"xs": "quarantine", "ys": "skip"},
            **frames,
        )

    def feed(self, running: Any, b: int, batch: dict[str, list[dict[str, Any]]]) -> None:
        write_batch(self.directory, b, batch)
        running.process_all_available()


def expected(fed: list[dict[str, list[dict[str, Any]]]], batch_of: list[int]) -> Any:
    """df.run's output over the good rows alone (each micro-batch at its batch id), and the
    counts per input."""
    inputs: dict[str, list[Any]] = {"xs": [], "ys": []}
    counts = {}
    for name in inputs:
        rows = [(r, t) for batch, t in zip(fed, batch_of) for r in batch[name]]
        inputs[name] = [(r["x"], t, r["diff"]) for r, t in rows if good(r)]
        bad = sum(not good(r) for r, _ in rows)
        counts[name] = {
            "read": len(rows),
            "accepted": len(rows) - bad,
            "refused": bad,
            "skipped": bad if name == "ys" else 0,
            "quarantined": bad if name == "xs" else 0,
        }
    want = sorted((x, n, t, d) for (x, n), t, d in df.run(CountBoth(), **inputs))
    return want, counts


def quarantined(fed: list[dict[str, list[dict[str, Any]]]]) -> list[tuple[str, str]]:
    """The bad rows of xs, as (x, fault) sorted: what the side output must hold once each."""
    out = []
    for batch in fed:
        for r in batch["xs"]:
            what = fault(r)
            if what is not None:
                out.append((repr(r.get("x")), what))
    return sorted(out)


REASONS = {
    "diff": "column 'diff' is null",
    "null": "column 'x' is null in the row (x=None), but the input's schema declares it NOT NULL",
    "nan": "holds a NaN",
}


def seen(rejected: list[Any]) -> list[tuple[str, str]]:
    """The side output as (x, fault) sorted, each record checked to name its input, its
    micro-batch and its reason."""
    out = []
    for r in rejected:
        assert r.input == "xs"
        assert r.where.startswith("micro-batch ")
        (what,) = [k for k, text in REASONS.items() if text in r.reason]
        out.append((repr(r.datum), what))
    return sorted(out)


def test_bad_rows_set_aside_leave_the_good_rows_output(
    spark: Any, tmp_path: Path, stream_path: str
) -> None:
    """Bad rows at random places: the stream's output equals df.run's over the good rows,
    xs's bad rows are in rejected() once each, ys's counted as skipped; the micro-batches
    read by the driver or by feeding tasks alike."""
    fed = batches(4, 3)  # every kind of bad row in both inputs
    query = Query(spark, tmp_path)
    with query.start() as running:
        for b, batch in enumerate(fed):
            query.feed(running, b, batch)
        stats = running.statistics()
        rejected = running.rejected()
    want, counts = expected(fed, list(range(len(fed))))
    got = sorted(row for rows in query.out.values() for row in rows)
    assert got == want
    assert stats["inputs"] == counts
    assert seen(rejected) == quarantined(fed)


def test_counts_and_quarantine_once_across_a_restart(spark: Any, tmp_path: Path) -> None:
    """A query restarted on its checkpoint location goes on counting where it stopped: every
    bad row counted, and quarantined, exactly once over both runs."""
    fed = batches(7, 4)
    location = str(tmp_path / "checkpoint")
    query = Query(spark, tmp_path, location)
    with query.start() as running:
        for b, batch in enumerate(fed[:2]):
            query.feed(running, b, batch)
    query = Query(spark, tmp_path, location)
    with query.start() as running:
        for b, batch in enumerate(fed[2:], start=2):
            query.feed(running, b, batch)
        stats = running.statistics()
        rejected = running.rejected()
    _, counts = expected(fed, list(range(len(fed))))
    assert stats["inputs"] == counts
    assert seen(rejected) == quarantined(fed)


def test_a_null_in_a_not_null_column_fails_run_naming_it(spark: Any) -> None:
    """Under on_bad "fail", a null in a column the input's schema declares NOT NULL is a
    ValueError naming the input, the column and the row, at the input."""
    xs = spark.createDataFrame([(1.0,), (None,)], "x double")
    ys = spark.createDataFrame([(2.0,)], "x double")
    with pytest.raises(ValueError, match=r"input 'xs': column 'x' is null in the row \(x=None\)"):
        dfspark.run(CountBoth(), spark, xs=xs, ys=ys, schema="x double, n long").collect()


def test_an_unknown_mode_is_refused(spark: Any) -> None:
    """on_bad is checked before anything starts, naming the bad mode."""
    rates = spark.readStream.format("rate").load().selectExpr("value as x")
    with pytest.raises(ValueError, match="on_bad: 'drop' is not one of"):
        dfspark.stream(CountBoth(), spark, xs=rates, ys=rates, schema="x long, n long",
                       foreach_batch=lambda frame, batch: None, on_bad="drop")  # fmt: skip
