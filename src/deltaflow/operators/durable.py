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
bookkeeping is paid): :class:`Changes` is that tracking.

    >>> changes = Changes()
    >>> changes.note("a"); changes.take() is None     # not tracked yet: the first take is whole
    True
    >>> changes.note("b"); changes.take()
    {'b'}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..framework.antichain import Antichain
from ..framework.durable.store import decode_frontier
from ..framework.lattice import less_equal
from ..framework.trace.batch import Batch
from ..framework.trace.description import Description

if TYPE_CHECKING:
    from ..framework.durable.tables import Groups, Rows
    from ..framework.lattice import Time
    from ..framework.trace.spine import Spine
    from .base import Capability

__all__ = [
    "Changes",
    "Durable",
    "StateSink",
    "StateSource",
    "covering",
    "delayed_to",
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


class StateSink(Protocol):
    """Where an operator hands its state at a checkpoint (the runtime's side)."""

    def index(
        self,
        name: str,
        index: Mapping[Any, Any],
        columns: tuple[str, ...],
        changed: set[Any] | None,
        rows: Callable[[Any], Sequence[tuple[Any, ...]]] | None = None,
        *,
        single: bool = False,
    ) -> None:
        """A keyed index ``{key: value}``; ``rows(value)`` (default: the value itself) is
        the key's list of row tuples holding ``columns`` (``single``: the value is the one
        column of the key's one row). ``changed``: the keys changed since the previous
        checkpoint (``None``: unknown; the index is then written whole)."""

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
    description = Description(spine.lower, frontier)
    if rows is None or not len(rows):
        if frontier != spine.lower:
            spine.insert(Batch.empty(description))
        return
    cols = rows.columns
    vals = None if unit else cols["val"]
    spine.insert(Batch.from_columns(cols["key"], vals, cols["time"], cols["diff"], description))
