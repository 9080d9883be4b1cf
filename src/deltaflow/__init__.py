"""deltaflow: differential dataflow for Python."""
