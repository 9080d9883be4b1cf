"""The application's side of a running job: an input to feed, an output to read, and a
subscription to an output's completed times.

    >>> import deltaflow as df, trio
    >>> class Double(df.Pipeline):
    ...     def build(self, xs):
    ...         return xs.map(lambda x: 2 * x)
    >>> async def main():
    ...     async with df.open(Double()) as job:
    ...         job.inputs["xs"].insert(3)           # an InputHandle
    ...         await job.advance_to(1)
    ...         return job.output.at(0)             # an OutputHandle
    >>> trio.run(main)
    {6: 1}
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

import trio

from ..errors import JobClosedError, SubscriptionOverflowError
from ..framework.hashing import owners
from ..framework.tuning import DEFAULT_MAX_BUFFER
from ..operators.dataflow import identity_key
from ..operators.values import as_count as _integer
from . import observe
from .accounting import InputAccount
from .frames import is_frame
from .validation import (
    check_diff,
    check_hashable,
    check_nan,
    check_nans,
    require_int,
    validate_updates,
)

if TYPE_CHECKING:
    from ..framework.lattice import Time
    from ..operators.io import InputFeed, OutputStore
    from .job import Job

__all__ = ["DEFAULT_MAX_BUFFER", "InputHandle", "OutputHandle", "Subscription"]


class InputHandle:
    """Feeds one named input of a running job.

    ``insert(d)``, ``remove(d)`` and ``update(d, diff)`` change the input at its current time
    (the job's time: 0 at first, then whatever ``job.advance_to`` set); ``update_at`` at a
    later time. Updates are validated when fed (against the input's declared schema too): a
    bad one raises and nothing else is lost, or, with the input's ``on_bad`` mode ``"skip"``
    or ``"quarantine"``, is set aside and counted (:mod:`deltaflow.scheduler.accounting`).
    """

    def __init__(
        self,
        job: Job,
        name: str,
        feeds: Sequence[InputFeed],
        owner_key: Callable[[Any], Any] | None = None,
        account: InputAccount | None = None,
    ) -> None:
        self._job = job
        self.name = name
        self._feeds = feeds
        #: The key the input's data are exchanged by right after it (``None``: not known):
        #: :meth:`flush` then hands each datum to the worker that owns it.
        self._owner_key = owner_key
        #: What this input read and refused (see :mod:`.accounting`).
        self.account = InputAccount(name) if account is None else account
        self._schema = job.pipeline.input_schema(name)
        self._data: list[Any] = []
        self._diffs: list[int] = []
        self._later: dict[Any, tuple[list[Any], list[int]]] = {}
        self.closed = False

    @property
    def time(self) -> int:
        """The time updates fed now are stamped with."""
        return self._job.time

    def check_open(self) -> None:
        """Refuse updates to a closed input, or to a job that failed or is closed.

        Raises:
            JobClosedError: naming the input, or saying what became of the job.
        """
        if self.closed:
            msg = f"input {self.name!r} is closed"
            raise JobClosedError(msg)
        self._job.check_usable()

    def _check_time(self, data: Any, time: Any) -> int:
        """``time`` as an ``int`` not before the job's time, or an error naming the input."""
        t = _integer(time)
        if t is None:
            msg = f"input {self.name!r}: time {time!r} for {data!r} must be an int"
            raise TypeError(msg)
        if t < self._job.time:
            msg = (
                f"input {self.name!r}: time {time!r} for {data!r} is before the input's "
                f"current time {self._job.time!r}"
            )
            raise ValueError(msg)
        return t

    def _checked(self, data: Any, diff: Any) -> tuple[Any, int]:
        """``(data, diff)`` checked (the schema, hashable, no NaN, an int diff), or the error
        naming the input and the value."""
        if self._schema is not None:
            try:
                data = self._schema.check_datum(data)
            except ValueError as exc:
                msg = f"input {self.name!r}: {data!r} does not fit the declared schema: {exc}"
                raise ValueError(msg) from None
        check_hashable(self.name, data)
        check_nan(self.name, data)
        if diff.__class__ is not int:
            diff = check_diff(self.name, data, diff)
        return data, diff

    def _admit(self, data: Any, diff: Any, time: Any = None) -> bool:
        """Check one update and keep it (at ``time``, default the current one); a bad one is
        refused by the input's ``on_bad`` mode: raised, or set aside (then False)."""
        now = self._job.time
        try:
            data, diff = self._checked(data, diff)
            t = now if time is None else self._check_time(data, time)
        except (TypeError, ValueError) as exc:
            given = None if time is None else _integer(time)
            at = now if given is None else max(now, given)
            self.account.refuse(exc, data, f"fed at time {at}", at)
            return False
        self.account.admitted(t)
        if t == now:
            self._data.append(data)
            self._diffs.append(diff)
            return True
        slot = self._later.get(t)
        if slot is None:
            slot = self._later[t] = ([], [])
        slot[0].append(data)
        slot[1].append(diff)
        return True

    def insert(self, data: Any) -> None:
        """Add one ``data`` at the current time."""
        self.check_open()
        self._admit(data, 1)

    def remove(self, data: Any) -> None:
        """Remove one ``data`` at the current time."""
        self.check_open()
        self._admit(data, -1)

    def update(self, data: Any, diff: int = 1) -> None:
        """Change the count of ``data`` by ``diff`` at the current time."""
        self.check_open()
        self._admit(data, diff)

    def update_at(self, data: Any, time: Time, diff: int = 1) -> None:
        """Change the count of ``data`` by ``diff`` at a ``time`` not before the current one."""
        self.check_open()
        self._admit(data, diff, time)

    def insert_many(self, data: Iterable[Any], diffs: Iterable[int] | None = None) -> None:
        """Change many data at the current time at once (diff 1 each, or ``diffs``).

        ``data`` may be a pandas DataFrame: its columns other than ``time`` and ``diff``, in
        order, form each datum (one column: its value; several: a tuple); its ``time``
        column (default: the current time) and ``diff`` column (default 1) place them.

        Validated as a whole before anything is kept: a bad datum or diff raises and
        nothing of this call is fed (with ``on_bad`` ``"skip"`` or ``"quarantine"``, the
        bad ones are set aside and the rest fed).
        """
        self.check_open()
        if is_frame(data):
            self._insert_frame(data, diffs)
            return
        data, new_diffs = self.checked_columns(data, diffs, self._job.time)
        self._data.extend(data)
        self._diffs.extend(new_diffs)

    def _insert_frame(self, frame: Any, diffs: object) -> None:
        if diffs is not None:
            msg = f"input {self.name!r}: a DataFrame brings its own diff column; diffs= is not used"
            raise TypeError(msg)
        columns = [str(c) for c in frame.columns]
        if "time" not in columns:
            frame = frame.assign(time=self._job.time)
        by_time = validate_updates(self.name, frame, self._schema, self.account, self._job.time)
        for time, (data, _) in by_time.items():
            self._check_time(data[0], time)
        for time, (data, new_diffs) in sorted(by_time.items()):
            self.extend_checked(data, new_diffs, time)

    def extend(self, data: Iterable[Any], diffs: Iterable[int], time: Time | None = None) -> None:
        """Feed columns in bulk at ``time`` (the current time when ``None``), validated as a
        whole before anything is kept, like :meth:`insert_many`."""
        self.check_open()
        if isinstance(data, (str, bytes)):
            msg = f"input {self.name!r}: expected an iterable of data, not {data!r}"
            raise TypeError(msg)
        data = list(data)
        at = self._job.time if time is None else self._check_time(data[0] if data else None, time)
        data, new_diffs = self.checked_columns(data, diffs, at)
        self.extend_checked(data, new_diffs, at)

    def checked_columns(
        self, data: Iterable[Any], diffs: Iterable[int] | None, time: int
    ) -> tuple[list[Any], list[int]]:
        """``data`` and ``diffs`` (fed at ``time``) as lists, every datum hashable and fitting
        the schema, every diff an int; bad ones raised, or set aside by ``on_bad``."""
        if isinstance(data, (str, bytes)):
            msg = f"input {self.name!r}: expected an iterable of data, not {data!r}"
            raise TypeError(msg)
        data = list(data)
        if diffs is None:
            new_diffs = [1] * len(data)
        else:
            new_diffs = list(diffs)
            if len(new_diffs) != len(data):
                msg = f"input {self.name!r}: {len(data)} data but {len(new_diffs)} diffs"
                raise ValueError(msg)
        account = self.account
        if self._schema is None and account.mode == "fail":
            # Checked as a whole (the common case fast); the first bad one is raised.
            try:
                try:
                    list(map(hash, data))
                except TypeError:
                    for d in data:
                        check_hashable(self.name, d)
                check_nans(self.name, data)
                if not all(r.__class__ is int for r in new_diffs):
                    new_diffs = [check_diff(self.name, d, r) for d, r in zip(data, new_diffs)]
            except (TypeError, ValueError) as exc:
                account.refuse(exc, None, f"fed at time {time}", time)
            account.admitted(time, len(data))
            return data, new_diffs
        where = f"fed at time {time}"
        kept: list[Any] = []
        kept_diffs: list[int] = []
        refused: list[tuple[BaseException, Any]] = []
        for d, r in zip(data, new_diffs):
            try:
                d, r = self._checked(d, r)
            except (TypeError, ValueError) as error:
                if account.mode == "fail":
                    account.refuse(error, d, where, time)
                refused.append((error, d))
                continue
            kept.append(d)
            kept_diffs.append(r)
        for reason, d in refused:
            account.refuse(reason, d, where, time)
        account.admitted(time, len(kept))
        return kept, kept_diffs

    def extend_checked(self, data: list[Any], diffs: list[int], time: Time | None = None) -> None:
        """:meth:`extend` of columns already validated (by :meth:`checked_columns`, or as
        :func:`run` checks its inputs first)."""
        self.check_open()
        if time is None or time == self._job.time:
            self._data.extend(data)
            self._diffs.extend(diffs)
        else:
            slot = self._later.get(time)
            if slot is None:
                self._later[time] = (list(data), list(diffs))
            else:
                slot[0].extend(data)
                slot[1].extend(diffs)

    def flush(self, before: int | None = None) -> None:
        """Hand everything fed so far to the workers' input operators (they take it when the
        job next wakes them: :meth:`Job.flush`, :meth:`Job.advance_to`); with ``before``,
        only the updates at times before it (a job that keeps checkpoints holds the rest
        back until it advances past them)."""
        feeds = self._feeds
        batches = []
        if self._data and (before is None or self._job.time < before):
            batches.append((self._job.time, self._data, self._diffs))
            self._data, self._diffs = [], []
        if self._later:
            if before is None:
                later, self._later = self._later, {}
            else:
                later = {t: v for t, v in self._later.items() if t < before}
                for t in later:
                    del self._later[t]
            batches.extend((t, d, r) for t, (d, r) in later.items())
        n = len(feeds)
        for time, data, diffs in batches:
            if n == 1:
                feeds[0].push(time, data, diffs)
                continue
            for w, part, part_diffs in self._split(data, diffs, n):
                feeds[w].push(time, part, part_diffs)

    def _split(
        self, data: list[Any], diffs: list[int], n: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        """``data`` dealt to ``n`` workers: each datum to the worker that owns it at the
        input's first exchange, so that it crosses no further (with workers in several
        processes, it crosses between processes once); else in ``n`` contiguous parts."""
        key = self._owner_key
        if key is not None:
            try:
                owner = owners(data if key is identity_key else list(map(key, data)), n)
            except Exception:
                pass  # a datum the key refuses: the exchange reports it, naming its operator
            else:
                parts = []
                for w in range(n):
                    mask = [o == w for o in owner]
                    part = list(compress(data, mask))
                    if part:
                        parts.append((w, part, list(compress(diffs, mask))))
                return parts
        size = -(-len(data) // n) or 1
        return [
            (w, data[lo : lo + size], diffs[lo : lo + size])
            for w, lo in enumerate(range(0, len(data), size))
        ]

    def close(self) -> None:
        """No more updates for this input (the job keeps running for the others)."""
        if self.closed:
            return
        self._job.check_not_checkpointing(f"closing input {self.name!r}")
        self.flush()
        self.closed = True
        for feed in self._feeds:
            feed.closed = True
        self._job.activate_inputs(self.name)

    @property
    def feeds(self) -> Sequence[InputFeed]:
        """What this input deals the data fed to it to: one feed per worker (see
        :meth:`.Placement.feeds`)."""
        return self._feeds

    def advance_feeds(self, time: int) -> None:
        """The feeds stand at ``time``: the input's capability moves there once its workers
        take it (the job advanced to ``time``)."""
        for feed in self._feeds:
            feed.time = time

    def stand_at(self, time: int, *, closed: bool) -> None:
        """Where a checkpoint left the input: at ``time``, closed if ``closed``."""
        self.closed = closed
        for feed in self._feeds:
            feed.stand_at(time, closed)


class OutputHandle:
    """Reads one output of a running job."""

    def __init__(self, job: Job, store: OutputStore) -> None:
        self._job = job
        self._store = store
        self.name = store.name
        self._subscribers: list[trio.MemorySendChannel[tuple[Any, list[tuple[Any, int]]]]] = []
        # The subscriptions with a max_buffer, by their channel: told when they overflow
        # (weakly, so that a subscription dropped unread still stops its deliveries).
        self._bounded: weakref.WeakValueDictionary[Any, Subscription] = (
            weakref.WeakValueDictionary()
        )
        self._captures: list[list[tuple[Any, list[tuple[Any, int]]]]] = []
        #: How many (consolidated) updates this output has published (the progress line's).
        self.published = 0
        store.on_complete = self._publish

    def _publish(self, time: Any, updates: list[tuple[Any, int]]) -> None:
        self.published += len(updates)
        if observe.logger.isEnabledFor(logging.DEBUG):
            observe.logger.debug(
                "output %r: time %r complete, %d updates", self.name, time, len(updates)
            )
        for captured in self._captures:
            captured.append((time, updates))
        for chan in list(self._subscribers):
            try:
                chan.send_nowait((time, updates))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(chan)
            except trio.WouldBlock:
                # A reader this far behind fails alone: the job (and other readers) go on.
                self._subscribers.remove(chan)
                subscription = self._bounded.pop(chan, None)
                if subscription is not None:
                    subscription._overflow(time)
                chan.close()

    def at(self, time: Time) -> dict[Any, int]:
        """The output collection at a complete ``time``, as ``{data: count}``."""
        require_int(time, f"output {self.name!r}: at")
        return self._store.at(time)

    def updates(self) -> list[tuple[Any, Any, int]]:
        """Every update published so far, ``(data, time, diff)``, consolidated per time."""
        return self._store.updates()

    def is_complete(self, time: Time) -> bool:
        """True once no update at ``time`` can still arrive."""
        return self._store.is_complete(time)

    @property
    def frontier(self) -> Any:
        """The output's frontier: times beyond it may still change."""
        return self._store.frontier

    def capture(self) -> list[tuple[Any, list[tuple[Any, int]]]]:
        """A list that receives ``(time, consolidated updates)`` for each time completing from
        now on, in time order: :meth:`subscribe` without a task, for tests and scripts.
        """
        captured: list[tuple[Any, list[tuple[Any, int]]]] = []
        self._captures.append(captured)
        return captured

    def subscribe(self, max_buffer: int | None = DEFAULT_MAX_BUFFER) -> Subscription:
        """``(time, consolidated updates)`` for each time that completes from the call on, as
        an async iterator: ``async for time, updates in job.output.subscribe()``.

        Times whose updates cancel out entirely are not reported. The iteration ends when the
        job finishes (at once for a job that has already finished), and raises the
        :class:`~deltaflow.OperatorError` of a job that fails.

        ``max_buffer`` (default :data:`DEFAULT_MAX_BUFFER`, 1024): at most this many times
        wait for the reader; one more fails this subscription (its iteration raises
        :class:`~deltaflow.SubscriptionOverflowError` after the times it holds) while the job
        goes on. ``None``: no limit (a reader that stops reading then grows the job without
        bound).

        Raises:
            JobClosedError: the job failed before the call.
            ValueError: ``max_buffer`` is not a positive int or None.
        """
        if max_buffer is not None and (max_buffer.__class__ is not int or max_buffer < 1):
            msg = f"subscribe: max_buffer must be a positive int or None, not {max_buffer!r}"
            raise ValueError(msg)
        job = self._job
        if job.error is not None:
            job.check_usable()
        size = math.inf if max_buffer is None else max_buffer
        send, recv = trio.open_memory_channel[tuple[Any, list[tuple[Any, int]]]](size)
        subscription = Subscription(job, recv, max_buffer, self.name)
        if job.closed or job.failed or job.finished:
            send.close()
        else:
            self._subscribers.append(send)
            if max_buffer is not None:
                self._bounded[send] = subscription
        return subscription

    def close_subscriptions(self) -> None:
        """End every subscription's iteration (the job finished, failed or was abandoned)."""
        for chan in self._subscribers:
            chan.close()
        self._subscribers.clear()
        self._bounded.clear()


class Subscription:
    """What :meth:`OutputHandle.subscribe` returns: an async iterator of ``(time, updates)``.

    It is registered when made, so no time completing after ``subscribe()`` is missed, even
    before the first ``__anext__``. ``aclose()`` (or dropping it) stops the deliveries.
    """

    def __init__(
        self,
        job: Job,
        recv: trio.MemoryReceiveChannel[Any],
        max_buffer: int | None = None,
        output: str = "output",
    ) -> None:
        self._job = job
        self._recv = recv
        self._max_buffer = max_buffer
        self._output = output
        self._overflowed_at: Any = None
        # A subscription dropped without aclose() (a loop left by break) stops receiving:
        # the next delivery finds the channel closed and forgets it.
        weakref.finalize(self, recv.close)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[Any, list[tuple[Any, int]]]:
        try:
            item: tuple[Any, list[tuple[Any, int]]] = await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            self._recv.close()
            if self._overflowed_at is not None:
                msg = (
                    f"output {self._output!r}: this subscription fell more than "
                    f"{self._max_buffer} times behind (time {self._overflowed_at!r} found its "
                    "buffer full); the job goes on. Read faster, subscribe with a larger "
                    "max_buffer, or read job.output.at(...) instead"
                )
                raise SubscriptionOverflowError(msg) from None
            if self._job.error is not None:
                self._job.raise_error()
            raise StopAsyncIteration from None
        return item

    def _overflow(self, time: Any) -> None:
        self._overflowed_at = time

    async def aclose(self) -> None:
        """Stop receiving (the job goes on)."""
        self._recv.close()
