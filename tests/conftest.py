"""Shared fixtures: a ``workers`` fixture over 1 and 2 workers, and hypothesis profiles."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=[1, 2], ids=["1worker", "2workers"])
def workers(request: pytest.FixtureRequest) -> int:
    """Run the test once on one worker and once on two (exchange and progress sharing)."""
    return int(request.param)
