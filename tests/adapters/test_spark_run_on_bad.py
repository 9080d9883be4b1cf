"""``dfspark.run(..., on_bad=...)`` on a real local Spark: bad rows (a null or negative time,
a null diff, a NaN, a null in a column declared NOT NULL) at random places, skipped or
quarantined per input; the output equals ``df.run``'s over the good rows alone, every row is
counted, and each quarantined one is in ``rejected`` exactly once, however many times the
result is read."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

import deltaflow as df

pytestmark = pytest.mark.spark

dfspark = pytest.importorskip("deltaflow.adapters.spark")

SCHEMA = "x double, time long, diff long"


class CountBoth(df.Pipeline):
    """``(x, n)``: how many times each ``x`` occurs in ``xs`` and ``ys`` together."""

    schemas = {"xs": "x double not null", "ys": "x double not null"}

    def build(self, xs: df.Collection, ys: df.Collection) -> df.Collection:
        return xs.concat(ys).map(lambda x: (x, x)).count()


BAD = [
    (None, 1, 1),  # a null in a NOT NULL column
    (math.nan, 1, 1),  # a NaN
    (2.0, None, 1),  # a null time
    (2.0, -1, 1),  # a negative time
    (2.0, 1, None),  # a null diff
]


def rows(rng: random.Random, n: int) -> tuple[list[tuple[Any, Any, Any]], list[int]]:
    """``n`` good rows (never a negative count) with bad ones at random places, and the
    positions of the bad ones."""
    out: list[tuple[Any, Any, Any]] = [
        (float(rng.randrange(4)), rng.randrange(4), rng.choice([1, 1, 2])) for _ in range(n)
    ]
    bad = []
    for _ in range(rng.randrange(1, 6)):
        at = rng.randrange(len(out) + 1)
        out.insert(at, rng.choice(BAD))
    bad = [i for i, r in enumerate(out) if r in BAD or (r[0] is not None and r[0] != r[0])]
    return out, bad


def key(datum: Any) -> str:
    return repr(datum)  # NaN is not equal to itself; its repr is


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bad_rows_are_skipped_or_quarantined_exactly_once(spark: Any, seed: int) -> None:
    rng = random.Random(seed)
    xs, bad_xs = rows(rng, 30)
    ys, bad_ys = rows(rng, 20)
    frames = {
        "xs": spark.createDataFrame(xs, SCHEMA),
        "ys": spark.createDataFrame(ys, SCHEMA),
    }
    good = {
        name: [r for i, r in enumerate(rs) if i not in bad]
        for name, rs, bad in (("xs", xs, bad_xs), ("ys", ys, bad_ys))
    }
    expected = df.run(CountBoth(), **good)
    runs = []
    for _ in range(2):  # two runs: each counts its own rows once
        rejected: list[df.Rejected] = []
        counts: dict[str, dict[str, int]] = {}
        out = dfspark.run(
            CountBoth(),
            spark,
            schema="x double, n long",
            partitions=2,
            on_bad={"xs": "quarantine", "ys": "skip"},
            rejected=rejected,
            counts=counts,
            **frames,
        )
        first = sorted(tuple(r) for r in out.collect())
        assert sorted(tuple(r) for r in out.collect()) == first  # read twice: the same rows
        assert out.count() == len(first)
        assert [((x, n), t, d) for x, n, t, d in sorted(first, key=repr)] == sorted(
            expected, key=repr
        )
        assert counts["xs"] == {"read": len(xs), "accepted": len(xs) - len(bad_xs),
                                "refused": len(bad_xs), "skipped": 0,
                                "quarantined": len(bad_xs)}  # fmt: skip
        assert counts["ys"] == {"read": len(ys), "accepted": len(ys) - len(bad_ys),
                                "refused": len(bad_ys), "skipped": len(bad_ys),
                                "quarantined": 0}  # fmt: skip
        assert {r.input for r in rejected} <= {"xs"}
        assert Counter(key(r.datum) for r in rejected) == Counter(key(xs[i][0]) for i in bad_xs)
        assert len({r.where for r in rejected}) == len(rejected)  # each row once
        assert all(r.where.startswith("partition ") for r in rejected)
        runs.append((first, counts, [(key(r.datum), r.reason) for r in rejected]))
    assert runs[0][1] == runs[1][1]
    assert sorted(runs[0][2]) == sorted(runs[1][2])


def test_on_bad_is_checked_and_fail_stays_the_default(spark: Any) -> None:
    """A bad row stops the run by default, naming the input and the column; quarantine
    without a list to receive the rows is refused before any Spark job; a bad mode is
    named."""
    xs = spark.createDataFrame([(1.0, 0, 1), (None, 0, 1)], SCHEMA)
    ys = spark.createDataFrame([(1.0, 0, 1)], SCHEMA)
    with pytest.raises(ValueError, match=r"input 'xs': column 'x' is null"):
        dfspark.run(CountBoth(), spark, schema="x double, n long", partitions=2, xs=xs, ys=ys)
    with pytest.raises(ValueError, match=r"needs rejected=\[\]"):
        dfspark.run(CountBoth(), spark, schema="x double, n long", on_bad="quarantine",
                    xs=xs, ys=ys)  # fmt: skip
    with pytest.raises(ValueError, match="on_bad: 'drop' is not one of"):
        dfspark.run(CountBoth(), spark, schema="x double, n long", on_bad="drop", xs=xs, ys=ys)
    counts: dict[str, dict[str, int]] = {}
    out = dfspark.run(CountBoth(), spark, schema="x double, n long", partitions=2,
                      on_bad="skip", counts=counts, xs=xs, ys=ys)  # fmt: skip
    assert sorted(tuple(r) for r in out.collect()) == [(1.0, 2, 0, 1)]
    assert counts["xs"]["skipped"] == 1 and counts["ys"]["refused"] == 0
