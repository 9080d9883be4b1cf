"""Shipping a pipeline to Spark's executors: the user's own modules by value, installed ones
by name, and a clear error where a module cannot be imported. No Spark job here: an
interpreter that lacks the user's modules stands in for an executor."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import deltaflow as df

pytest.importorskip("pyspark")
from deltaflow.adapters.spark._ship import installed, ship, unship


@pytest.fixture
def user_modules(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    """A pipeline module and a helper module beside it, importable here only."""
    (tmp_path / "shipping_helpers.py").write_text(
        "LIMIT = 10\n\ndef small(x):\n    return x < LIMIT\n"
    )
    (tmp_path / "shipping_pipes.py").write_text(
        "import deltaflow as df\nimport shipping_helpers\n\n"
        "class Small(df.Pipeline):\n    def build(self, xs):\n"
        "        return xs.filter(shipping_helpers.small).map(lambda x: (x % 2, x)).count()\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import shipping_pipes  # type: ignore[import-not-found]

        yield tmp_path, shipping_pipes
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("shipping_pipes", "shipping_helpers"):
            sys.modules.pop(name, None)


def in_fresh_interpreter(code: str, cwd: Path) -> str:
    """Run ``code`` in a new interpreter whose path lacks the user's modules."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_user_modules_travel_by_value(
    user_modules: tuple[Path, ModuleType], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A pipeline from a module beside the script, which uses another module beside it (a
    module object, not just a function), unpickles where neither is importable and computes
    what it computes here."""
    _, pipes = user_modules
    shipment = ship(pipes.Small())
    assert shipment.by_value == ("shipping_helpers", "shipping_pipes")
    assert "deltaflow.operators.pipeline" in shipment.by_reference  # where df.Pipeline lives
    assert not any(m.startswith("shipping_") for m in shipment.by_reference)
    xs = [(x, x % 3, 1) for x in range(20)]
    blob = tmp_path_factory.mktemp("elsewhere") / "pipeline.pickle"
    blob.write_bytes(shipment.blob)
    code = (
        "import sys, deltaflow as df\n"
        "from deltaflow.adapters.spark._ship import unship\n"
        f"pipeline = unship(open({str(blob)!r}, 'rb').read())\n"
        "assert 'shipping_pipes' not in sys.modules\n"
        f"print(df.run(pipeline, xs={xs!r}))\n"
    )
    assert in_fresh_interpreter(code, blob.parent) == f"{df.run(pipes.Small(), xs=xs)}\n"


def test_shipping_leaves_cloudpickle_as_it_was(user_modules: tuple[Path, ModuleType]) -> None:
    """The user's modules go by value for the pipeline's pickle only."""
    import cloudpickle

    _, pipes = user_modules
    before = cloudpickle.list_registry_pickle_by_value()
    ship(pipes.Small())
    assert cloudpickle.list_registry_pickle_by_value() == before


def test_installed_and_own_modules(user_modules: tuple[Path, ModuleType]) -> None:
    """The standard library, site-packages and deltaflow are installed; the user's modules
    and this test module are not."""
    assert installed("json") and installed("numpy.linalg") and installed("deltaflow.graphs")
    assert installed("pyspark.sql") and installed("sys")
    assert not installed("shipping_pipes") and not installed("shipping_helpers")
    assert not installed(__name__)


def test_a_module_missing_where_it_is_unpickled_is_named(
    user_modules: tuple[Path, ModuleType],
) -> None:
    """A pipeline pickled with a module by name, where that module is missing, fails to
    unpickle with a ModuleNotFoundError naming the module and the fix."""
    _, pipes = user_modules
    blob = pickle.dumps(pipes.Small())
    sys.modules.pop("shipping_pipes")
    sys.path.pop(0)
    try:
        with pytest.raises(
            ModuleNotFoundError, match="cannot import module 'shipping_pipes'"
        ) as info:
            unship(blob)
    finally:
        sys.path.insert(0, str(user_modules[0]))
    assert info.value.name == "shipping_pipes"
    assert "PYSPARK_PYTHON" in str(info.value) and "addPyFile" in str(info.value)


def test_what_does_not_pickle_is_a_clear_error(user_modules: tuple[Path, ModuleType]) -> None:
    """A module shipped by value carries its globals: one that does not pickle is a TypeError
    naming the modules sent by value."""
    import threading

    _, pipes = user_modules
    sys.modules["shipping_helpers"].LOCK = threading.Lock()
    with pytest.raises(TypeError, match=r"modules sent by value: \['shipping_pipes'"):
        ship(pipes.Small())


def test_a_helper_named_like_a_stdlib_module_travels_by_value(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A helper ``pipes.py`` beside the script (the standard library had a ``pipes``) is the
    user's own, judged by where it lives: it travels by value and the pipeline computes the
    same where only the standard library's ``pipes`` could be imported."""
    (tmp_path / "pipes.py").write_text("def small(x):\n    return x < 10\n")
    (tmp_path / "stdlib_named_pipes.py").write_text(
        "import deltaflow as df\nimport pipes\n\n"
        "class Small(df.Pipeline):\n    def build(self, xs):\n"
        "        return xs.filter(pipes.small).map(lambda x: (x % 2, x)).count()\n"
    )
    saved = sys.modules.pop("pipes", None)
    sys.path.insert(0, str(tmp_path))
    try:
        import stdlib_named_pipes  # type: ignore[import-not-found]

        assert not installed("pipes")
        shipment = ship(stdlib_named_pipes.Small())
        assert "pipes" in shipment.by_value and "pipes" not in shipment.by_reference
        xs = [(x, x % 3, 1) for x in range(20)]
        want = df.run(stdlib_named_pipes.Small(), xs=xs)
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("pipes", "stdlib_named_pipes"):
            sys.modules.pop(name, None)
        if saved is not None:
            sys.modules["pipes"] = saved
    blob = tmp_path_factory.mktemp("elsewhere") / "pipeline.pickle"
    blob.write_bytes(shipment.blob)
    code = (
        "import warnings, deltaflow as df\n"
        "warnings.simplefilter('ignore')\n"
        "from deltaflow.adapters.spark._ship import unship\n"
        f"pipeline = unship(open({str(blob)!r}, 'rb').read())\n"
        f"print(df.run(pipeline, xs={xs!r}))\n"
    )
    assert in_fresh_interpreter(code, blob.parent) == f"{want}\n"
