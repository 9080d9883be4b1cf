"""Every record accounted for: per input, the records read, refused and set aside, and the
quarantined ones themselves.

A *bad record* is one an input refuses: a malformed update, an unhashable datum, a NaN, a
time before the input's, a diff that is not an int, a value that does not fit the input's
declared schema (:attr:`deltaflow.Pipeline.schemas`, a null in a ``NOT NULL`` column
included). What happens to it is the input's ``on_bad`` mode:

* ``"fail"`` (the default): the error is raised where the record was fed, naming the input
  and the value; nothing fed before is lost;
* ``"skip"``: the record is left out and counted (``statistics()["inputs"][name]["skipped"]``);
* ``"quarantine"``: the record is left out, counted, and kept as a :class:`Rejected` (the
  input, the record, the reason, where it came from) in the job's side output
  (``job.rejected``; the command line writes them as JSON lines).

Counts and quarantined records are stamped with the time they were fed at, so that a
checkpoint at ``T`` keeps exactly those before ``T``: a job resumed there and fed again from
``T`` on (as the checkpoint contract asks) counts and quarantines every record exactly once.

    >>> account = InputAccount("events", "quarantine")
    >>> account.admitted(0)
    >>> account.refuse(ValueError("'x' is not a bigint"), ("u1", "x"), "insert", 0)
    >>> account.counts()
    {'read': 2, 'accepted': 1, 'refused': 1, 'skipped': 0, 'quarantined': 1}
    >>> account.rejected()
    [Rejected(input='events', datum=('u1', 'x'), reason="'x' is not a bigint", where='insert')]
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import cloudpickle  # type: ignore[import-untyped]

__all__ = ["MODES", "InputAccount", "Rejected", "check_on_bad", "make_accounts"]

MODES = ("fail", "skip", "quarantine")
"""What an input does with a bad record (see the module)."""

_FIELDS = ("read", "refused", "skipped", "quarantined")


@attrs.frozen
class Rejected:
    """A record an input set aside (``on_bad="quarantine"``): the ``input``'s name, the
    ``datum`` as it was fed (the whole update for a malformed one), the ``reason`` it was
    refused, and ``where`` it came from (a file and line, ``"update 3"`` of ``df.run``'s
    input, ``"insert at time 5"``, a Spark micro-batch).

    >>> Rejected("events", "x", "bad", "events.csv, line 3").where
    'events.csv, line 3'
    """

    input: str
    datum: Any
    reason: str
    where: str


def check_on_bad(on_bad: object, names: Iterable[str]) -> dict[str, str]:
    """``on_bad`` as a mode per input: ``None`` (every input ``"fail"``), one mode for every
    input, or a dict of modes by input name (the others ``"fail"``).

    >>> check_on_bad({"events": "skip"}, ["events", "users"])
    {'events': 'skip', 'users': 'fail'}
    >>> check_on_bad("bogus", ["events"])
    Traceback (most recent call last):
    ...
    ValueError: on_bad: 'bogus' is not one of 'fail', 'skip', 'quarantine'

    Raises:
        ValueError: an unknown mode, or a dict naming an input the pipeline does not have.
        TypeError: neither None, a string nor a dict.
    """
    names = list(names)
    modes = dict.fromkeys(names, "fail")
    if on_bad is None:
        return modes
    if isinstance(on_bad, str):
        given: Mapping[Any, Any] = dict.fromkeys(names, on_bad)
    elif isinstance(on_bad, Mapping):
        given = on_bad
    else:
        msg = f"on_bad must be a mode or a dict of modes by input name, not {on_bad!r}"
        raise TypeError(msg)
    for name, mode in given.items():
        if name not in modes:
            msg = f"on_bad names the input {name!r}; the inputs are {names}"
            raise ValueError(msg)
        if mode not in MODES:
            shown = ", ".join(repr(m) for m in MODES)
            msg = f"on_bad: {mode!r} is not one of {shown}"
            raise ValueError(msg)
        modes[name] = mode
    return modes


@attrs.define(eq=False)
class InputAccount:
    """The records one input read and refused, and those it quarantined, by the time they
    were fed at (see the module)."""

    name: str
    mode: str = "fail"
    #: Counts of the records fed at times before the job's (those a checkpoint keeps).
    _closed: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(_FIELDS, 0))
    #: Counts of the records fed at the job's time or later, by time: only the non-zero
    #: fields, so that a round of good records keeps one field and closes in a few steps.
    _open: dict[int, dict[str, int]] = attrs.field(factory=dict)
    #: ``(time, record)`` of every quarantined record, in the order refused.
    _rejected: list[tuple[int, Rejected]] = attrs.field(factory=list)

    def _slot(self, time: int) -> dict[str, int]:
        slot = self._open.get(time)
        if slot is None:
            slot = self._open[time] = {}
        return slot

    def admitted(self, time: int, n: int = 1) -> None:
        """``n`` good records were fed at ``time``."""
        if n:
            slot = self._open.get(time)
            if slot is None:
                self._open[time] = {"read": n}
            else:
                slot["read"] = slot.get("read", 0) + n

    def refuse(self, exc: BaseException, datum: Any, where: str, time: int) -> None:
        """A bad ``datum`` fed at ``time``: raise ``exc`` (mode ``"fail"``), or count it and
        (``"quarantine"``) keep it with ``exc`` as its reason."""
        slot = self._slot(time)
        slot["read"] = slot.get("read", 0) + 1
        slot["refused"] = slot.get("refused", 0) + 1
        if self.mode == "fail":
            raise exc
        if self.mode == "skip":
            slot["skipped"] = slot.get("skipped", 0) + 1
            return
        slot["quarantined"] = slot.get("quarantined", 0) + 1
        self._rejected.append((time, Rejected(self.name, datum, str(exc), where)))

    def close_before(self, time: int) -> None:
        """The job advanced to ``time``: counts of earlier times are final."""
        if not self._open:
            return
        for t in [t for t in self._open if t < time]:
            for field, n in self._open.pop(t).items():
                self._closed[field] += n

    def counts(self) -> dict[str, int]:
        """``read`` (every record offered), ``accepted``, ``refused`` (``skipped`` +
        ``quarantined``, + the one ``"fail"`` raised for), ``skipped``, ``quarantined``."""
        total = dict(self._closed)
        for slot in self._open.values():
            for field, n in slot.items():
                total[field] += n
        return {
            "read": total["read"],
            "accepted": total["read"] - total["refused"],
            "refused": total["refused"],
            "skipped": total["skipped"],
            "quarantined": total["quarantined"],
        }

    def rejected(self) -> list[Rejected]:
        """The quarantined records, in the order they were refused."""
        return [r for _, r in self._rejected]

    def absorb(self, other: InputAccount) -> None:
        """Take ``other``'s counts and records (an account kept while checking a whole input
        before the job started)."""
        for field, n in other._closed.items():
            self._closed[field] += n
        for t, slot in other._open.items():
            mine = self._slot(t)
            for field, n in slot.items():
                mine[field] = mine.get(field, 0) + n
        self._rejected.extend(other._rejected)

    def saved(self, time: int) -> dict[str, Any]:
        """What a checkpoint at ``time`` keeps: the counts and records of earlier times."""
        self.close_before(time)
        kept = [(t, r) for t, r in self._rejected if t < time]
        return {
            "counts": dict(self._closed),
            "rejected": base64.b64encode(cloudpickle.dumps(kept, 5)).decode("ascii"),
        }

    def restore(self, saved: Mapping[str, Any] | None) -> None:
        """Stand where a checkpoint left this account (``saved``: :meth:`saved`'s; ``None``
        for a checkpoint taken before inputs were accounted for)."""
        self._closed = dict.fromkeys(_FIELDS, 0)
        self._open = {}
        self._rejected = []
        if saved is None:
            return
        for field in _FIELDS:
            self._closed[field] = int(saved["counts"].get(field, 0))
        self._rejected = list(cloudpickle.loads(base64.b64decode(saved["rejected"])))


def make_accounts(names: Iterable[str], on_bad: object = None) -> dict[str, InputAccount]:
    """One :class:`InputAccount` per input name, with its ``on_bad`` mode
    (:func:`check_on_bad`)."""
    modes = check_on_bad(on_bad, names)
    return {name: InputAccount(name, mode) for name, mode in modes.items()}
