"""deltaflow framework."""
