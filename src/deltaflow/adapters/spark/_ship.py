"""The pipeline's way to the executors: by value where they could not import it.

Spark pickles a job's functions with cloudpickle, which sends a class or a function *by
reference* (its module and name) whenever the driver can import its module; the executor then
imports that module. The user's own modules - the script's neighbours, a test module, any
module that is not an installed package - are importable on the driver only, and the job
would fail on the executors with a ``ModuleNotFoundError`` deep in Spark's error.

So the adapter pickles the pipeline itself (:func:`ship`), with every module it refers to
that is not installed on the driver sent *by value* (cloudpickle's
``register_pickle_by_value``, for that pickle only), and the task unpickles it
(:func:`unship`). What it still refers to by reference are installed packages: deltaflow,
numpy, the user's dependencies. Those must be installed on the executors too;
:func:`require_importable` checks with one small Spark job (once per application and set of
modules) that the executors import them, before a barrier job would fail on them, and names
the module and the fix when they do not.

    >>> import json
    >>> shipment = ship(json.loads)
    >>> shipment.by_value, "json" in shipment.by_reference
    ((), True)
    >>> unship(shipment.blob) is json.loads
    True
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import pickle
import site
import sys
import sysconfig
import threading
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import cloudpickle  # type: ignore[import-untyped]
from cloudpickle import cloudpickle as _internals

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["Shipment", "installed", "require_importable", "ship", "unship"]

#: The package the executors' Python must have whatever the pipeline (the tasks run it), and
#: which is never sent by value, even from a source checkout.
RUNTIME = "deltaflow"

#: How to make a module importable on the executors (ends every error about one).
FIX = (
    "install it in the executors' Python (the interpreter of spark.pyspark.python or "
    "PYSPARK_PYTHON), or ship it with spark.sparkContext.addPyFile() or spark-submit "
    "--py-files; modules that are not installed on the driver travel with the pipeline by "
    "themselves"
)

_lock = threading.Lock()


@attrs.frozen
class Shipment:
    """A pickled pipeline: ``blob`` (for :func:`unship`), the modules it carries by value
    and the modules it refers to by reference (which the executors must import)."""

    blob: bytes
    by_value: tuple[str, ...]
    by_reference: tuple[str, ...]


@functools.cache
def _install_dirs() -> tuple[Path, ...]:
    """Where installed modules live: the standard library and every site-packages."""
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(site.getsitepackages())
    dirs.add(site.getusersitepackages())
    return tuple(Path(d).resolve() for d in dirs if d)


@functools.cache
def _distributed() -> frozenset[str]:
    """Top-level modules that belong to an installed distribution."""
    return frozenset(importlib.metadata.packages_distributions())


def installed(name: str) -> bool:
    """Whether module ``name`` is an installed one (the standard library, a package in a
    site-packages, deltaflow and what its tasks run): one the executors must have installed,
    rather than one of the user's own, which :func:`ship` sends by value.

    A module that is loaded is judged by where it lives, not by its name: a ``pipes.py``
    beside the user's script is the user's own even though the standard library once had a
    module of that name (and a ``json.py`` there would be too).

    >>> installed("json"), installed("deltaflow.graphs"), installed("numpy")
    (True, True, True)
    """
    top = name.partition(".")[0]
    if top == RUNTIME:
        return True
    module = sys.modules.get(top)
    places = list(getattr(module, "__path__", None) or [])
    file = getattr(module, "__file__", None)
    if file:
        places.append(file)
    if places:
        roots = _install_dirs()
        return all(any(Path(p).resolve().is_relative_to(r) for r in roots) for p in places)
    # Not loaded, or built into the interpreter: its name is all there is to go by.
    return (
        module is not None
        or top in sys.stdlib_module_names
        or top in sys.builtin_module_names
        or top in _distributed()
    )


class _Finder(cloudpickle.Pickler):  # type: ignore[misc]
    """A cloudpickle pickler that notes the modules of everything it pickles by reference."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.modules: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        if obj.__class__ is types.CodeType:
            # Code sent by value keeps its file name: an executor's traceback then names
            # the user's file and line, not cloudpickle's "<dynamic-code>".
            return _code_with_filename(obj)
        module = _referenced_module(obj)
        if module is not None:
            self.modules.add(module)
        return super().reducer_override(obj)


def _code_with_filename(code: types.CodeType) -> Any:
    """cloudpickle's reduction of a code object, with the code's own file name."""
    make, args = _internals._code_reduce(code)
    return make, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)


def _referenced_module(obj: Any) -> str | None:
    """The module by whose name cloudpickle pickles ``obj``, if it pickles it by reference."""
    if not isinstance(obj, (types.ModuleType, type, types.FunctionType)):
        return None
    if not _internals._should_pickle_by_reference(obj):
        return None
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    found = _internals._lookup_module_and_qualname(obj)
    return None if found is None else str(found[0].__name__)


def ship(obj: Any) -> Shipment:
    """Pickle ``obj`` (a pipeline) for the executors: every module it refers to that is not
    :func:`installed` goes by value (and the modules those refer to, and so on).

    Raises:
        TypeError: ``obj`` does not pickle (naming the modules sent by value, which might be
            why: a module's globals travel with it).
    """
    with _lock:
        added: list[types.ModuleType] = []
        try:
            while True:
                buffer = io.BytesIO()
                finder = _Finder(buffer)
                try:
                    finder.dump(obj)
                except Exception as exc:
                    shipped = [m.__name__ for m in added]
                    msg = (
                        f"cannot pickle {obj!r} for the Spark executors ({exc}); modules sent "
                        f"by value: {shipped or 'none'} (install those on the executors "
                        "instead, and they travel by name)"
                    )
                    raise TypeError(msg) from exc
                local = sorted(m for m in finder.modules if not installed(m))
                if not local:
                    return Shipment(
                        buffer.getvalue(),
                        tuple(sorted(m.__name__ for m in added)),
                        tuple(sorted(finder.modules)),
                    )
                for name in local:
                    module = sys.modules[name]
                    if module in added:  # pragma: no cover - registered modules go by value
                        msg = f"module {name!r} is still pickled by reference"
                        raise RuntimeError(msg)
                    cloudpickle.register_pickle_by_value(module)
                    added.append(module)
        finally:
            for module in added:
                cloudpickle.unregister_pickle_by_value(module)


def unship(blob: bytes) -> Any:
    """The object :func:`ship` pickled (in a task, on an executor).

    Raises:
        ModuleNotFoundError: a module it refers to is not importable here, naming it and
            the fix.
    """
    try:
        return pickle.loads(blob)
    except ImportError as exc:
        name = exc.name or "?"
        msg = f"the Spark executor cannot import module {name!r} ({exc}): {FIX}"
        raise ModuleNotFoundError(msg, name=name) from exc


_importable: set[tuple[str, str, frozenset[str]]] = set()


def require_importable(sc: SparkContext, modules: Iterable[str], what: str) -> None:
    """Check with one small Spark job that the executors import ``modules`` (the standard
    library's aside); once per application, interpreter and set of modules.

    Raises:
        ModuleNotFoundError: naming each module the executors cannot import, why, ``what``
            needs it, and the fix.
    """
    names = sorted(m for m in modules if m.partition(".")[0] not in sys.stdlib_module_names)
    key = (str(sc.applicationId), str(sc.pythonExec), frozenset(names))
    if not names or key in _importable:
        return

    def probe(_: Iterable[Any]) -> Iterator[tuple[str, str]]:
        import importlib

        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:
                yield name, f"{type(exc).__name__}: {exc}"

    failed = sc.parallelize([0], 1).mapPartitions(probe).collect()
    if failed:
        missing = ", ".join(f"{name!r} ({why})" for name, why in failed)
        msg = f"{what}: the Spark executors cannot import {missing}: {FIX}"
        raise ModuleNotFoundError(msg, name=failed[0][0])
    _importable.add(key)
