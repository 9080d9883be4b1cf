"""deltaflow adapters."""
