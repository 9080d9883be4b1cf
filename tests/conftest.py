"""Shared fixtures: a ``workers`` fixture over 1 and 2 workers, hypothesis profiles, and
``--schedule``: every job of every test delivered through a randomized schedule
(:mod:`tests.schedule`), the interleavings of workers in separate processes; ``--kernels``:
which path bulk integer work takes (:mod:`deltaflow.framework.kernels`), ``always`` to run
the columnar kernels on every test's small inputs, ``never`` for the general path alone."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from tests.schedule import scheduled

from deltaflow.framework import kernels

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--schedule",
        action="store_true",
        help="deliver every job's messages and progress through a randomized schedule",
    )
    parser.addoption(
        "--kernels",
        choices=kernels.MODES,
        default=None,
        help="columnar kernels for integer data: auto (by batch size), always, never "
        f"(default: ${kernels.ENV} or auto)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--kernels`` holds for the whole run, processes the tests start included."""
    chosen = config.getoption("--kernels")
    if chosen is not None:
        kernels.set_mode(chosen)


@pytest.fixture(autouse=True)
def _random_schedule(request: pytest.FixtureRequest) -> Iterator[None]:
    """With ``--schedule``, run the test's jobs through :func:`tests.schedule.scheduled`,
    seeded from the test's id (each job of the test draws its own seed from it)."""
    if not request.config.getoption("--schedule"):
        yield
        return
    with scheduled(zlib.crc32(request.node.nodeid.encode())):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cluster`` run last: their Spark session replaces the local one (a process
    holds one Spark context at a time)."""
    items.sort(key=lambda item: item.get_closest_marker("cluster") is not None)
