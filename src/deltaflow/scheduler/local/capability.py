"""Capabilities: the right to send at a time, minted only by the runtime.

An actor holding a capability for time ``t`` on an output port may send updates at any time
``>= t`` there, and — this is the point — keeps every downstream frontier from passing ``t``
until it downgrades or drops the capability. The runtime counts each live capability as a
pointstamp in the progress tracker: minting is ``+1``, dropping ``-1``, downgrading both.

Python finalizers run too late to release a capability reliably, so ``drop()`` is explicit;
a capability dropped twice, or used after being dropped, raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ...framework.lattice import less_equal

if TYPE_CHECKING:
    from ...framework.lattice import Time
    from .actor import Actor

__all__ = ["Capability", "initial", "mint"]


@final
class Capability:
    """A live capability for ``time`` on output ``port`` of one actor.

    Only the runtime creates them (:func:`mint`, :func:`initial`); operators get them from
    ``initialize`` or ``ctx.capability(...)``, and derive more with :meth:`delayed`.
    """

    __slots__ = ("_actor", "_port", "_time", "_valid")

    _actor: Actor
    _port: int
    _time: Time
    _valid: bool

    def __init__(self) -> None:
        msg = "capabilities are minted by the runtime: use ctx.capability(time, port)"
        raise TypeError(msg)

    @classmethod
    def _new(cls, actor: Actor, port: int, time: Time) -> Capability:
        """A valid capability, not yet counted anywhere (the constructor refuses)."""
        cap = object.__new__(cls)
        cap._actor = actor
        cap._port = port
        cap._time = time
        cap._valid = True
        return cap

    @property
    def time(self) -> Time:
        """The time this capability allows sending at (or after)."""
        return self._time

    @property
    def port(self) -> int:
        """The output port it is for."""
        return self._port

    @property
    def valid(self) -> bool:
        """False once dropped."""
        return self._valid

    def _ensure_valid(self) -> None:
        if not self._valid:
            msg = (
                f"operator '{self._actor.name}' (output {self._port}) used a capability for "
                f"time {self._time!r} after dropping it"
            )
            raise ValueError(msg)

    def downgrade(self, time: Time) -> None:
        """Move the capability to ``time``, which must be ``>=`` its current time."""
        self._ensure_valid()
        if time == self._time:
            return
        if not less_equal(self._time, time):
            msg = (
                f"operator '{self._actor.name}' (output {self._port}) cannot downgrade a "
                f"capability from time {self._time!r} to {time!r}: the new time must be "
                "greater or equal; drop the capability instead"
            )
            raise ValueError(msg)
        self._actor.source_change(self._port, time, 1)
        self._actor.source_change(self._port, self._time, -1)
        self._time = time

    def delayed(self, time: Time) -> Capability:
        """A new capability for ``time >=`` this one's time, on the same port."""
        self._ensure_valid()
        if not less_equal(self._time, time):
            msg = (
                f"operator '{self._actor.name}' (output {self._port}) cannot derive a "
                f"capability for time {time!r} from one for {self._time!r}"
            )
            raise ValueError(msg)
        return mint(self._actor, self._port, time)

    def drop(self) -> None:
        """Release the capability; downstream frontiers may then pass its time."""
        self._ensure_valid()
        self._valid = False
        self._actor.source_change(self._port, self._time, -1)

    def __repr__(self) -> str:
        state = "" if self._valid else ", dropped"
        return f"<Capability time={self._time!r} port={self._port} of {self._actor.name!r}{state}>"


def mint(actor: Actor, port: int, time: Time) -> Capability:
    """A new capability of ``actor`` for ``time`` on output ``port``, reported to the actor's
    progress counts (the runtime's: an operator asks ``ctx.capability(time, port)``)."""
    cap = Capability._new(actor, port, time)
    actor.source_change(port, time, 1)
    return cap


def initial(actor: Actor, port: int, time: Time) -> Capability:
    """A start-up capability of ``actor``: every tracker already counts it, so nothing is
    reported."""
    cap = Capability._new(actor, port, time)
    actor.hold_initial(port, time)
    return cap
