"""deltaflow operators."""
