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
with ``--progress``.

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
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from . import __version__
from .adapters.files import read_updates, write_jsonl
from .errors import DeltaflowError
from .operators.collection import Pipeline
from .scheduler.collector import GC_THRESHOLD
from .scheduler.graph import FORMATS, graph
from .scheduler.runtime import Job, open, run

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
    pipeline: Pipeline, specs: Sequence[str], time: str = "time", diff: str = "diff"
) -> dict[str, Any]:
    names = pipeline.input_names()
    out: dict[str, Any] = {}
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
            out[name] = _postgres(name, file)
            continue
        if not Path(file).is_file():
            msg = f"--input {name}: no file {file!r}"
            raise UsageError(msg)
        try:
            schema = pipeline.input_schema(name)
            out[name] = read_updates(file, name, schema, time=time, diff=diff)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return out


def _postgres(name: str, url: str) -> Any:
    """A one-off read of a PostgreSQL table: its rows and the changes committed while the
    job starts, through a slot dropped afterwards."""
    import os

    from .adapters.postgres.source import from_url, postgres

    try:
        dsn, table = from_url(url)
        slot = "deltaflow_cli_" + "".join(c if c.isalnum() else "_" for c in name.lower())
        return postgres(dsn, table, slot=f"{slot}_{os.getpid()}"[:63], temporary=True)
    except ValueError as exc:
        raise UsageError(f"--input {name}: {exc}") from None


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
    inputs = _inputs(pipeline, args.input, args.time_column, args.diff_column)
    progress: bool | float = True if args.progress else PROGRESS_AFTER
    result = run(
        pipeline,
        args.workers,
        processes=args.processes,
        fuse=True,
        gc_threshold=GC_THRESHOLD,
        progress=progress,
        **inputs,
    )
    _write(result, args.output)


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

    run_cmd = commands.add_parser(
        "run", help="run a pipeline over .csv/.jsonl files, writing JSON lines"
    )
    run_cmd.add_argument("target", metavar="module:Pipeline")
    run_cmd.add_argument(
        "--input", action="append", default=[], metavar="NAME=FILE", help="an input's file"
    )
    run_cmd.add_argument("--output", metavar="FILE", help="write here instead of stdout")
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
        "--progress", action="store_true", help="show the progress line at once (not after 1 s)"
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
    run_cmd.set_defaults(handler=_run)

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
    return parser


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        msg = f"expected a positive int, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return n


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code: 0, 1 (the job failed), 2 (bad usage), 130
    (interrupted)."""
    parser = _parser()
    args = parser.parse_args(argv)
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
