"""deltaflow scheduler."""
