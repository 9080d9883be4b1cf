"""Where a :func:`~deltaflow.adapters.spark.stream` keeps its workers' state: under the
query's checkpoint location, resolved as Spark resolves it, locked for one query at a time.

    state, manifest, code = open_state(pipeline, qualified(spark, "ckpt/words"), 2, False)
    state.store.location   # ".../ckpt/words/deltaflow"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...operators.pipeline import Pipeline
from ...scheduler.checkpoint import Checkpointer
from ...scheduler.local.plan import make_plan
from ...scheduler.state_layout import check_code, check_pipeline, state_layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["STATE_FOLDER", "open_state", "qualified", "state_location"]

#: Where, under a stream's checkpoint location, its workers' state is kept.
STATE_FOLDER = "deltaflow"


def state_location(checkpoint_location: str) -> str:
    """Where the workers' checkpoints of a stream with ``checkpoint_location`` (qualified:
    :func:`qualified`) are kept.

    >>> state_location("s3://bucket/queries/words/")
    's3://bucket/queries/words/deltaflow'
    """
    return f"{checkpoint_location.rstrip('/')}/{STATE_FOLDER}"


def qualified(spark: SparkSession, location: str) -> str:
    """``location`` as Spark resolves a checkpoint location: against its default filesystem
    and the driver's working directory. A local one becomes an absolute path (the workers,
    in the executors' own directories, reach the same place), another a full URI
    (``hdfs://namenode:8020/...`` where HDFS is the default).
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = path.getFileSystem(conf).makeQualified(path).toUri()
    if uri.getScheme() == "file":
        return str(uri.getPath())
    return str(uri.toString())


def open_state(
    pipeline: Pipeline, checkpoint_location: str, workers: int, allow_code_change: bool
) -> tuple[Checkpointer, dict[str, Any] | None, dict[str, Any]]:
    """The checkpointer of a stream's workers' state under ``checkpoint_location``, locked
    for this query (until :meth:`SparkStream.stop`), the manifest of the checkpoint there
    (``None``: none), checked to be ``pipeline``'s and made by its code, and what the
    manifests say of that code.

    Raises:
        ValueError: the location holds a checkpoint of another pipeline, or of other code
            (without ``allow_code_change``), naming it.
        CheckpointError: another query (or job) holds the location, or the checkpoint there
            cannot be read.
    """
    state = Checkpointer(state_location(checkpoint_location), "driver")
    state.lock()
    try:
        manifest = state.store.latest()
        builder = pipeline.instantiate(workers, exchange_outputs=True)
        layout = state_layout(builder, make_plan(builder.spec, workers=workers))
        if manifest is not None:
            where = state.store.describe()
            check_pipeline(manifest, layout, where, type(pipeline).__name__)
            check_code(manifest, layout, where, allow=allow_code_change)
    except BaseException:
        state.unlock()
        raise
    return state, manifest, layout.code_entry()
