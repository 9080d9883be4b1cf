"""Checkpoints of a running job, and resuming from one.

What is saved, and why it is enough (the argument in full: ``docs/architecture.md``,
"Durable state"): a checkpoint at time ``T`` is taken when the dataflow is *quiescent* there.
The inputs have sent every update before ``T`` and nothing else (their handles hold back what
is fed at ``T`` or later: :meth:`InputHandle.flush`), every worker is idle, and no message is
in flight (every worker's count of messages and progress batches sent equals, summed, the
count received). At that moment the job *is* its operators' state plus the capabilities they
hold; a :class:`Checkpointer` saves exactly that:

* every operator that keeps state (:class:`~deltaflow.operators.durable.Durable`) hands it
  over as keyed tables, routed back by key to whichever worker owns the key on resume;
* the capabilities each node holds (the inputs' at ``T``, and those stateful operators keep
  for updates at later times) are saved as their union over the workers; a resumed job's
  workers all start from that union (:meth:`Worker.start_at`), so its progress trackers
  start from the very frontiers the checkpoint saw, and each operator keeps the capabilities
  its share of the state needs;
* each output's collection at ``T - 1`` (and updates at later times already made).

State is named by a :class:`~.state_layout.StateLayout` that does not depend on the number of
workers or processes, so any layout resumes any checkpoint (:mod:`.state_layout`).

Writing is incremental: an index is written whole the first time, then only its keys changed
since (a *partial* segment replacing those keys), until the partial segments outgrow the
whole one; a history (lists that only grow but for compaction) is written whole, then as
*logs* of the rows appended since (each read after the segments before it, extending its
keys' lists), until the logs outgrow :data:`LOGGED_PER_ROW` times the history; a trace's
batches are written once each. Storage, atomic commit and checks are
:mod:`deltaflow.framework.durable.store`'s.
"""

from __future__ import annotations

import collections
import json
import logging
import time as _time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..errors import CheckpointError
from ..framework.durable.lock import Held, acquire
from ..framework.durable.store import (
    CheckpointStore,
    SegmentReader,
    decode_frontier,
    decode_time,
    encode_time,
)
from ..framework.durable.tables import (
    Groups,
    GroupsReader,
    Rows,
    append_logged,
    concat_groups,
    owners,
    resolve_groups,
)
from ..framework.tuning import LOGGED_PER_ROW, LONGEST_CHAIN
from ..operators.durable import trace_rows
from .collector import collector_paused
from .state_layout import StateLayout

if TYPE_CHECKING:
    from ..framework.time_domain import TimeDomain
    from ..framework.trace.batch import Batch
    from ..operators.io import OutputStore
    from .local.worker import Worker

__all__ = [
    "Checkpointer",
    "counters",
    "merge_fragments",
    "quiescent",
    "settled",
]

_log = logging.getLogger("deltaflow")


def counters(workers: Sequence[Worker]) -> tuple[bool, int, int]:
    """Whether every one of ``workers`` is idle, and the messages and progress batches they
    sent and received in all (see :meth:`Worker.step`)."""
    return (
        all(w.idle() for w in workers),
        sum(w.sent for w in workers),
        sum(w.received for w in workers),
    )


def quiescent(workers: Sequence[Worker]) -> bool:
    """True when every one of ``workers`` is idle and no message or progress batch they
    sent is still in flight among them (a job whose workers all run in this process)."""
    idle, sent, received = counters(workers)
    return idle and sent == received


def settled(previous: Sequence[tuple[int, int]] | None, counts: Sequence[tuple[int, int]]) -> bool:
    """Whether a round of ``(sent, received)`` counts, one per process (or peer), each
    taken once its workers were idle, shows the dataflow quiescent: the same counts as the
    round before, and as many received as sent.

    Why two rounds: a process that answered idle wakes only by receiving something. The
    first such receipt, after the round, would be of a message sent before its sender
    answered and received after its receiver did: the next round would count it, and differ.

    >>> settled(None, [(3, 3)]), settled([(3, 3)], [(3, 3)]), settled([(4, 3)], [(4, 3)])
    (False, True, False)
    """
    return (
        previous is not None
        and list(previous) == list(counts)
        and sum(c[0] for c in counts) == sum(c[1] for c in counts)
    )


# -- taking state --------------------------------------------------------------------------
@attrs.define
class _Unit:
    """One table (or a worker's share of it) to write: an index's groups or rows."""

    node: str
    table: str
    worker: str
    payload: Groups | Rows
    batch: Batch | None = None  # the trace batch these rows are (written once each)
    log: bool = False  # rows appended to a history (a log, read after what it follows)


@attrs.define
class Capture:
    """What one checkpoint took from this process, before it is written (:meth:`write`)."""

    units: list[_Unit] = attrs.field(factory=list)
    #: Per node, table: ``{"kind", "key"}``, and per worker the segments already written
    #: that it keeps using (a trace's unchanged batches, an index's chain before a partial).
    tables: dict[str, dict[str, dict[str, Any]]] = attrs.field(factory=dict)
    reused: dict[tuple[str, str, str], list[dict[str, Any]]] = attrs.field(factory=dict)
    values: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    caps: dict[str, set[tuple[int, str]]] = attrs.field(factory=dict)
    #: Trace batches and their segments: written before and still there, written now.
    kept_batches: list[tuple[Batch, dict[str, Any]]] = attrs.field(factory=list)
    new_batches: list[tuple[Batch, dict[str, Any]]] = attrs.field(factory=list)


class _Sink:
    """A :class:`~deltaflow.operators.durable.StateSink` for one node on one worker."""

    def __init__(self, owner: Checkpointer, capture: Capture, node: str, worker: int) -> None:
        self.owner = owner
        self.capture = capture
        self.node = node
        self.worker = str(worker)

    def _table(self, name: str, kind: str, key: str | None) -> None:
        self.capture.tables.setdefault(self.node, {})[name] = {"kind": kind, "key": key}

    def index(
        self,
        name: str,
        index: Mapping[Any, Any],
        columns: tuple[str, ...],
        changed: set[Any] | None,
        rows: Callable[[Any], Collection[tuple[Any, ...]]] | None = None,
        *,
        single: bool = False,
    ) -> None:
        self._table(name, "index", "key")
        where = (self.node, name, self.worker)
        chain = self.owner.chains.get(where)
        partial_keys = sum(ref["keys"] for ref in chain[1:]) if chain else 0
        whole = (
            changed is None
            or not chain
            or len(chain) > LONGEST_CHAIN
            or partial_keys + len(changed) > max(len(index), 1)
        )
        if not whole:
            assert chain is not None and changed is not None
            self.capture.reused[where] = list(chain)
            if not changed:
                return  # nothing changed: the chain as it is
        changes = None if whole else changed
        groups = Groups.from_index(index, columns, changes, rows, single=single)
        self.capture.units.append(_Unit(self.node, name, self.worker, groups))

    def history(
        self,
        name: str,
        index: Mapping[Any, Any],
        columns: tuple[str, ...],
        appended: Sequence[list[Any]] | None,
        size: int,
        rows: Callable[[Any], Collection[tuple[Any, ...]]] | None = None,
        domain: TimeDomain | None = None,
    ) -> None:
        self._table(name, "index", "key")
        where = (self.node, name, self.worker)
        chain = self.owner.chains.get(where)
        if appended is not None and chain and len(chain) <= LONGEST_CHAIN:
            keys, *values = appended
            logged = sum(ref.get("log", 0) for ref in chain) + len(keys)
            if logged <= LOGGED_PER_ROW * size:
                self.capture.reused[where] = list(chain)
                if keys:
                    log = Rows.logged(keys, values, columns, domain)
                    self.capture.units.append(_Unit(self.node, name, self.worker, log, log=True))
                return
        groups = Groups.from_index(index, columns, None, rows, domain=domain)
        self.capture.units.append(_Unit(self.node, name, self.worker, groups))

    def rows(self, name: str, rows: Rows, key: str | None) -> None:
        self._table(name, "rows", key)
        if len(rows):
            self.capture.units.append(_Unit(self.node, name, self.worker, rows))

    def batches(self, name: str, batches: Sequence[Batch]) -> None:
        self._table(name, "rows", "key")
        where = (self.node, name, self.worker)
        written = self.owner.batch_refs
        reused = self.capture.reused.setdefault(where, [])
        for batch in batches:
            if not len(batch):
                continue
            ref = written.get(batch)
            if ref is not None:
                reused.append(ref)
                self.capture.kept_batches.append((batch, ref))
            else:
                rows = Rows(trace_rows(batch))
                self.capture.units.append(_Unit(self.node, name, self.worker, rows, batch))

    def value(self, name: str, value: Any) -> None:
        self.capture.values.setdefault(self.node, {}).setdefault(name, value)


class _Source:
    """A :class:`~deltaflow.operators.durable.StateSource`: one node's state for one worker."""

    def __init__(self, restorer: _Restorer, entry: dict[str, Any], worker: int) -> None:
        self.restorer = restorer
        self.entry = entry
        self.worker = worker

    def index(self, name: str) -> Groups | None:
        table = self.entry.get("tables", {}).get(name)
        return None if table is None else self.restorer.groups(table, self.worker)

    def history(self, name: str) -> dict[Any, list[tuple[Any, ...]]] | None:
        table = self.entry.get("tables", {}).get(name)
        return None if table is None else self.restorer.history(table, self.worker)

    def rows(self, name: str) -> Rows | None:
        table = self.entry.get("tables", {}).get(name)
        return None if table is None else self.restorer.rows(table, self.worker)

    def value(self, name: str, default: Any = None) -> Any:
        return self.entry.get("values", {}).get(name, default)


class _Restorer:
    """Reads a manifest's tables for workers of a job with ``workers`` workers, each
    segment decoded once however many workers take a share of it."""

    def __init__(self, reader: SegmentReader, saved_workers: int, workers: int) -> None:
        self.reader = reader
        self.same = saved_workers == workers
        self.workers = workers
        self._groups: dict[tuple[str, int], GroupsReader] = {}
        self._owners: dict[int, Any] = {}  # by the id of a reader (kept in _groups)
        # Per segment of rows routed by a column: its batch and each row's owner.
        self._routed: dict[tuple[str, int], tuple[Any, Any]] = {}

    def _greader(self, ref: dict[str, Any]) -> GroupsReader:
        where = (ref["file"], ref["parts"][0][0])
        reader = self._groups.get(where)
        if reader is None:
            reader = self._groups[where] = GroupsReader(self.reader.batches(ref)[0])
        return reader

    def _keep(self, worker: int) -> Callable[[GroupsReader], Any]:
        def keep(reader: GroupsReader) -> Any:
            own = self._owners.get(id(reader))
            if own is None:
                own = owners(reader.keys, self.workers, ints=reader.key_is_int())
                self._owners[id(reader)] = own
            return own == worker

        return keep

    def groups(self, table: dict[str, Any], worker: int) -> Groups | None:
        """This worker's groups of an index table."""
        chains: dict[str, list[dict[str, Any]]] = table["workers"]
        if self.same:
            chain = chains.get(str(worker))
            return resolve_groups([self._greader(r) for r in chain]) if chain else None
        keep = self._keep(worker)
        parts = [resolve_groups([self._greader(r) for r in c], keep) for c in chains.values()]
        return concat_groups(parts)

    def history(self, table: dict[str, Any], worker: int) -> dict[Any, list[tuple[Any, ...]]]:
        """This worker's lists of a history table: its groups, then its logs appended."""
        chains: dict[str, list[dict[str, Any]]] = table["workers"]
        if self.same:
            chain = chains.get(str(worker))
            return self._history(chain, None) if chain else {}
        index: dict[Any, list[tuple[Any, ...]]] = {}
        for chain in chains.values():  # (a key's segments are all in one saved worker's chain)
            index.update(self._history(chain, worker))
        return index

    def _history(
        self, chain: list[dict[str, Any]], worker: int | None
    ) -> dict[Any, list[tuple[Any, ...]]]:
        """The lists a chain of a history stands for (of the keys ``worker`` owns; ``None``:
        all of them)."""
        logs = [ref for ref in chain if ref.get("log")]
        segments = chain[: len(chain) - len(logs)]
        if any(not ref.get("log") for ref in chain[len(segments) :]):
            where = self.reader.store.describe(f"data/{chain[0]['file']}")
            msg = f"{where}: a history's groups follow its logs in the manifest"
            raise CheckpointError(msg)
        keep = None if worker is None else self._keep(worker)
        index = resolve_groups([self._greader(r) for r in segments], keep).to_index()
        for ref in logs:
            if worker is None:
                append_logged(index, Rows.from_batch(self.reader.batches(ref)[0]))
            else:
                batch, own = self._routing(ref, "key")
                append_logged(index, Rows.from_batch(batch), np.flatnonzero(own == worker))
        return index

    def all_groups(self, table: dict[str, Any]) -> Groups:
        """Every worker's groups of an index table, together."""
        return concat_groups(
            [resolve_groups([self._greader(r) for r in c]) for c in table["workers"].values()]
        )

    def rows(self, table: dict[str, Any], worker: int) -> Rows | None:
        """This worker's rows of a table (a table routed by no column goes to worker 0)."""
        segments: dict[str, list[dict[str, Any]]] = table["workers"]
        key = table.get("key")
        if self.same or key is None:
            refs = segments.get(str(worker), []) if self.same else []
            if key is None and not self.same:
                refs = [r for rs in segments.values() for r in rs] if worker == 0 else []
            parts = [Rows.from_batch(self.reader.batches(r)[0]) for r in refs]
            return Rows.concat(parts) if parts else None
        parts = []
        for refs in segments.values():
            for ref in refs:
                batch, own = self._routing(ref, key)
                picked = np.flatnonzero(own == worker)
                if len(picked):
                    parts.append(Rows.from_batch(batch, picked))
        return Rows.concat(parts) if parts else None

    def _routing(self, ref: dict[str, Any], key: str) -> tuple[Any, Any]:
        """A segment of rows and the worker owning each row (by its column ``key``)."""
        where = (ref["file"], ref["parts"][0][0])
        routed = self._routed.get(where)
        if routed is None:
            batch = self.reader.batches(ref)[0]
            head = Rows.from_batch(batch.select([key]))
            routed = self._routed[where] = (batch, owners(head.columns[key], self.workers))
        return routed

    def all_rows(self, table: dict[str, Any]) -> Rows | None:
        """Every worker's rows of a table, together."""
        refs = [r for rs in table["workers"].values() for r in rs]
        parts = [Rows.from_batch(self.reader.batches(r)[0]) for r in refs]
        return Rows.concat(parts) if parts else None


class Checkpointer:
    """Takes and writes this process's share of a job's checkpoints, and resumes it.

    ``writer`` names this process's data files (``"job"``, ``"p1"``...). It remembers what
    it wrote (an index's chain of segments, the trace batches written) so the next
    checkpoint writes only what changed; a checkpoint that fails makes the next one write
    everything again.
    """

    #: How many checkpoints :attr:`history` remembers.
    HISTORY = 100

    def __init__(self, location: Any, writer: str) -> None:
        self.store = CheckpointStore(location)
        self.writer = writer
        #: Per (node, table, worker) of an index: the segments its state is, in order.
        self.chains: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        #: Trace batches written (the segment each is), while they live.
        self.batch_refs: weakref.WeakKeyDictionary[Batch, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )
        #: The number the next checkpoint takes.
        self.sequence = 1
        #: Each data file this process wrote that its state still refers to: length, CRC.
        self.files: dict[str, dict[str, int]] = {}
        #: The last checkpoints committed or failed, oldest first (``Job.statistics()``):
        #: sequence, time, when (Unix seconds), seconds taken from capture to commit, ok.
        self.history: collections.deque[dict[str, Any]] = collections.deque(maxlen=self.HISTORY)
        self._began = 0.0
        self._under_way = False
        #: The location's lock, while this process owns the location (:meth:`lock`).
        self.held: Held | None = None

    # -- owning the location ----------------------------------------------------------------
    def lock(self, *, fresh: bool = False) -> None:
        """Take the location's lock for this job's life (:mod:`~deltaflow.framework.durable.
        lock`); with ``fresh``, then remove every checkpoint there. Blocking.

        Raises:
            CheckpointError: another job holds the location, or it cannot be locked or
                cleared.
        """
        if self.held is None:
            self.held = acquire(self.store)
        if fresh:
            try:
                self.store.clear()
            except BaseException:
                self.unlock()
                raise

    def unlock(self) -> None:
        """Give the location up (idempotent)."""
        held, self.held = self.held, None
        if held is not None:
            held.release()

    # -- taking ---------------------------------------------------------------------------
    def capture(
        self,
        layout: StateLayout,
        workers: Sequence[Worker],
        stores: Mapping[str, OutputStore],
        *,
        current: bool,
        pending: bool,
        first: int = 0,
    ) -> Capture:
        """Take the state of ``workers`` (and of the outputs' ``stores``: their collections
        with ``current``, their updates at later times with ``pending``, the latter saved as
        worker ``first``'s). Runs on the job's own thread, while the dataflow is quiescent.

        Raises:
            RuntimeError: an operator holds capabilities but keeps no durable state.
        """
        if not self._under_way:
            self.started()
        capture = Capture()
        inputs = set(layout.inputs.values())
        for worker in workers:
            for actor in worker.actors:
                node = layout.nodes.get(actor.index)
                operator = actor.operator
                held = actor.held_times()
                if held and actor.index not in inputs:
                    if node is None or not hasattr(operator, "save"):
                        msg = (
                            f"operator {actor.name!r} holds capabilities at a checkpoint "
                            "but keeps no durable state"
                        )
                        raise RuntimeError(msg)
                    caps = capture.caps.setdefault(node, set())
                    caps.update((port, json.dumps(encode_time(t))) for port, t in held)
                if node is not None and hasattr(operator, "save"):
                    operator.save(_Sink(self, capture, node, worker.index))
                elif not operator.stateless:
                    msg = (
                        f"operator {actor.name!r} keeps state a checkpoint cannot save "
                        f"({type(operator).__name__} has no save/load)"
                    )
                    raise RuntimeError(msg)
        for name, store in stores.items():
            node = f"output:{name}"
            if current:
                store.save_current(_Sink(self, capture, node, 0))
            if pending:
                store.save_open(_Sink(self, capture, node, first))
        return capture

    def write(self, capture: Capture, sequence: int) -> dict[str, Any]:
        """Write what ``capture`` holds into one data file; the fragment of the manifest it
        makes (tables, values, capabilities, files). Blocking: run it in a thread."""
        out = self.store.new_file(sequence, self.writer)
        new: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for unit in capture.units:
            payload = unit.payload
            if isinstance(payload, Groups):
                ref = out.add([payload.to_batch()])
                ref["keys"] = len(payload.keys) + len(payload.deleted)
                ref["partial"] = payload.partial
            else:
                ref = out.add([payload.to_batch()])
                if unit.log:
                    ref["log"] = len(payload)
            if unit.batch is not None:
                capture.new_batches.append((unit.batch, ref))
            new.setdefault((unit.node, unit.table, unit.worker), []).append(ref)
        files: dict[str, dict[str, int]] = {}
        if out.pieces:
            files[out.name] = self.store.write(out)
        nodes: dict[str, dict[str, Any]] = {}
        for node, tables in capture.tables.items():
            entry = nodes.setdefault(node, {"tables": {}})
            for table, meta in tables.items():
                entry["tables"][table] = {**meta, "workers": {}}
        for where in {*new, *capture.reused}:
            node, table, worker = where
            segments = capture.reused.get(where, []) + new.get(where, [])
            if segments:
                nodes[node]["tables"][table]["workers"][worker] = segments
        for node, values in capture.values.items():
            nodes.setdefault(node, {"tables": {}})["values"] = values
        for node, caps in capture.caps.items():
            nodes.setdefault(node, {"tables": {}})["caps"] = sorted(
                [port, json.loads(t)] for port, t in caps
            )
        referenced = {
            ref["file"]
            for entry in nodes.values()
            for table in entry["tables"].values()
            for refs in table["workers"].values()
            for ref in refs
        }
        for name in referenced - set(files):
            files[name] = self.files[name]
        return {"files": files, "nodes": nodes}

    def committed(self, capture: Capture, fragment: dict[str, Any], sequence: int) -> None:
        """Checkpoint ``sequence``, which ``fragment`` (of ``capture``) is part of, was
        committed: remember what was written, so the next one writes only what changed."""
        self.files = dict(fragment["files"])
        chains: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for node, entry in fragment["nodes"].items():
            for table, meta in entry["tables"].items():
                if meta["kind"] == "index":
                    for worker, refs in meta["workers"].items():
                        chains[(node, table, worker)] = refs
        self.chains = chains
        batches: weakref.WeakKeyDictionary[Batch, dict[str, Any]] = weakref.WeakKeyDictionary()
        for batch, ref in (*capture.kept_batches, *capture.new_batches):
            batches[batch] = ref
        self.batch_refs = batches
        self.sequence = sequence + 1
        self._under_way = False

    def _continue(self, manifest: dict[str, Any], workers: set[str]) -> None:
        """Go on from ``manifest`` (whose workers are this job's): the segments of these
        workers' indexes are where the next checkpoint's partial segments continue."""
        for node, entry in manifest["nodes"].items():
            for table, meta in entry.get("tables", {}).items():
                if meta["kind"] == "index":
                    for worker, refs in meta["workers"].items():
                        if worker in workers:
                            self.chains[(node, table, worker)] = refs
        self.files = dict(manifest["files"])

    def failed(self, time: int | None = None) -> None:
        """The checkpoint under way (at ``time``) failed: write everything again next time."""
        if not self.history or self.history[-1]["sequence"] != self.sequence:
            self._record(self.sequence, time, ok=False)
        self.chains = {}
        self.batch_refs = weakref.WeakKeyDictionary()

    def commit(self, header: dict[str, Any], fragments: list[dict[str, Any]]) -> dict[str, Any]:
        """Assemble the manifest of ``header`` and the fragments of every writer, switch the
        location to it atomically, and remove what it no longer needs. Blocking."""
        if self.held is not None:
            self.held.check()
        manifest = {**header, **merge_fragments(fragments), "written_at": _time.time()}
        self.store.commit(manifest)
        self._record(header["sequence"], header["time"], ok=True)
        self.store.collect_garbage(manifest)
        return manifest

    def started(self) -> None:
        """A checkpoint is being taken from now on (what :attr:`history` times it from; by
        default, from its :meth:`capture`)."""
        self._began = _time.monotonic()
        self._under_way = True

    def _record(self, sequence: int, time: int | None, *, ok: bool) -> None:
        self._under_way = False
        self.history.append(
            {
                "sequence": sequence,
                "time": time,
                "at": _time.time(),
                "seconds": round(_time.monotonic() - self._began, 6),
                "ok": ok,
            }
        )

    # -- resuming ---------------------------------------------------------------------------
    @collector_paused()
    def restore(
        self,
        manifest: dict[str, Any],
        layout: StateLayout,
        workers: Sequence[Worker],
        total: int,
        stores: Mapping[str, OutputStore],
        *,
        current: bool,
        pending: bool,
    ) -> None:
        """Resume ``workers`` (of ``total``) and the outputs' ``stores`` from ``manifest``
        (checked to be this pipeline's): every operator takes its share of the state, every
        worker starts from the capabilities saved, the outputs from their collections at the
        checkpoint's time (with ``current``) and their updates at later times (with
        ``pending``). Blocking: run it before the workers do; no collection runs meanwhile
        (:func:`~.collector.collector_paused`)."""
        restorer = _Restorer(self.store.reader(manifest), int(manifest["workers"]), total)
        saved = manifest["nodes"]
        if restorer.same:
            self._continue(
                manifest, {str(w.index) for w in workers} | ({"0"} if current else set())
            )
        time = int(manifest["time"])
        closed = {name for name, info in manifest["inputs"].items() if info.get("closed")}
        initial: dict[int, list[list[Any]]] = {}
        first = workers[0] if workers else None
        if first is not None:
            for actor in first.actors:
                ports: list[list[Any]] = [[] for _ in range(actor.outputs)]
                entry = saved.get(layout.nodes.get(actor.index, ""), {})
                for port, t in entry.get("caps", ()):
                    if port >= len(ports):
                        where = self.store.describe()
                        msg = f"{where}: capabilities of {actor.name!r} at an unknown port {port}"
                        raise CheckpointError(msg)
                    ports[port].append(decode_time(t))
                initial[actor.index] = ports
            for name, node in layout.inputs.items():
                initial[node] = [[] if name in closed else [time]]
        for worker in workers:
            for actor in worker.actors:
                entry = saved.get(layout.nodes.get(actor.index, ""))
                if entry is not None and hasattr(actor.operator, "load"):
                    actor.operator.load(_Source(restorer, entry, worker.index))
            worker.start_at(initial)
        for name, store in stores.items():
            entry = saved.get(f"output:{name}", {})
            tables = entry.get("tables", {})
            now = tables.get("current") if current else None
            later = tables.get("open") if pending else None
            store.restore(
                time,
                decode_frontier(manifest["outputs"][name]["frontier"]),
                None if now is None else restorer.all_groups(now),
                None if later is None else restorer.all_rows(later),
            )
        self.sequence = int(manifest["sequence"]) + 1


def merge_fragments(fragments: list[dict[str, Any]]) -> dict[str, Any]:
    """One manifest body of the fragments written by several processes: their files, and per
    node its tables (every worker's segments), values and capabilities (their union)."""
    files: dict[str, Any] = {}
    nodes: dict[str, dict[str, Any]] = {}
    for fragment in fragments:
        files.update(fragment["files"])
        for node, entry in fragment["nodes"].items():
            have = nodes.setdefault(node, {"tables": {}})
            for table, meta in entry.get("tables", {}).items():
                into = have["tables"].setdefault(table, {**meta, "workers": {}})
                into["workers"].update(meta["workers"])
            if "values" in entry:
                have.setdefault("values", entry["values"])
            if "caps" in entry:
                caps = {(p, json.dumps(t)) for p, t in have.get("caps", [])}
                caps.update((p, json.dumps(t)) for p, t in entry["caps"])
                have["caps"] = sorted([p, json.loads(t)] for p, t in caps)
    return {"files": files, "nodes": nodes}
