"""Event-time windows: ``coll.window(spec, at=fn, ...)`` with the specs ``tumbling``,
``sliding`` and ``session``, closed by a retention or by a watermark.

One module per concept:

* :mod:`.specs` - the specs, how a datum is placed in the windows of a fixed-size spec, and
  a retention's closing of windows (:class:`~.specs.Closing`);
* :mod:`.sessions` - :class:`~.sessions.SessionOperator`: each key's sessions, a change
  re-emitting only the sessions within ``gap`` of it;
* :mod:`.watermarks` - windows and sessions whose state a watermark bounds, as Spark's
  ``withWatermark`` does;
* :mod:`.eventtime` - what an event time and a span may be (numbers, instants, intervals);
* :mod:`.build` - adding a window's operators to a dataflow (``Collection.window``).

    >>> sliding(10, 5).windows(12)
    [(5, 15), (10, 20)]
"""

from .specs import Session, Sliding, session, sliding, tumbling

__all__ = ["Session", "Sliding", "session", "sliding", "tumbling"]
