"""What an operator is, and what the runtime offers it.

An :class:`Operator` is the logic of one node of the dataflow, instantiated once per worker.
The runtime wraps each instance in an actor with one mailbox per input port and calls
:meth:`Operator.schedule` when there is something to do: a message arrived, or (for operators
whose :attr:`Operator.interest` asks for it) an input frontier moved. Inside ``schedule`` the
operator talks to the runtime only through an :class:`OperatorContext`:

* ``ctx.messages(port)`` drains a mailbox. Each message is ``(time, payload)``; while it is being
  handled the operator may send at any time ``>= time`` (the message carries that right).
  ``time`` is a lower bound of the payload's times: a :class:`RunsBatch` carries updates at
  many times (only operators that declare :attr:`Operator.reads_runs` see one; the others get
  its runs as messages of their own).
* ``ctx.frontier(port)`` is the input's frontier: every time that may still arrive is beyond it.
* ``ctx.send(port, time, payload)`` sends a message on an output port. It requires a capability
  for some time ``<= time``: the time of a message drained in this activation, or a
  :class:`Capability` the operator holds. The update batches an activation sends on a port
  leave together when it ends, one message per destination (a :class:`RunsBatch` when they
  hold several): send each time's output as it comes; the runtime groups it.
* ``ctx.capability(time, port)`` mints a capability (only derived from one of those rights);
  stateful operators keep capabilities for the times they still owe output for, then
  ``downgrade`` or ``drop`` them. Holding a capability at ``t`` keeps every downstream frontier
  at or before ``t``; forgetting to drop one stalls everything downstream.

Payloads of update streams are :class:`UpdateBatch` columns; arrangements send trace batches.
Operators never import the scheduler, so they can be unit-tested with a fake context.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from ..framework.antichain import Antichain
    from ..framework.lattice import Time

__all__ = [
    "Capability",
    "Interest",
    "Operator",
    "OperatorContext",
    "RunsBatch",
    "UpdateBatch",
    "check_function",
    "describe_callable",
    "expand_runs",
    "is_pair",
    "sum_diffs",
]


@attrs.define(slots=True)
class UpdateBatch:
    """A batch of updates at one time, as two parallel columns.

    ``data[i]`` changes by ``diffs[i]``. Columns keep per-record overhead at one list slot:
    a ``map`` is ``list(map(f, data))`` with ``diffs`` shared unchanged.

    ``consolidated``: the sender promises that no datum appears twice and no diff is zero (a
    join sums its output as it makes it), so an arrangement forwarding the batch alone need
    not sum it again. Anything that builds a new batch from another (``map``, an exchange)
    leaves it ``False``.
    """

    data: list[Any]
    diffs: list[int]
    consolidated: bool = attrs.field(default=False, eq=False, repr=False)

    def __len__(self) -> int:
        return len(self.data)

    def sum_into(self, sums: dict[Any, int]) -> dict[Any, int]:
        """Add each datum's diffs into ``sums`` (zeros stay); returns ``sums``.

        >>> UpdateBatch(["a", "b", "a"], [1, 2, 3]).sum_into({"b": -2})
        {'b': 0, 'a': 4}
        """
        return sum_diffs(self.data, self.diffs, sums)


@attrs.define(slots=True)
class RunsBatch:
    """The updates of several times as one message: runs of :class:`UpdateBatch` columns,
    each run at a time of its own, sent under one capability at a lower bound of them all.

    Run ``i`` holds ``lengths[i]`` updates at ``times[i]`` (none empty), the runs' data and
    diffs concatenated. The message's time is at or before every run's time (timely's
    message time: a lower bound, not the time of the data); the runs' times may be partially
    ordered, may repeat, and come in the order they were sent. Every reader takes an update's
    time from its run, never from the message: an operator that reads runs itself
    (``Operator.reads_runs``) reads them here, any other gets :meth:`per_time`'s messages.

    One message spares a delivery, a pointstamp and a step per time: an input sends one
    when many times are known at once, and the runtime sends one per destination for all
    the update batches an activation sent on an output (:mod:`deltaflow.scheduler.local.actor`).

    ``consolidated``: every run is consolidated (see :class:`UpdateBatch`).

    >>> runs = RunsBatch([1, 3], [2, 1], ["a", "b", "a"], [1, 1, -1])
    >>> runs.per_time()
    [(1, UpdateBatch(data=['a', 'b'], diffs=[1, 1])), (3, UpdateBatch(data=['a'], diffs=[-1]))]
    """

    times: list[Time]
    lengths: list[int]
    data: list[Any]
    diffs: list[int]
    consolidated: bool = attrs.field(default=False, eq=False, repr=False)

    def __len__(self) -> int:
        return len(self.data)

    @classmethod
    def of(cls, messages: Iterable[tuple[Time, Any]]) -> RunsBatch:
        """The runs of ``messages`` (``(time, UpdateBatch | RunsBatch)``), in order; empty
        batches leave no run.

        >>> RunsBatch.of([(2, UpdateBatch(["a"], [1])), (1, UpdateBatch([], []))])
        RunsBatch(times=[2], lengths=[1], data=['a'], diffs=[1])
        """
        times: list[Time] = []
        lengths: list[int] = []
        data: list[Any] = []
        diffs: list[int] = []
        consolidated = True
        for t, batch in messages:
            if batch.__class__ is RunsBatch:
                times.extend(batch.times)
                lengths.extend(batch.lengths)
            elif batch.data:
                times.append(t)
                lengths.append(len(batch.data))
            else:
                continue
            data.extend(batch.data)
            diffs.extend(batch.diffs)
            consolidated = consolidated and batch.consolidated
        return cls(times, lengths, data, diffs, consolidated)

    def per_time(self) -> list[tuple[Time, UpdateBatch]]:
        """One ``(time, UpdateBatch)`` message per run, in order."""
        out = []
        lo = 0
        data, diffs = self.data, self.diffs
        consolidated = self.consolidated
        for t, n in zip(self.times, self.lengths):
            hi = lo + n
            out.append((t, UpdateBatch(data[lo:hi], diffs[lo:hi], consolidated)))
            lo = hi
        return out

    def take(self, mask: list[bool]) -> RunsBatch:
        """The updates where ``mask`` is true, in their runs (runs left empty dropped)."""
        kept = list(map(sum, _cuts(mask, self.lengths)))
        times = [t for t, n in zip(self.times, kept) if n]
        return RunsBatch(
            times,
            [n for n in kept if n],
            list(compress(self.data, mask)),
            list(compress(self.diffs, mask)),
            self.consolidated,
        )

    def map_times(self, fn: Callable[[Time], Time | None]) -> RunsBatch:
        """The runs at ``fn(time)``; a run whose time maps to ``None`` is dropped.

        >>> RunsBatch([1, 2], [1, 1], ["a", "b"], [1, 1]).map_times(lambda t: t * 10)
        RunsBatch(times=[10, 20], lengths=[1, 1], data=['a', 'b'], diffs=[1, 1])
        """
        mapped = list(map(fn, self.times))
        times = [t for t in mapped if t is not None]
        if len(times) == len(mapped):
            return RunsBatch(times, self.lengths, self.data, self.diffs, self.consolidated)
        mask: list[bool] = []
        for t, n in zip(mapped, self.lengths):
            mask.extend(repeat(t is not None, n))
        kept = self.take(mask)
        kept.times = times
        return kept


def expand_runs(messages: list[tuple[Time, Any]]) -> list[tuple[Time, Any]]:
    """``messages`` with every :class:`RunsBatch` replaced by its runs, one message each:
    what an operator that does not read runs itself sees.

    >>> expand_runs([(0, RunsBatch([1, 2], [1, 1], ["a", "b"], [1, -1]))])
    [(1, UpdateBatch(data=['a'], diffs=[1])), (2, UpdateBatch(data=['b'], diffs=[-1]))]
    """
    out: list[tuple[Time, Any]] = []
    for message in messages:
        batch = message[1]
        if batch.__class__ is RunsBatch:
            out.extend(batch.per_time())
        else:
            out.append(message)
    return out


def _cuts(items: list[Any], lengths: list[int]) -> list[list[Any]]:
    out = []
    lo = 0
    for n in lengths:
        out.append(items[lo : lo + n])
        lo += n
    return out


def sum_diffs(data: Iterable[Any], diffs: Iterable[int], sums: dict[Any, int]) -> dict[Any, int]:
    """Add each datum's diff into ``sums`` (zeros stay); returns ``sums``.

    >>> sum_diffs(["a", "a"], [1, -1], {})
    {'a': 0}
    """
    get = sums.get
    for d, r in zip(data, diffs):
        sums[d] = get(d, 0) + r
    return sums


class Interest(enum.Enum):
    """Which frontier changes wake an operator.

    ``NEVER``: only messages wake it (stateless operators). ``ALWAYS``: every change of an
    input frontier wakes it (operators that finalize times: arrangements, reductions, sinks).
    """

    NEVER = 0
    ALWAYS = 1


class Capability(Protocol):
    """The right to send at ``time`` (or later) on one output port. Minted by the runtime."""

    @property
    def time(self) -> Time: ...

    @property
    def port(self) -> int: ...

    @property
    def valid(self) -> bool: ...

    def downgrade(self, time: Time) -> None:
        """Move the capability to a later ``time`` (``>=`` the current one)."""

    def delayed(self, time: Time) -> Capability:
        """A new capability at ``time >=`` this one's, on the same port."""

    def drop(self) -> None:
        """Give the capability up; downstream frontiers may then pass its time."""


class OperatorContext(Protocol):
    """The runtime's side of an operator activation (see the module docstring)."""

    @property
    def worker_index(self) -> int: ...

    @property
    def peers(self) -> int: ...

    def messages(self, port: int) -> list[tuple[Time, Any]]:
        """Drain and return every message waiting on input ``port``."""

    def frontier(self, port: int) -> Antichain:
        """The frontier of input ``port``."""

    def send(self, port: int, time: Time, payload: Any) -> None:
        """Send ``payload`` at ``time`` on output ``port``."""

    def capability(self, time: Time, port: int = 0) -> Capability:
        """Mint a capability at ``time`` on output ``port``."""

    def activate(self) -> None:
        """Ask to be scheduled again soon (more work is pending)."""

    def set_interest(self, interest: Interest) -> None:
        """Change which frontier changes wake this operator from now on."""


class Operator:
    """Base class of the per-worker logic of a dataflow node.

    Subclasses set :attr:`interest` and implement :meth:`schedule`. Sources implement
    :meth:`initialize` to keep the capabilities the runtime hands out at start.
    """

    name: str = "operator"
    interest: Interest = Interest.NEVER
    #: ``False`` for an operator that never reads ``ctx.frontier`` and never asks to be woken
    #: by frontier changes (its interest stays ``NEVER``): a loop's feedback, ``enter`` and
    #: ``leave``, linear operators. The progress tracker then keeps no frontier for its
    #: inputs between propagations, which spares every change passing it a step. Should it
    #: ask anyway, ``ctx.frontier`` still answers exactly (made on request); asking to be
    #: woken by frontiers (``ctx.set_interest(Interest.ALWAYS)``) raises ``ValueError``. An
    #: operator whose class interest is ``ALWAYS`` is watched whatever this says.
    reads_frontiers: bool = True
    #: ``True`` for an operator that keeps nothing from one activation to the next (linear
    #: steps, routing, scopes, feedback; sources and sinks, whose state the job keeps): a
    #: checkpoint has nothing to take from it. An operator that keeps state implements
    #: ``save`` and ``load`` (:mod:`.durable`); one that does neither stops a checkpoint with
    #: an error rather than lose its state.
    stateless: bool = False
    #: ``True`` for an operator that reads :class:`RunsBatch` messages itself, taking each
    #: update's time from its run (linear steps, scope crossings, feedback, routing). Any
    #: other operator gets a drained ``RunsBatch`` as one message per run, so that its
    #: ``(time, UpdateBatch)`` reading stays right whatever its senders grouped.
    reads_runs: bool = False

    def initialize(self, ctx: OperatorContext, capabilities: Sequence[Capability]) -> None:
        """Called once before the first activation with one capability per output port at the
        scope's least time. The default drops them: most operators only send in response to
        input.
        """
        for cap in capabilities:
            cap.drop()

    def schedule(self, ctx: OperatorContext) -> None:
        """Do the pending work: drain mailboxes, react to frontiers, send output."""
        raise NotImplementedError

    def held(self) -> int:
        """The updates this operator keeps in its own state (a join's or a reduction's
        histories; an arrangement's trace is counted by its spine), for the statistics: 0
        for an operator that keeps none. Constant time: the dashboard asks every second."""
        return 0


def describe_callable(fn: Callable[..., Any]) -> str:
    """``module.qualname:line`` for a user function, for error messages.

    >>> describe_callable(describe_callable).endswith("describe_callable:" +
    ...     str(describe_callable.__code__.co_firstlineno))
    True
    """
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    where = f"{module}.{name}" if module else name
    return f"{where}:{code.co_firstlineno}" if code is not None else where


def check_function(operator: str, role: str, fn: object, arity: int) -> None:
    """Raise ``TypeError`` now, while the dataflow is built, unless ``fn`` (``operator``'s
    argument ``role``) can be called with ``arity`` positional arguments.

    A user function is only called once data reaches it, in a running job: a wrong one found
    there stops the job, and with no data it is never found at all. Callables without a
    signature (some builtins) are let through; their mistakes still surface when called.

    >>> check_function("map", "fn", len, 1)
    >>> check_function("threshold", "f", lambda n: n, 2)
    Traceback (most recent call last):
    TypeError: threshold: f must take 2 arguments, but <lambda> takes (n)
    >>> check_function("map", "fn", 5, 1)
    Traceback (most recent call last):
    TypeError: map: fn must be a function of 1 argument, got 5
    """
    noun = "argument" if arity == 1 else "arguments"
    if not callable(fn):
        msg = f"{operator}: {role} must be a function of {arity} {noun}, got {fn!r}"
        raise TypeError(msg)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*range(arity))
    except TypeError:
        name = getattr(fn, "__name__", None) or repr(fn)
        msg = f"{operator}: {role} must take {arity} {noun}, but {name} takes {signature}"
        raise TypeError(msg) from None


def is_pair(datum: object) -> bool:
    """Whether ``datum`` is a ``(key, value)`` pair, as keyed operators take: a tuple of two.

    >>> is_pair((1, "a")), is_pair("ab"), is_pair([1, "a"]), is_pair((1, 2, 3))
    (True, False, False, False)
    """
    return isinstance(datum, tuple) and len(datum) == 2
