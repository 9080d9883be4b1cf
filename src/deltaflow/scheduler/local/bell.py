"""How an idle worker waits: until work is queued for it, or a socket has something to read.

A :class:`Bell` is rung whenever something is queued for its worker (an actor activated, a
progress batch delivered). A worker with nothing to do waits on it; a worker that also reads
its process's sockets (:class:`~deltaflow.scheduler.net.tcp.TcpTransport`) waits on the bell *or*
a descriptor becoming readable, in one wait, so a frame from another process wakes the very
task that reads it and steps on what it carried: no reader task in between, no second
wake-up.

    >>> import trio
    >>> async def ring_later(bell):
    ...     await trio.sleep(0.01)
    ...     bell.ring()
    >>> async def main():
    ...     bell = Bell()
    ...     async with trio.open_nursery() as nursery:
    ...         nursery.start_soon(ring_later, bell)
    ...         await bell.wait()
    ...     return bell.rung
    >>> trio.run(main)
    True
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["Bell"]


class Bell:
    """A flag a waiting task sleeps on: :meth:`ring` sets it and wakes the task.

    Unlike a :class:`trio.Event` it is cleared in place (:meth:`clear`: the worker clears it
    before it looks for work, so a ring after that look is never lost), and its wait can also
    end on a readable descriptor (:meth:`wait`).
    """

    __slots__ = ("_scope", "_task", "rung")

    def __init__(self) -> None:
        #: Whether the bell rang since it was last cleared.
        self.rung = False
        self._task: trio.lowlevel.Task | None = None
        self._scope: trio.CancelScope | None = None

    def ring(self) -> None:
        """Set the flag and wake the task waiting, if any."""
        if self.rung:
            return
        self.rung = True
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)
        elif self._scope is not None:
            self._scope.cancel()

    def clear(self) -> None:
        """Lower the flag (before the worker looks for work)."""
        self.rung = False

    async def wait(self, fd: Any = None) -> None:
        """Return once the bell has rung or, given ``fd`` (a socket or descriptor), once
        ``fd`` is readable; at once if it has rung already. A trio checkpoint.

        Raises:
            trio.ClosedResourceError: ``fd`` was closed meanwhile (through trio).
        """
        if self.rung:
            await trio.lowlevel.checkpoint()
            return
        if fd is None:
            self._task = trio.lowlevel.current_task()

            def abort(_: Any) -> trio.lowlevel.Abort:
                self._task = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
            return
        # A task waiting on a descriptor can be woken early only by cancelling its wait.
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                await trio.lowlevel.wait_readable(fd)
            finally:
                self._scope = None
