"""The command line: ``python -m deltaflow`` (or ``deltaflow``).

``run module:Pipeline --input NAME=FILE ... [--output FILE]`` runs a pipeline over files of
updates (``.csv`` or ``.jsonl``, see :mod:`deltaflow.adapters.files`), or PostgreSQL tables
(``--input orders=postgresql://user@host/database/orders``: the table's rows, read through
a replication slot dropped afterwards, see :mod:`deltaflow.adapters.postgres.source`), and
writes its output
updates as JSON lines, to stdout without ``--output``. ``--time-column`` / ``--diff-column``
name the files' time and diff columns (default ``time`` and ``diff``); an input the pipeline
declares in ``Pipeline.schemas`` is read by its declared columns and types. A progress line
(time reached, updates/s, elapsed) appears on stderr once the job has run a second, at once
with ``--progress``. ``--dashboard PORT`` serves the job's live dashboard (see
:mod:`deltaflow.scheduler.dashboard`) and writes its address on stderr.

Bad records: ``--on-bad MODE`` (every input) or ``--on-bad NAME=MODE``, ``MODE`` one of
``fail`` (the default: the run stops at the first, exit code 2), ``skip`` (left out,
counted) or ``quarantine`` (left out, counted, and written with their input, line and reason
as JSON lines to ``--rejected FILE``, default ``rejected.jsonl``). When any record was
refused, an end summary on stderr says how many per input. Every input ``build()`` takes must
be given but for those it declares optional (``df.optional()``). ``--log-level LEVEL``
shows the ``deltaflow`` logger's records from ``LEVEL`` on (``WARNING``, ``INFO``,
``DEBUG``) on stderr; ``--metrics PORT`` serves the job's statistics to Prometheus on the
loopback interface while it runs (``HOST:PORT`` to bind elsewhere).

A directory given as an input (``--input events=incoming/``) is a files source
(``df.sources.files``): each CSV, JSON-lines or Parquet file in it is one time, oldest
first, after the other inputs' times. ``run`` reads the files there now; with ``--follow``
it keeps watching the directory, writes each time's output as JSON lines as soon as the time
closes (flushed), and runs until interrupted (Ctrl-C: exit code 130, what was written
stays).

``graph module:Pipeline [--format mermaid|dot]`` writes the planned graph
(:mod:`deltaflow.scheduler.graph`); with ``--input`` files it runs the pipeline first and
annotates each operator with its records and arrangement sizes.

``module:Pipeline`` names a module importable from the current directory (or a ``.py`` file)
and, in it, a :class:`~deltaflow.Pipeline` subclass (called with no arguments) or instance.

    $ python -m deltaflow run wordcount:WordCount --input words=words.csv --workers 2
    {"data": ["cat", 2], "time": 0, "diff": 1}
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import trio

from . import __version__
from .adapters.files import read_updates, write_jsonl
from .errors import DeltaflowError
from .operators.pipeline import Pipeline
from .scheduler.accounting import InputAccount, Rejected, check_on_bad, make_accounts
from .scheduler.collector import GC_THRESHOLD
from .scheduler.graph import FORMATS, graph
from .scheduler.runtime import Job, check_inputs, execute, open
from .scheduler.sources import is_source

__all__ = ["load_pipeline", "main"]

PROGRESS_AFTER = 1.0
"""Seconds a job runs before its progress line appears (without ``--progress``)."""


class UsageError(Exception):
    """A command line that cannot run: reported as ``deltaflow: error: ...``, exit code 2."""


def load_pipeline(target: str) -> Pipeline:
    """The pipeline ``module:attr`` names: a Pipeline subclass (called with no arguments) or
    instance; ``module`` is a module name importable from the current directory or a path to
    a ``.py`` file.

    Raises:
        UsageError: the target is malformed, missing, or not a pipeline.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        msg = f"expected module:Pipeline, got {target!r}"
        raise UsageError(msg)
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.is_file():
                msg = f"no Python file {module_name!r}"
                raise UsageError(msg)
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        msg = f"cannot import {module_name!r}: {exc}"
        raise UsageError(msg) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            msg = f"module {module_name!r} has no {attr!r}"
            raise UsageError(msg)
        obj = getattr(obj, part)
    if isinstance(obj, type) and issubclass(obj, Pipeline):
        try:
            obj = obj()
        except TypeError as exc:
            msg = f"{target}: a Pipeline class must take no arguments ({exc}); name an instance"
            raise UsageError(msg) from None
    if not isinstance(obj, Pipeline):
        msg = f"{target} is {obj!r}, not a deltaflow Pipeline subclass or instance"
        raise UsageError(msg)
    return obj


def _inputs(
    pipeline: Pipeline,
    specs: Sequence[str],
    time: str = "time",
    diff: str = "diff",
    accounts: dict[str, InputAccount] | None = None,
) -> dict[str, Any]:
    names = pipeline.input_names()
    out: dict[str, Any] = {}
    tables: dict[str, str] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            msg = f"--input expects NAME=FILE, got {spec!r}"
            raise UsageError(msg)
        if name not in names:
            msg = f"--input {name}: {type(pipeline).__name__} has the inputs {names}"
            raise UsageError(msg)
        if name in out:
            msg = f"--input {name} given twice"
            raise UsageError(msg)
        if file.startswith(("postgresql://", "postgres://")):
            tables[name] = file
            continue
        if Path(file).is_dir():
            from .adapters.sources import files

            out[name] = files(file)
            continue
        if not Path(file).is_file():
            msg = f"--input {name}: no file {file!r}"
            raise UsageError(msg)
        account = None if accounts is None else accounts[name]
        refuse = None
        if account is not None and account.mode != "fail":
            refuse = functools.partial(_set_aside, account)
        try:
            schema = pipeline.input_schema(name)
            out[name] = read_updates(file, name, schema, time=time, diff=diff, refuse=refuse)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    out.update(_postgres(tables))
    return out


def _set_aside(account: InputAccount, exc: BaseException, record: Any, where: str) -> None:
    account.refuse(exc, record, where, 0)


def _on_bad(pipeline: Pipeline, specs: Sequence[str]) -> dict[str, str]:
    """``--on-bad`` values (``MODE`` for every input, ``NAME=MODE`` for one) as modes by
    input name."""
    names = pipeline.input_names()
    default = "fail"
    explicit: dict[str, str] = {}
    for spec in specs:
        name, sep, mode = spec.rpartition("=")
        try:
            check_on_bad({name: mode} if sep else mode, names)
        except ValueError as exc:
            msg = f"--on-bad {spec}: {exc}"
            raise UsageError(msg) from None
        if sep:
            explicit[name] = mode
        else:
            default = mode
    return {n: explicit.get(n, default) for n in names}


def _write_rejected(path: str, rejected: Sequence[Rejected]) -> None:
    """The quarantined records as JSON lines: input, datum, reason, where."""
    with Path(path).open("w", encoding="utf-8") as stream:
        for r in rejected:
            record = {"input": r.input, "datum": r.datum, "reason": r.reason, "where": r.where}
            stream.write(json.dumps(record, default=repr) + "\n")


def _summary(stats: dict[str, Any], rejected_path: str | None) -> str:
    """One line per input that refused records and per window operator that dropped late
    rows, and what the outputs wrote."""
    out = []
    for name, c in stats["inputs"].items():
        if not c["refused"]:
            continue
        aside = []
        if c["skipped"]:
            aside.append(f"{c['skipped']:,} skipped")
        if c["quarantined"]:
            aside.append(f"{c['quarantined']:,} quarantined to {rejected_path}")
        out.append(
            f"deltaflow: input {name!r}: {c['read']:,} read, {c['accepted']:,} accepted, "
            f"{c['refused']:,} refused ({', '.join(aside)})"
        )
    for name, n in stats.get("late", {}).items():
        if n:
            out.append(f"deltaflow: {name}: {n:,} late row(s) not applied")
    if out:
        written = ", ".join(f"{name!r} {o['written']:,}" for name, o in stats["outputs"].items())
        out.append(f"deltaflow: updates written: {written}")
    return "".join(line + "\n" for line in out)


def _postgres(urls: dict[str, str]) -> dict[str, Any]:
    """One-off reads of PostgreSQL tables (``{input: url}``): their rows and the changes
    committed while the job starts, through slots dropped afterwards. The tables of one
    database are read through one slot, in one snapshot (one source for their inputs)."""
    import os

    from .adapters.postgres.source import from_url, postgres

    by_dsn: dict[str, dict[str, str]] = {}
    for name, url in urls.items():
        try:
            dsn, table = from_url(url)
        except ValueError as exc:
            raise UsageError(f"--input {name}: {exc}") from None
        by_dsn.setdefault(dsn, {})[name] = table
    out: dict[str, Any] = {}
    for i, (dsn, tables) in enumerate(by_dsn.items()):
        slot = f"deltaflow_cli_{os.getpid()}_{i}"
        several = tables if len(tables) > 1 else next(iter(tables.values()))
        source = postgres(dsn, several, slot=slot, temporary=True)
        out.update(dict.fromkeys(tables, source))
    return out


def _write(result: Any, path: str | None) -> None:
    stream = sys.stdout if path is None else Path(path).open("w", encoding="utf-8")  # noqa: SIM115
    try:
        if isinstance(result, dict):
            for name, updates in result.items():
                write_jsonl(stream, updates, name)
        else:
            write_jsonl(stream, result)
    finally:
        if path is not None:
            stream.close()
        else:
            stream.flush()


def _run(args: argparse.Namespace) -> None:
    pipeline = load_pipeline(args.target)
    if args.time_column == args.diff_column:
        msg = f"--time-column and --diff-column are both {args.time_column!r}"
        raise UsageError(msg)
    modes = _on_bad(pipeline, args.on_bad)
    accounts = make_accounts(pipeline.input_names(), modes)
    inputs = _inputs(pipeline, args.input, args.time_column, args.diff_column, accounts)
    try:
        check_inputs(pipeline, inputs, "--input {name}=FILE")
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    progress: bool | float = True if args.progress else PROGRESS_AFTER
    rejected: list[Rejected] = []
    served = None if args.dashboard is None else (args.dashboard_host, args.dashboard)
    sinks = None
    if args.follow:
        if not any(is_source(i) for i in inputs.values()):
            msg = "--follow watches a directory: give one as an input (--input NAME=DIR)"
            raise UsageError(msg)
        names = pipeline.instantiate().stores
        stream = sys.stdout if args.output is None else _open_output(args.output)
        sinks = {n: _Lines(stream, None if len(names) == 1 else n) for n in names}
    result, stats = execute(
        pipeline,
        args.workers,
        processes=args.processes,
        fuse=True,
        gc_threshold=GC_THRESHOLD,
        progress=progress,
        rejected=rejected,
        metrics=args.metrics,
        dashboard=served,
        accounts=accounts,
        opened=_tell_dashboard,
        inputs=inputs,
        sinks=sinks,
        follow=args.follow,
    )
    if not args.follow:  # (following, each time was written as it closed)
        _write(result, args.output)
    quarantine = any(a.mode == "quarantine" for a in accounts.values())
    if quarantine:
        _write_rejected(args.rejected, rejected)
    sys.stderr.write(_summary(stats, args.rejected if quarantine else None))


def _open_output(path: str) -> IO[str]:
    """``--output`` for ``--follow``: open while the job runs (until the process ends)."""
    return Path(path).open("w", encoding="utf-8")


@attrs.define(eq=False)
class _Lines:
    """A sink writing each closed time's updates of one output as JSON lines (``--follow``),
    flushed at once (``output``: the output's name on each line, with several)."""

    stream: IO[str]
    output: str | None
    written: int | None = None

    async def open(self, output: str) -> _Lines:
        return self

    async def write(self, time: int, updates: list[tuple[Any, int]]) -> None:
        write_jsonl(self.stream, [(d, time, r) for d, r in updates], self.output)
        self.stream.flush()
        self.written = time

    async def aclose(self) -> None:
        self.stream.flush()


def _tell_dashboard(job: Job) -> None:
    """Write the running job's dashboard and metrics addresses (those it serves) on stderr
    (``--metrics 0`` picks a free port: this says which)."""
    if job.dashboard_url is not None:
        sys.stderr.write(f"deltaflow: dashboard at {job.dashboard_url}\n")
    if job.metrics_url is not None:
        sys.stderr.write(f"deltaflow: metrics at {job.metrics_url}\n")
    sys.stderr.flush()


async def _profiled(pipeline: Pipeline, workers: int, inputs: dict[str, list[Any]]) -> Job:
    async with open(pipeline, workers, profile=True) as job:
        for name, updates in inputs.items():
            by_time: dict[Any, tuple[list[Any], list[Any]]] = {}
            for data, time, diff in updates:
                slot = by_time.setdefault(time, ([], []))
                slot[0].append(data)
                slot[1].append(diff)
            for time, (data, diffs) in by_time.items():  # any order: all are at or after 0
                job.inputs[name].extend(data, diffs, time)
    return job


def _graph(args: argparse.Namespace) -> None:
    pipeline = load_pipeline(args.target)
    if args.input:
        inputs = _inputs(pipeline, args.input)
        if not all(isinstance(updates, list) for updates in inputs.values()):
            msg = "graph --input takes files (a database table is not read here)"
            raise UsageError(msg)
        text = graph(trio.run(_profiled, pipeline, args.workers, inputs), args.format)
    else:
        text = graph(pipeline, args.format, workers=args.workers)
    if args.output is None:
        sys.stdout.write(text + "\n")
    else:
        Path(args.output).write_text(text + "\n", encoding="utf-8")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deltaflow", description="Run deltaflow pipelines over files of updates."
    )
    parser.add_argument("--version", action="version", version=f"deltaflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_run_command(commands)
    _add_graph_command(commands)
    return parser


def _add_run_command(commands: Any) -> None:
    """``deltaflow run``: a pipeline over files of updates, its output as JSON lines."""
    run_cmd = commands.add_parser(
        "run", help="run a pipeline over .csv/.jsonl files, writing JSON lines"
    )
    run_cmd.add_argument("target", metavar="module:Pipeline")
    run_cmd.add_argument(
        "--input", action="append", default=[], metavar="NAME=FILE", help="an input's file"
    )
    run_cmd.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    run_cmd.add_argument(
        "--follow",
        action="store_true",
        help="keep watching the directory inputs, writing each time's output as it closes",
    )
    run_cmd.add_argument(
        "--workers", type=_positive, default=None, help="workers (default: one per process)"
    )
    run_cmd.add_argument(
        "--processes",
        type=_positive,
        default=1,
        help="processes the workers run in (default 1: this one); must divide --workers",
    )
    run_cmd.add_argument(
        "--time-column",
        default="time",
        metavar="NAME",
        help="the input files' column of (int) times (default: time; absent: every time 0)",
    )
    run_cmd.add_argument(
        "--diff-column",
        default="diff",
        metavar="NAME",
        help="the input files' column of (int) diffs (default: diff; absent: every diff 1)",
    )
    run_cmd.add_argument(
        "--on-bad",
        action="append",
        default=[],
        metavar="[NAME=]MODE",
        help="what an input (every input without NAME=) does with a bad record: fail "
        "(default), skip, or quarantine (to --rejected)",
    )
    run_cmd.add_argument(
        "--rejected",
        default="rejected.jsonl",
        metavar="FILE",
        help="where quarantined records go, as JSON lines (default: rejected.jsonl)",
    )
    _add_watch_options(run_cmd)
    run_cmd.set_defaults(handler=_run)


def _add_watch_options(command: argparse.ArgumentParser) -> None:
    """A command's options to watch its job while it runs: the progress line, the log, the
    dashboard and the Prometheus metrics."""
    command.add_argument(
        "--progress", action="store_true", help="show the progress line at once (not after 1 s)"
    )
    command.add_argument(
        "--dashboard",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve a live dashboard of the job on this port (0: a free one; its URL on stderr)",
    )
    command.add_argument(
        "--dashboard-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the dashboard's address (default 127.0.0.1; any other requires the URL's token)",
    )
    command.add_argument(
        "--log-level",
        type=_level,
        default=None,
        metavar="LEVEL",
        help="show deltaflow's log records from LEVEL on (DEBUG, INFO, WARNING, ERROR)",
    )
    command.add_argument(
        "--metrics",
        type=_address,
        default=None,
        metavar="[HOST:]PORT",
        help="serve the job's statistics to Prometheus at http://HOST:PORT/metrics while "
        "it runs (HOST default: 127.0.0.1)",
    )


def _add_graph_command(commands: Any) -> None:
    """``deltaflow graph``: the planned graph, annotated with work over files if given."""
    graph_cmd = commands.add_parser("graph", help="write the planned graph (Mermaid or DOT)")
    graph_cmd.add_argument("target", metavar="module:Pipeline")
    graph_cmd.add_argument("--format", choices=FORMATS, default="mermaid")
    graph_cmd.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="run over these files first and annotate operators with their work",
    )
    graph_cmd.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    graph_cmd.add_argument("--workers", type=_positive, default=1, help="workers (default 1)")
    graph_cmd.set_defaults(handler=_graph)


def _level(text: str) -> int:
    level = logging.getLevelName(text.upper())
    if not isinstance(level, int):
        msg = f"expected a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL), not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return level


def _address(text: str) -> int | tuple[str, int]:
    host, sep, port = text.rpartition(":")
    try:
        n = int(port)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535 or (sep and not host):
        msg = f"expected PORT or HOST:PORT, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return (host.strip("[]"), n) if sep else n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        msg = f"expected a positive int, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return n


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        msg = f"expected a port from 0 to 65535 (0: a free one), not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return n


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code: 0, 1 (the job failed), 2 (bad usage), 130
    (interrupted)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "log_level", None) is not None:
        logging.basicConfig(
            level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
        logging.getLogger("deltaflow").setLevel(args.log_level)
    try:
        args.handler(args)
    except UsageError as exc:
        parser.exit(2, f"deltaflow: error: {exc}\n")
    except (DeltaflowError, TypeError, ValueError, OSError) as exc:
        sys.stderr.write(f"deltaflow: {type(exc).__name__}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("deltaflow: interrupted\n")
        return 130
    return 0
