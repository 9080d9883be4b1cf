"""Log records, per-operator statistics and the progress line."""

from __future__ import annotations

import io
import logging

import pytest
import trio

import deltaflow as df
from deltaflow.scheduler.observe import OperatorCounts, ProgressLine, _Counted


class Counts(df.Pipeline):
    def build(self, words: df.Collection) -> df.Collection:
        return words.map(lambda w: (w, ())).count()


WORDS = [("a", 0, 1), ("b", 0, 1), ("a", 1, 1)]


def test_info_records_job_start_and_stop(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="deltaflow"):
        df.run(Counts(), workers=2, words=WORDS)
    messages = [r.getMessage() for r in caplog.records if r.name == "deltaflow"]
    assert messages[0] == "job Counts started: 2 workers, 1 process"
    assert messages[-1].startswith("job Counts finished in ")
    assert messages[-1].endswith(": 2 workers, 1 process")
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_debug_records_frontiers_and_operator_work(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="deltaflow"):
        df.run(Counts(), words=WORDS)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "output 'output': time 0 complete, 2 updates" in debug
    assert "output 'output': time 1 complete, 2 updates" in debug
    work = [m for m in debug if m.startswith("operator 'count'")]
    assert len(work) == 1 and "3 records in" in work[0]


def test_a_failed_job_is_logged_as_stopped(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(df.Pipeline):
        def build(self, xs: df.Collection) -> df.Collection:
            return xs.map(lambda x: 1 // x)

    with caplog.at_level(logging.INFO, logger="deltaflow"), pytest.raises(df.OperatorError):
        df.run(Broken(), xs=[(0, 0, 1)])
    assert "stopped after" in caplog.records[-1].getMessage()
    assert "ZeroDivisionError" in caplog.records[-1].getMessage()


def test_the_library_configures_no_handlers() -> None:
    logger = logging.getLogger("deltaflow")
    assert all(isinstance(h, logging.NullHandler) for h in logger.handlers)
    assert logger.level == logging.NOTSET


def test_statistics_per_operator_when_profiled() -> None:
    async def main() -> dict[str, object]:
        async with df.open(Counts(), 2, profile=True) as job:
            job.inputs["words"].insert_many(["a", "b", "a"])
            await job.advance_to(1)
        return job.statistics()

    stats = trio.run(main)
    ops = {op["name"]: op for op in stats["operators"]}  # type: ignore[attr-defined]
    assert ops["count"]["records"] == 3
    assert ops["count"]["activations"] >= 2
    assert ops["input:words"]["arranged"] == 0


def test_unprofiled_statistics_name_operators_only() -> None:
    job = df.Job(Counts())
    assert all(set(op) == {"name", "arranged"} for op in job.statistics()["operators"])


def test_progress_line_reports_time_rate_and_elapsed() -> None:
    job = df.Job(Counts())
    out = io.StringIO()
    line = ProgressLine(job, stream=out)
    line.show()
    line.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("deltaflow: time 0 | 0 updates out | ")
    assert " s | 0 read, 0 refused" in lines[0] and "updates/s" in lines[0]


def test_run_with_progress_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    df.run(Counts(), progress=True, words=WORDS)
    err = capsys.readouterr().err
    assert "deltaflow: time done | 4 updates out" in err


def test_progress_after_a_delay_stays_quiet_for_a_short_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    df.run(Counts(), progress=5.0, words=WORDS)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress must be"):
        df.run(Counts(), progress=-1, words=WORDS)


def test_disabled_debug_logging_adds_no_counting() -> None:
    """With the logger above DEBUG no activation is wrapped, so the hot path is as before."""
    job = df.Job(Counts())
    assert job._operator_counts is None
    assert all(type(a.operator).__name__ != "_Counted" for w in job.workers for a in w.actors)


def test_counting_keeps_operators_themselves_and_handles_slotted_ones() -> None:
    """Counting sets ``schedule`` on the operator itself (its class is unchanged); an
    operator that takes no new attributes is wrapped instead, everything else delegated."""
    job = df.Job(Counts(), profile=True)
    assert all(type(a.operator).__name__ != "_Counted" for w in job.workers for a in w.actors)

    class Slotted:
        __slots__ = ("seen",)

        def __init__(self) -> None:
            self.seen = 0

        def schedule(self, ctx: object) -> None:
            self.seen += 1

    class Ctx:
        mailboxes = [[(0, [1, 2, 3])], [(1, "x")]]

    counts = OperatorCounts("slotted")
    wrapped = _Counted(Slotted(), counts)
    wrapped.schedule(Ctx())
    assert wrapped.seen == 1
    assert (counts.activations, counts.records, counts.ports) == (1, 4, [3, 1])
