"""Running pipelines on Spark: DataFrames in, DataFrames out, one worker per barrier task.

    from deltaflow.adapters import spark as dfspark

    out = dfspark.run(Reachability(), spark, roots=roots_df, edges=edges_df,
                      schema="root long, node long", partitions=2)

:func:`run` runs a pipeline over static DataFrames as one barrier job and returns the
consolidated updates :func:`deltaflow.run` would return, as a DataFrame of the schema's
columns plus ``time`` and ``diff``. :func:`stream` keeps a pipeline running in one
long-lived barrier job fed by streaming DataFrames, one time per micro-batch, and hands each
micro-batch's output changes to a sink; :func:`to_sink` makes that sink (or writes a
:func:`run`'s output) a deltaflow sink such as ``df.sinks.postgres``, each time exactly once.

Slots: a barrier stage runs all its tasks at once, so :func:`run` needs ``partitions`` free
task slots, and :func:`stream` ``partitions`` for its workers for as long as it runs, plus at
least one for the micro-batches' own jobs. Both check before they start and fail at once
when the cluster has fewer; set ``spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures``
and ``.interval`` low (e.g. ``3`` and ``2s``) so Spark's own check fails fast too when another
job takes the slots first.

Environment: every task binds ``SPARK_LOCAL_IP`` when set (on one machine set it to
``127.0.0.1``). The pipeline travels with the job, the modules it uses that are not installed
on the driver by value (:mod:`._ship`); the executors' Python must have deltaflow and the
installed packages the pipeline uses, which a small job checks before the workers start.

Errors: a task's error is raised on the driver as :func:`deltaflow.run` raises it (an
:class:`~deltaflow.OperatorError`, the ``ValueError`` of a bad row), from Spark's exception
(:mod:`._errors`).

Importing this module imports pyspark; ``import deltaflow`` never does.

Module map
==========

* :mod:`._batch`: :func:`run`, one barrier job over static DataFrames.
* :mod:`._stream`: :func:`stream`, its set-up and start; :mod:`._stream_driver`: the running
  :class:`SparkStream`, which steps the workers through each micro-batch from the driver;
  :mod:`._stream_inputs` checks its inputs and arguments,
  :mod:`._stream_sink` makes its sink, :mod:`._stream_state` keeps its workers' state under
  the checkpoint location, :mod:`._stream_server` admits its workers on the driver (their
  rendezvous), :mod:`._stream_tasks` are its Spark tasks (the workers, feeding, fetching).
* :mod:`._convert`: rows to updates and back; :mod:`._sinks`: deltaflow sinks as Spark ones.
* :mod:`._ship`, :mod:`._slots`, :mod:`._errors`, :mod:`._logs`: the pipeline's way to the
  executors, free slots, a task's error and WARNINGs on the driver.
* :mod:`._session`, :mod:`._standalone`: a local session, a standalone cluster on one machine.
"""

from __future__ import annotations

from ._batch import run as run
from ._session import local_session as local_session
from ._sinks import SinkBatches as SinkBatches, to_sink as to_sink  # deltaflow sinks (#47)
from ._stream import SparkStream as SparkStream, stream as stream

__all__ = ["SinkBatches", "SparkStream", "local_session", "run", "stream", "to_sink"]
