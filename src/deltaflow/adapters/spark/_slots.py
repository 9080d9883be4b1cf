"""What a barrier job needs from the cluster: free task slots, and an address to bind.

A barrier stage of ``n`` tasks starts only when ``n`` slots are free at once. Spark itself
checks this when the stage is submitted, but with its default settings it retries for ten
minutes before failing (``spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures`` 40
times, ``.interval`` 15 s), and a streaming job whose micro-batches find no slot left waits
forever. So the adapter counts first: :func:`require_slots` fails at once, naming what it
counted, when the job cannot start. Setting the two Spark options low (e.g. ``3`` and
``2s``) bounds the wait when another job takes the slots after the count.

    >>> task_host({"SPARK_LOCAL_IP": "10.0.0.7"})
    '10.0.0.7'
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["free_slots", "require_slots", "task_host"]


def total_slots(sc: SparkContext) -> int:
    """How many tasks the cluster runs at once (executor cores / task cpus)."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # another Spark version's internals: the documented estimate
        return int(sc.defaultParallelism)


def free_slots(sc: SparkContext) -> tuple[int, int]:
    """``(free, total)``: task slots not running a task now, and all of them."""
    total = total_slots(sc)
    tracker = sc.statusTracker()
    busy = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            busy += info.numActiveTasks
    return max(0, total - busy), total


def require_slots(sc: SparkContext, needed: int, what: str) -> None:
    """Raise unless ``needed`` task slots are free now.

    Raises:
        RuntimeError: naming ``what`` needs them, how many are free and how many there are.
    """
    free, total = free_slots(sc)
    if needed > free:
        msg = (
            f"{what} needs {needed} free task slots at once (a barrier stage), but the cluster "
            f"has {free} free of {total}: lower partitions=, or give the application more "
            "cores (local[N], spark.executor.cores, spark.executor.instances)"
        )
        raise RuntimeError(msg)


def task_host(environ: Mapping[str, str] | None = None) -> str:
    """The address a task binds and publishes to its peers: ``SPARK_LOCAL_IP`` when Spark
    runs with one (every Spark process then uses it), else this host's name resolved."""
    env = os.environ if environ is None else environ
    host = env.get("SPARK_LOCAL_IP")
    if host:
        return host
    return socket.gethostbyname(socket.gethostname())
