"""Where deltaflow connects to other systems: :mod:`deltaflow.adapters.spark` runs pipelines
on Spark (imported on its own, as it imports pyspark)."""
