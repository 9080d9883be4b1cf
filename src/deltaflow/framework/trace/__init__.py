"""deltaflow framework/trace."""
