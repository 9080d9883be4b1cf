"""``df.sinks``: outputs a job writes out itself, each closed time exactly once.

* :func:`postgres` — keep a PostgreSQL table equal to an output (or append its changelog),
  each time in one transaction with the job's progress.
* :class:`Sink`, :class:`SinkWriter` — the protocol another sink implements; see
  :mod:`deltaflow.scheduler.sinks`.
"""

from __future__ import annotations

from .adapters.postgres.sink import PostgresSink as PostgresSink, postgres as postgres
from .scheduler.sinks import Sink as Sink, SinkWriter as SinkWriter

__all__ = ["PostgresSink", "Sink", "SinkWriter", "postgres"]
