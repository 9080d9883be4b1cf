"""``df.run`` over a source with the workers in two processes: a files source and an
iterable source give what one process gives, and what the from-scratch recompute says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.reference import assert_matches_oracle
from tests.scheduler.visits import (
    FILES,
    PAGES,
    USERS,
    TypedVisitors,
    Visitors,
    batches_as_collection,
    updates_of,
    visitors,
    write,
)

import deltaflow as df


@settings(max_examples=3, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=FILES, typed=st.booleans())
def test_files_source_on_two_processes(
    files: list[Any], typed: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every file one time: two processes of one worker each and of two give the output of
    one process, which is the recompute's."""
    folder = tmp_path_factory.mktemp("in")
    for i, (rows, fmt) in enumerate(files):
        write(folder, i, rows, fmt).touch()  # oldest first: the files' order
    pipe = TypedVisitors() if typed else Visitors()
    one = df.run(pipe, workers=2, clicks=df.sources.files(folder, max_files=1))
    assert_matches_oracle(one, {"clicks": updates_of(files)}, visitors)
    for workers in (2, 4):
        two = df.run(
            pipe, workers=workers, processes=2, clicks=df.sources.files(folder, max_files=1)
        )
        assert two == one


@settings(max_examples=3)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.tuples(USERS, PAGES), st.sampled_from([1, -1]))), max_size=5
    ).map(batches_as_collection),
)
def test_iterable_source_on_two_processes(batches: list[Any]) -> None:
    """Each batch one time, on two processes as on one."""
    source = lambda: df.sources.iterable(batches, updates=True)  # noqa: E731
    one = df.run(Visitors(), workers=2, clicks=source())
    fed = [(d, i, r) for i, batch in enumerate(batches) for d, r in batch]
    assert_matches_oracle(one, {"clicks": fed}, visitors)
    assert df.run(Visitors(), workers=2, processes=2, clicks=source()) == one
