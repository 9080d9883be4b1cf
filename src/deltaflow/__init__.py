"""deltaflow: differential dataflow for Python.

Describe a computation over collections as a :class:`Pipeline`; deltaflow keeps every output
exactly up to date as the inputs change, doing work proportional to the change.

Where to start: the user guide (``docs/guide.md``). In short, a collection holds data that
change over (int) time; joins and reductions take ``(key, val)`` pairs (``semijoin`` and
``antijoin`` take bare keys); :func:`run` runs a pipeline over complete inputs, :func:`open`
runs it live inside trio; ``python -m deltaflow`` runs one over files.

The package has four layers, each importing only those below it:

* **framework** — the model: timestamps and their lattice, antichains and frontiers, the
  progress tracker, traces (arrangement storage). Pure Python, no trio.
* **operators** — what each operator computes (linear, arrange, join, reduce, iterate, io) and
  the :class:`Collection` API that builds a dataflow from them.
* **scheduler** — how it runs: actors with mailboxes and capabilities, workers stepping them
  on trio, progress exchange, and the :func:`run` / :func:`open` entry points.
* **adapters** — where it connects (Spark).

    >>> import deltaflow as df
    >>> class WordLengths(df.Pipeline):
    ...     def build(self, words):
    ...         return words.map(len)
    >>> df.run(WordLengths(), words=[("cat", 0, 1), ("horse", 1, 1), ("cat", 2, -1)])
    [(3, 0, 1), (5, 1, 1), (3, 2, -1)]
"""

from __future__ import annotations

import logging as _logging

from . import (
    sinks as sinks,  # df.sinks: outputs a job writes out itself
    sources as sources,  # df.sources: inputs a job feeds itself
)
from .errors import (
    CheckpointError as CheckpointError,
    DeltaflowError as DeltaflowError,
    JobClosedError as JobClosedError,
    OperatorError as OperatorError,
    PeerLostError as PeerLostError,
    SubscriptionOverflowError as SubscriptionOverflowError,
)
from .framework.antichain import Antichain as Antichain
from .framework.lattice import Product as Product
from .operators.collection import Arranged as Arranged, Collection as Collection
from .operators.delta import Index as Index, PrefixExtender as PrefixExtender
from .operators.delta.query import multiway_join as multiway_join
from .operators.io import ProbeHandle as ProbeHandle
from .operators.iterate import Variable as Variable, loop_scope as loop_scope
from .operators.pipeline import Pipeline as Pipeline, optional as optional
from .operators.windows import (
    session as session,
    sliding as sliding,
    tumbling as tumbling,
)
from .scheduler.accounting import Rejected as Rejected
from .scheduler.graph import graph as graph
from .scheduler.net.tls import TLS as TLS
from .scheduler.runtime import Job as Job, open as open, run as run

__all__ = [
    "TLS",
    "Antichain",
    "Arranged",
    "CheckpointError",
    "Collection",
    "DeltaflowError",
    "Index",
    "Job",
    "JobClosedError",
    "OperatorError",
    "PeerLostError",
    "Pipeline",
    "PrefixExtender",
    "ProbeHandle",
    "Product",
    "Rejected",
    "SubscriptionOverflowError",
    "Variable",
    "graph",
    "loop_scope",
    "multiway_join",
    "open",
    "optional",
    "run",
    "session",
    "sinks",
    "sliding",
    "sources",
    "tumbling",
]

__version__ = "0.1.0"

_logging.getLogger(__name__).addHandler(_logging.NullHandler())
