"""Every record accounted for: on_bad (fail, skip, quarantine), df.Rejected, statistics() per
input and output, declared schemas at every entry point, optional inputs, and the
Prometheus endpoint; quarantine checked against an oracle across a checkpoint and resume."""

from __future__ import annotations

import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

import deltaflow as df


class Totals(df.Pipeline):
    """(user, n) rows to (user, total of n)."""

    schemas = {"events": "user string, n long not null"}

    def build(self, events: df.Collection) -> df.Collection:
        return events.sum()


class Clicks(df.Pipeline):
    """Clicks minus bots; ``bots`` may be left out."""

    def build(self, clicks: df.Collection, bots: df.Collection = df.optional()) -> df.Collection:
        return clicks.concat(bots.negate()).map(lambda u: (u, None)).count()


class Pairs(df.Pipeline):
    def build(self, left: df.Collection, right: df.Collection) -> df.Collection:
        return left.join(right)


class Crash(Exception):
    pass


# -- declared schemas hold at every entry point ----------------------------------------------
async def test_insert_is_checked_against_the_declared_schema() -> None:
    """A Python insert that does not fit the schema is refused where it is fed, naming the
    input and the value; the job goes on with what was fed before."""
    async with df.open(Totals()) as job:
        job.inputs["events"].insert(("u1", 3))
        with pytest.raises(ValueError, match=r"input 'events': \('u1', 'x'\) does not fit.*bigint"):
            job.inputs["events"].insert(("u1", "x"))
        with pytest.raises(ValueError, match="'n' is null, but it is declared NOT NULL"):
            job.inputs["events"].insert(("u1", None))
        with pytest.raises(ValueError, match="not a tuple of the 2 declared columns"):
            job.inputs["events"].insert("u1")
        await job.advance_to(1)
        assert job.output.at(0) == {("u1", 3): 1}
        assert job.statistics()["inputs"]["events"]["refused"] == 3


def test_run_checks_python_updates_against_the_declared_schema() -> None:
    """df.run refuses a datum that does not fit the schema, naming the input and update."""
    with pytest.raises(ValueError, match=r"input 'events': \(\('u1', 'x'\), 0, 1\) does not fit"):
        df.run(Totals(), events=[(("u1", 1), 0, 1), (("u1", "x"), 0, 1)])


def test_a_null_in_a_not_null_column_is_refused_at_the_file_line(tmp_path: Path) -> None:
    """An empty cell of a NOT NULL column is refused at its line when read, not deep in an
    operator; with on_bad="skip" it is counted and the rest runs."""
    from deltaflow.adapters.files import read_updates

    path = tmp_path / "events.csv"
    path.write_text("user,n\nu1,2\nu2,\nu1,5\n")
    schema = Totals().input_schema("events")
    with pytest.raises(ValueError, match=r"line 3: column 'n' is null \(''\), but it is declared"):
        read_updates(path, "events", schema)
    refused: list[Any] = []
    got = read_updates(path, "events", schema, refuse=lambda e, r, w: refused.append((r, w)))
    assert got == [(("u1", 2), 0, 1), (("u1", 5), 0, 1)]
    assert refused == [(("u2", ""), f"{path}, line 3")]


# -- parse errors name the right line, and what to do ---------------------------------------
def test_an_unclosed_quote_is_reported_at_its_line(tmp_path: Path) -> None:
    """A quote opened on line 3 and never closed is reported as line 3, saying what to do."""
    from deltaflow.adapters.files import read_updates

    path = tmp_path / "xs.csv"
    path.write_text('a,b,c\n1,2,3\n4,"5,6\n7,8,9\n')
    with pytest.raises(ValueError, match="line 3: a quoted field opens here and is never closed"):
        read_updates(path, "xs")


def test_a_bare_datum_is_said_to_need_an_update_triple() -> None:
    """A datum where an update triple is expected says a (data, time, diff) was expected."""
    with pytest.raises(TypeError, match=r"expected an update triple \(data, time, diff\)"):
        df.run(Clicks(), clicks=[("u1", "/a", 10)])
    with pytest.raises(ValueError, match=r"expected an update triple \(data, time, diff\)"):
        df.run(Clicks(), clicks=["u1"])


# -- omitted inputs ----------------------------------------------------------------------------
def test_an_omitted_input_is_an_error_naming_it() -> None:
    """Leaving out an input is an error naming it; an optional one is empty."""
    with pytest.raises(TypeError, match=r"input\(s\) 'right' not given"):
        df.run(Pairs(), left=[((1, "a"), 0, 1)])
    assert df.run(Clicks(), clicks=[("u1", 0, 1)]) == [(("u1", 1), 0, 1)]
    assert df.run(Clicks(), clicks=[("u1", 0, 1)], bots=[("u1", 0, 1)]) == []
    assert Clicks().optional_inputs() == ["bots"]


# -- on_bad: skip and quarantine -------------------------------------------------------------
def test_run_skips_and_quarantines_bad_updates() -> None:
    """df.run with on_bad: good updates processed, bad ones counted or handed back."""
    updates = [
        (("u1", 1), 0, 1),
        (("u1", "x"), 0, 1),
        "bare",
        (("u2", 2), 1, 1),
        (("u2", None), 1, 1),
    ]
    assert df.run(Totals(), on_bad="skip", events=updates) == [
        (("u1", 1), 0, 1),
        (("u2", 2), 1, 1),
    ]
    rejected: list[df.Rejected] = []
    out = df.run(Totals(), on_bad={"events": "quarantine"}, rejected=rejected, events=updates)
    assert out == [(("u1", 1), 0, 1), (("u2", 2), 1, 1)]
    assert [(r.input, r.datum, r.where) for r in rejected] == [
        ("events", (("u1", "x"), 0, 1), "update 1"),
        ("events", "bare", "update 2"),
        ("events", (("u2", None), 1, 1), "update 4"),
    ]
    assert "bigint" in rejected[0].reason and "NOT NULL" in rejected[2].reason
    with pytest.raises(ValueError, match="needs rejected="):
        df.run(Totals(), on_bad="quarantine", events=updates)
    with pytest.raises(ValueError, match="on_bad names the input 'nope'"):
        df.run(Totals(), on_bad={"nope": "skip"}, events=updates)
    with pytest.raises(ValueError, match="'drop' is not one of"):
        df.run(Totals(), on_bad="drop", events=updates)


async def test_statistics_count_every_record(workers: int) -> None:
    """statistics(): per input read/accepted/refused/skipped/quarantined, per output written."""
    async with df.open(Totals(), workers, on_bad={"events": "quarantine"}) as job:
        events = job.inputs["events"]
        events.insert(("u1", 1))
        events.insert(("u1", "x"))
        events.insert_many([("u2", 2), ("u2", None), ["unhashable"]])
        events.update_at(("u3", 3), 2)
        events.update_at(("u3", 3), "soon")
        await job.advance_to(3)
        stats = job.statistics()
    assert stats["inputs"]["events"] == {
        "read": 7,
        "accepted": 3,
        "refused": 4,  # the update at time "soon" is the fourth
        "skipped": 0,
        "quarantined": 4,
        "on_bad": "quarantine",
    }
    assert [r.datum for r in job.rejected] == [("u1", "x"), ("u2", None), ["unhashable"], ("u3", 3)]
    assert stats["outputs"]["output"]["written"] == 3  # u1, u2 at 0; u3 at 2
    assert stats["outputs"]["output"]["frontier"] == [3]
    assert stats["time"] == 3


# -- quarantine across a checkpoint and resume, against an oracle ----------------------------
GOOD = st.tuples(st.sampled_from(["u1", "u2", "u3"]), st.integers(0, 9))
BAD = st.one_of(
    st.tuples(st.sampled_from(["u1", "u2"]), st.sampled_from(["x", "1.5", ""])),
    st.tuples(st.sampled_from(["u1", "u2"]), st.none()),
    st.sampled_from(["bare", 7]),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
)
RECORDS = st.lists(
    st.tuples(st.integers(0, 5), st.booleans(), GOOD, BAD).map(
        lambda r: (r[0], r[2] if r[1] else r[3], r[1])
    ),
    max_size=25,
)


def _feed_at(job: df.Job, records: list[tuple[int, Any, bool]], time: int) -> None:
    for t, datum, _ in records:
        if t == time:
            job.inputs["events"].insert(datum)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=RECORDS, checkpoint=st.integers(0, 5), crash=st.integers(0, 5))
def test_quarantine_across_a_checkpoint_and_resume(
    tmp_path_factory: pytest.TempPathFactory,
    workers: int,
    records: list[tuple[int, Any, bool]],
    checkpoint: int,
    crash: int,
) -> None:
    """Random bad records at random places: the good records' output equals the oracle over
    the good ones alone, and every bad one is in job.rejected exactly once, across a
    checkpoint, a crash and a resume that feeds again from the checkpoint's time."""
    crash = max(crash, checkpoint)
    end = 6
    location = tmp_path_factory.mktemp("state")

    async def first() -> None:
        with pytest.raises(Crash):
            async with df.open(Totals(), workers, checkpoint=location, on_bad="quarantine") as job:
                for time in range(crash + 1):
                    await job.advance_to(time)
                    if time == checkpoint:
                        await job.checkpoint()
                    _feed_at(job, records, time)
                job.flush()
                raise Crash

    async def second() -> tuple[df.Job, dict[int, dict[Any, int]]]:
        async with df.open(Totals(), workers, checkpoint=location, on_bad="quarantine") as job:
            assert job.resumed_at == checkpoint
            at: dict[int, dict[Any, int]] = {}
            for time in range(checkpoint, end + 1):
                await job.advance_to(time)
                if time > checkpoint:
                    at[time - 1] = job.output.at(time - 1)
                _feed_at(job, records, time)
            await job.advance_to(end + 1)
            at[end] = job.output.at(end)
        return job, at

    trio.run(first)
    job, at = trio.run(second)
    for time, got in at.items():
        totals: Counter[str] = Counter()
        for t, datum, good in records:
            if good and t <= time:
                totals[datum[0]] += datum[1]
        assert got == dict.fromkeys(totals.items(), 1), time
    bad = [(repr(d), f"fed at time {t}") for t, d, good in records if not good]
    assert sorted((repr(r.datum), r.where) for r in job.rejected) == sorted(bad)
    counts = job.statistics()["inputs"]["events"]
    assert counts["read"] == len(records)
    assert counts["quarantined"] == counts["refused"] == len(bad)


# -- metrics ---------------------------------------------------------------------------------
async def test_metrics_endpoint_serves_the_statistics() -> None:
    """open(metrics=0) serves Prometheus text on loopback with the live counts."""
    pytest.importorskip("prometheus_client")
    async with df.open(Totals(), on_bad="skip", metrics=0) as job:
        assert job.metrics_url is not None
        assert job.metrics_url.startswith("http://127.0.0.1:")
        job.inputs["events"].insert(("u1", 4))
        job.inputs["events"].insert(("u1", "x"))
        await job.advance_to(1)

        url = job.metrics_url
        text = await trio.to_thread.run_sync(_get, url)
        assert 'deltaflow_input_records_total{input="events",outcome="read"} 2.0' in text
        assert 'deltaflow_input_records_total{input="events",outcome="skipped"} 1.0' in text
        assert 'deltaflow_output_updates_total{output="output"} 1.0' in text
        assert 'deltaflow_output_frontier{output="output"} 1.0' in text
        job.inputs["events"].insert(("u2", 1))
        await job.advance_to(2)
        text = await trio.to_thread.run_sync(_get, url)
        assert 'deltaflow_input_records_total{input="events",outcome="read"} 3.0' in text
    with pytest.raises(OSError):  # the port is closed with the job
        await trio.to_thread.run_sync(_get, url)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode("utf-8"))


async def test_quarantine_with_workers_in_processes(tmp_path: Path) -> None:
    """With processes=2 the caller's inputs set records aside the same way, and a resume
    from a checkpoint keeps those of earlier times exactly once."""
    async with df.open(Totals(), 2, processes=2, on_bad="quarantine", checkpoint=tmp_path) as job:
        job.inputs["events"].insert(("u1", 1))
        job.inputs["events"].insert(("u1", "x"))
        await job.advance_to(1)
        job.inputs["events"].insert(("u2", None))  # at time 1: after the block's checkpoint
    assert [r.datum for r in job.rejected] == [("u1", "x"), ("u2", None)]
    async with df.open(Totals(), 2, processes=2, on_bad="quarantine", checkpoint=tmp_path) as job:
        assert job.resumed_at == 1
        assert [r.datum for r in job.rejected] == [("u1", "x")]  # times before 1
        job.inputs["events"].insert(("u2", None))  # fed again from the checkpoint's time
        await job.advance_to(2)
        assert [r.datum for r in job.rejected] == [("u1", "x"), ("u2", None)]
        assert job.statistics()["inputs"]["events"]["read"] == 3
        assert job.output.at(1) == {("u1", 1): 1}


# -- one account's counts against a recompute, closed round by round -----------------------
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["admit", "refuse"]), st.integers(0, 4), st.integers(0, 3), st.booleans()
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(events=EVENTS, mode=st.sampled_from(["skip", "quarantine"]))
def test_an_account_counts_like_a_recompute_as_rounds_close(
    events: list[tuple[str, int, int, bool]], mode: str
) -> None:
    """Records admitted (``n`` of them, 0 too) and refused at times, the account closed before
    a rising time now and then: its counts, a checkpoint's and an absorbed copy's are the
    totals recomputed from the records."""
    from deltaflow.scheduler.accounting import InputAccount

    account = InputAccount("events", mode)
    copy = InputAccount("events", mode)
    fed: list[tuple[str, int, int]] = []
    now = 0
    for kind, time, n, close in events:
        at = now + time
        if kind == "admit":
            account.admitted(at, n)
        else:
            account.refuse(ValueError("bad"), n, "here", at)
        fed.append((kind, at, n))
        if close:
            now += 1
            account.close_before(now)

    def totals(before: int | None) -> dict[str, int]:
        kept = [(k, n) for k, at, n in fed if before is None or at < before]
        read = sum(n for k, n in kept if k == "admit") + sum(1 for k, _ in kept if k == "refuse")
        refused = sum(1 for k, _ in kept if k == "refuse")
        return {
            "read": read,
            "accepted": read - refused,
            "refused": refused,
            "skipped": refused if mode == "skip" else 0,
            "quarantined": refused if mode == "quarantine" else 0,
        }

    assert account.counts() == totals(None)
    copy.absorb(account)
    assert copy.counts() == totals(None)
    saved = account.saved(now + 2)
    want = totals(now + 2)
    assert saved["counts"] == {f: want[f] for f in ("read", "refused", "skipped", "quarantined")}
    restored = InputAccount("events", mode)
    restored.restore(saved)
    assert restored.counts() == want
    assert [r.datum for r in restored.rejected()] == [
        n for k, at, n in fed if k == "refuse" and at < now + 2 and mode == "quarantine"
    ]
