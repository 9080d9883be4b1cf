"""What an operator with state does at a checkpoint, and when a job resumes from one.

A checkpoint is taken when the dataflow is *quiescent* at the inputs' time ``T``: every
update before ``T`` has been fed and processed everywhere, nothing at ``T`` or later has been
fed, and no message is in flight. What each operator holds then is its whole contribution to
the job's future (see ``docs/architecture.md``, "Durable state"). An operator with state
implements :class:`Durable`:

* :meth:`Durable.save` hands that state to a :class:`StateSink`: keyed indexes
  (``{key: rows}``, written incrementally: only the keys changed since the previous
  checkpoint), whole tables of rows (small buffers of updates at future times), and small
  values. Each table names the column whose value routes the row to its worker, as the
  operator's input exchange does, so any number of workers reads it back.
* :meth:`Durable.load`, on a fresh instance of the operator in the resumed job, before it
  runs, takes this worker's share back from a :class:`StateSource`.
* :meth:`~deltaflow.operators.base.Operator.initialize` then receives the capabilities the
  operator's node held at the checkpoint (on every worker alike; see :func:`covering`) and
  keeps those its restored state needs.

An index is tracked for changes only once a checkpoint has taken it whole (until then no
bookkeeping is paid): :class:`Changes` is that tracking, by the keys changed. A history whose
lists only grow between checkpoints (compaction aside, which changes no accumulation still to
be read) is tracked by the rows appended instead (:class:`Appended`): a checkpoint writes
those alone, and a resume appends them after the rows written before. A *counted* index, whose
rows end in a count (``{key: {val: count}}``), whose keys' rows grow with the stream (a
user's events, a key's values under a reduction), is tracked by its changes as rows of diffs
(:class:`Deltas`) and written the same way, as a history: a resume appends the diffs and folds
them into the counts (:func:`fold_counts`), so a checkpoint writes what changed, not the whole
rows of every key that changed.

    >>> changes = Changes()
    >>> changes.note("a"); changes.take() is None     # not tracked yet: the first take is whole
    True
    >>> changes.note("b"); changes.take()
    {'b'}
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..framework.antichain import Antichain
from ..framework.durable.columns import columns_of
from ..framework.durable.store import decode_frontier
from ..framework.lattice import less_equal
from ..framework.trace.batch import Batch
from ..framework.trace.description import Description, least_since

if TYPE_CHECKING:
    from ..framework.durable.tables import Groups, Rows
    from ..framework.lattice import Time
    from ..framework.time_domain import TimeDomain
    from ..framework.trace.spine import Spine
    from .base import Capability

__all__ = [
    "Appended",
    "Changes",
    "Deltas",
    "Durable",
    "StateSink",
    "StateSource",
    "covering",
    "delayed_to",
    "fold_counts",
    "restore_trace",
    "trace_rows",
]


class Changes:
    """The keys of one index changed since a checkpoint last took it (``keys is None``: no
    checkpoint has, so nothing is tracked)."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: set[Any] | None = None

    def note(self, key: Any) -> None:
        """``key``'s rows changed."""
        keys = self.keys
        if keys is not None:
            keys.add(key)

    def note_all(self, keys: Iterable[Any]) -> None:
        """These keys' rows changed."""
        tracked = self.keys
        if tracked is not None:
            tracked.update(keys)

    def take(self) -> set[Any] | None:
        """The keys changed since the last call (``None`` the first time), and track anew."""
        keys, self.keys = self.keys, set()
        return keys


class Deltas:
    """The changes to a counted index (rows ending in a count) since a checkpoint last took
    it, as rows ending in the diff, each with its key, in the order made (``keys is None``:
    not tracked; the next checkpoint takes the index whole). Read back after the index's
    rows, :func:`fold_counts` adds them up.

    >>> deltas = Deltas()
    >>> deltas.add("k", ("x", 1)); deltas.take(2) is None   # not tracked: taken whole
    True
    >>> deltas.add("k", ("x", -1)); deltas.add("j", ("y", 2)); deltas.take(2)
    [['k', 'j'], ['x', 'y'], [-1, 2]]
    """

    __slots__ = ("keys", "rows")

    def __init__(self) -> None:
        self.keys: list[Any] | None = None
        self.rows: list[tuple[Any, ...]] = []

    def add(self, key: Any, row: tuple[Any, ...]) -> None:
        """``key``'s count of ``row[:-1]`` changed by ``row[-1]``."""
        keys = self.keys
        if keys is not None:
            keys.append(key)
            self.rows.append(row)

    def bound(self, size: int) -> None:
        """Stop tracking once more changes are kept than ``size`` (the index's rows): the
        next checkpoint takes the index whole, fewer rows than the changes."""
        keys = self.keys
        if keys is not None and len(keys) > size:
            self.keys, self.rows = None, []

    def take(self, width: int) -> list[list[Any]] | None:
        """The changes since the last call as columns (the keys, then ``width`` columns of
        the rows; ``None`` when not tracked), and track anew."""
        keys, rows = self.keys, self.rows
        self.keys, self.rows = [], []
        if keys is None:
            return None
        return [keys, *columns_of(rows, width)]


def fold_counts(rows: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, ...], int]:
    """Rows ending in a count (a counted index's rows, then its :class:`Deltas`) added up:
    ``{row[:-1]: count}``, zeros left out.

    >>> fold_counts([("x", 2), ("y", 1), ("x", -2)])
    {('y',): 1}
    """
    out: dict[tuple[Any, ...], int] = {}
    for row in rows:
        head = row[:-1]
        n = out.get(head, 0) + row[-1]
        if n:
            out[head] = n
        else:
            out.pop(head, None)
    return out


class Appended:
    """The updates appended to a history of keyed lists of ``(val, time, diff)`` rows since a
    checkpoint last took it, in the order appended: rows appended one by one (each with its
    key), and whole batches (a batch is logged as itself, no work per update). ``keys is
    None``: no checkpoint has taken the history whole since it was made or cleared, or the log
    outgrew the history, so nothing is logged.

    The rows and batches are those the history was given (no copy); a log keeps what a
    compaction has since folded away alive until the next checkpoint (memory the rounds would
    otherwise reuse), so it is dropped once it holds more updates than the history holds rows
    (:meth:`bound`): the next checkpoint writes the history whole then, fewer rows than the
    log, and checkpoints far apart keep no log growing with every update.

    >>> from deltaflow.operators.arrange import RawBatch
    >>> log = Appended()
    >>> log.add("k", (1, 0, 1)); log.take() is None   # not tracked yet: the first take is whole
    True
    >>> log.add("k", (1, 2, -1)); log.add_batch(RawBatch(["j"], None, [3], [1])); log.take()
    (['k', 'j'], [1, ()], [2, 3], [-1, 1])
    """

    __slots__ = ("batches", "keys", "logged", "rows")

    def __init__(self) -> None:
        self.keys: list[Any] | None = None
        self.rows: list[tuple[Any, ...]] = []
        # Batches, and runs of rows appended one by one (``(keys, rows)``) before one.
        self.batches: list[Any] = []
        self.logged = 0  # updates in ``batches``

    def add(self, key: Any, row: tuple[Any, ...]) -> None:
        """``row`` was appended to ``key``'s list."""
        keys = self.keys
        if keys is not None:
            keys.append(key)
            self.rows.append(row)

    def add_batch(self, batch: Any) -> None:
        """Every update of ``batch`` (a :class:`~deltaflow.framework.trace.batch.Batch` or
        a :class:`~deltaflow.operators.arrange.RawBatch`: immutable) was appended, in the
        order of its ``updates()``."""
        keys = self.keys
        if keys is not None:
            if keys:  # (rows appended one by one before it come first)
                self.batches.append((keys, self.rows))
                self.keys, self.rows = [], []
            self.batches.append(batch)
            self.logged += len(batch)

    def bound(self, size: int) -> None:
        """Stop logging if the log holds more updates than ``size`` (the history's rows): the
        next checkpoint takes the history whole.

        >>> log = Appended(); log.take()
        >>> for i in range(4): log.add("k", (i, 0, 1))
        >>> log.bound(4); log.keys is None
        False
        >>> log.bound(3); log.keys is None
        True
        """
        keys = self.keys
        if keys is not None and self.logged + len(keys) > size:
            self.forget()

    def take(self) -> tuple[list[Any], list[Any], list[Any], list[Any]] | None:
        """The updates appended since the last call as columns (keys, vals, times, diffs;
        ``None`` when not tracked: the history is to be taken whole), and log anew."""
        keys, rows, batches = self.keys, self.rows, self.batches
        self.keys, self.rows, self.batches, self.logged = [], [], [], 0
        if keys is None:
            return None
        if keys:
            batches.append((keys, rows))
        ks: list[Any] = []
        vs: list[Any] = []
        ts: list[Any] = []
        ds: list[Any] = []
        for entry in batches:
            if entry.__class__ is tuple:
                k, rs = entry
                v, t, d = columns_of(rs, 3)
            else:
                k, v, t, d = entry.object_columns()
                if v is None:
                    v = [()] * len(k)
            ks += k
            vs += v
            ts += t
            ds += d
        return ks, vs, ts, ds

    def forget(self) -> None:
        """The lists changed otherwise than by appending (all cleared): the next checkpoint
        takes the history whole."""
        self.keys = None
        self.rows = []
        self.batches = []
        self.logged = 0


class StateSink(Protocol):
    """Where an operator hands its state at a checkpoint (the runtime's side)."""

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
        """A keyed index ``{key: value}``; ``rows(value)`` (default: the value itself) is
        the key's list of row tuples holding ``columns`` (``single``: the value is the one
        column of the key's one row). ``changed``: the keys changed since the previous
        checkpoint (``None``: unknown; the index is then written whole)."""

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
        """A keyed index ``{key: [row tuple, ...]}`` of ``size`` rows holding ``columns``
        (``rows(value)``, when given, makes a key's list of its value),
        whose lists only grow between checkpoints but for compactions (which change no
        accumulation still to be read). ``appended``: the updates appended since the
        previous checkpoint (:meth:`Appended.take`: the keys, then one list per column),
        written alone, after what was written before; ``None``: the index is written
        whole. ``domain``: the saving operator's time domain, whose codec writes a column
        ``time`` (by default, the domain of the first time's shape)."""

    def rows(self, name: str, rows: Rows, key: str | None) -> None:
        """A table written whole; ``key`` names the column that routes each row (``None``:
        any worker may take it)."""

    def batches(self, name: str, batches: Sequence[Batch]) -> None:
        """A trace's batches (immutable: one written by an earlier checkpoint is referred to,
        not written again), read back as one table of rows ``key, val, time, diff``."""

    def value(self, name: str, value: Any) -> None:
        """A small value, the same on every worker (JSON: ints, strings, lists; times and
        frontiers through :mod:`deltaflow.framework.durable.store`)."""


class StateSource(Protocol):
    """This worker's share of an operator's state, as a resumed job hands it back."""

    def index(self, name: str) -> Groups | None:
        """The keyed index of that name (the keys this worker owns), or ``None``."""

    def history(self, name: str) -> dict[Any, list[tuple[Any, ...]]] | None:
        """The history of that name (:meth:`StateSink.history`) for the keys this worker
        owns: each key's rows as written whole, then those appended since, in order; or
        ``None``."""

    def rows(self, name: str) -> Rows | None:
        """The rows of that table this worker owns, or ``None``."""

    def value(self, name: str, default: Any = None) -> Any:
        """The value of that name (``default`` if none was saved)."""


class Durable(Protocol):
    """An operator whose state a checkpoint keeps (module docstring)."""

    def save(self, sink: StateSink) -> None:
        """Hand the operator's state to ``sink`` (the dataflow is quiescent)."""

    def load(self, source: StateSource) -> None:
        """Take this worker's share of the state back, before the first activation."""


def covering(capabilities: Sequence[Capability], times: Iterable[Time]) -> list[Capability]:
    """One capability per minimal time of ``times``, each delayed from one of
    ``capabilities`` at or before it; every capability given is dropped.

    What a restored operator does with the capabilities its node held at the checkpoint: they
    are the union over the workers of that moment, so each time this worker's share owes is
    at or after one of them.

    Raises:
        ValueError: a time is not at or after any capability (the state and the
            capabilities do not belong together).
    """
    wanted = Antichain(times).elements
    kept = []
    for t in wanted:
        for cap in capabilities:
            if less_equal(cap.time, t):
                kept.append(cap.delayed(t))
                break
        else:
            msg = f"no capability at or before time {t!r} among {[c.time for c in capabilities]}"
            raise ValueError(msg)
    for cap in capabilities:
        cap.drop()
    kept.sort(key=lambda c: c.time)
    return kept


def delayed_to(capabilities: Sequence[Capability], time: Time) -> Capability:
    """A new capability at ``time``, delayed from the first of ``capabilities`` at or before
    it (for an operator holding one capability per time, not per minimal time).

    Raises:
        ValueError: none is at or before ``time``.
    """
    for cap in capabilities:
        if less_equal(cap.time, time):
            return cap.delayed(time)
    msg = f"no capability at or before time {time!r} among {[c.time for c in capabilities]}"
    raise ValueError(msg)


def trace_rows(batch: Batch) -> dict[str, list[Any]]:
    """A trace batch's updates as the columns a checkpoint writes (``val`` is ``()`` for an
    arrangement by self)."""
    keys, vals, times, diffs = batch.object_columns()
    return {"key": keys, "val": [()] * len(keys) if vals is None else vals, "time": times,
            "diff": diffs}  # fmt: skip


def restore_trace(
    spine: Spine, rows: Rows | None, upper: list[Any] | None, *, unit: bool = False
) -> None:
    """Put a checkpoint's rows of a trace into ``spine`` (fresh: nothing inserted yet) as one
    batch from its ``lower`` to ``upper`` (a frontier as the checkpoint wrote it; ``None``:
    nothing was saved). ``unit``: every value is ``()`` (an arrangement by self).

    The batch is not compacted (its ``since`` is the least time): its times are those of the
    batches it was made of, each valid where they were, and the spine compacts it further
    when it next merges.
    """
    if upper is None:
        return
    frontier = decode_frontier(upper)
    description = Description(spine.lower, frontier, least_since(spine.lower, spine.domain))
    if rows is None or not len(rows):
        if frontier != spine.lower:
            spine.insert(Batch.empty(description))
        return
    cols = rows.columns
    vals = None if unit else cols["val"]
    spine.insert(Batch.from_columns(cols["key"], vals, cols["time"], cols["diff"], description))
