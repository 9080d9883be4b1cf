"""stable_hash routes equal keys to one worker, in every process."""

from __future__ import annotations

import enum
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, strategies as st
from tests.jobs import pipeline_of

import deltaflow as df
from deltaflow.framework.hashing import SELF_HASHED_BELOW, stable_hash, worker_of
from deltaflow.framework.lattice import Product


class Color(enum.IntEnum):
    RED = 3


class Name(str, enum.Enum):
    CAT = "cat"


def _same_number(n: int) -> list[Any]:
    return [n, float(n), Fraction(n), Decimal(n), np.int64(n), np.float64(n)]


@given(st.integers(-(2**53), 2**53))
def test_equal_numbers_of_any_type_hash_alike(n: int) -> None:
    """1, 1.0, Fraction(1), Decimal(1) and numpy scalars are one key (as in a dict)."""
    forms = _same_number(n)  # every int in this range is exactly a float
    assert len({stable_hash(v) for v in forms}) == 1
    assert len({worker_of(v, 3) for v in forms}) == 1
    assert len({stable_hash((v, "a")) for v in forms}) == 1


def test_equal_values_of_other_kinds_hash_alike() -> None:
    """Bools and int enums as their ints, str enums as their strings, named tuples and
    Products as their tuples; a big int as the float it equals."""
    assert stable_hash(True) == stable_hash(1) and stable_hash(False) == stable_hash(0)
    assert stable_hash(Color.RED) == stable_hash(3)
    assert stable_hash(Name.CAT) == stable_hash("cat")
    assert stable_hash(Product(1, 2)) == stable_hash((1, 2))
    assert worker_of(2**62, 3) == worker_of(float(2**62), 3)
    assert worker_of(-1, 2) == worker_of(-1.0, 2)
    assert stable_hash(frozenset([1, 2])) == stable_hash(frozenset([2.0, 1.0]))


def test_small_ints_are_their_own_hash() -> None:
    """What the exchange's inlined routing relies on."""
    for k in (0, 1, 12345, SELF_HASHED_BELOW - 1):
        assert stable_hash(k) == k
    assert stable_hash(SELF_HASHED_BELOW) != SELF_HASHED_BELOW


def test_the_hash_is_the_same_in_another_process() -> None:
    """No salt: strings, bytes, None, floats and tuples hash alike under any hash seed."""
    values = "['cat', b'dog', None, 1.5, -1, ('cat', None, 2.5), frozenset({'a', 'b'})]"
    code = (
        "from deltaflow.framework.hashing import stable_hash; "
        f"print([stable_hash(v) for v in {values}])"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "random")
    }
    assert len(outs) == 1


@pytest.mark.parametrize(("left", "right"), [(-1, -1.0), (3, np.int64(3)), (Color.RED, 3)])
def test_equal_keys_meet_on_any_worker_count(left: Any, right: Any, workers: int) -> None:
    """A join and a consolidate see equal keys of different types as one key."""
    joined = df.run(
        pipeline_of(lambda a, b: a.join(b)),
        workers=workers,
        a=[((left, "x"), 0, 1)],
        b=[((right, "y"), 0, 1)],
    )
    assert [(d[1], t, r) for d, t, r in joined] == [(("x", "y"), 0, 1)]
    cancelled = df.run(
        pipeline_of(lambda a: a.consolidate()), workers=workers, a=[(left, 0, 1), (right, 0, -1)]
    )
    assert cancelled == []
