"""No import cycles in deltaflow, hidden ones included.

The graph counts every import that runs: at module level and inside functions (a function-level
import is a cycle deferred, not removed), and the package ``__init__`` that importing a
submodule runs first. Imports under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import deltaflow

ROOT = Path(deltaflow.__file__).parent

#: Sub-packages whose modules import every deltaflow module at module level (optional heavy
#: dependencies, such as pyarrow or pyspark, may still be imported where they are needed).
NO_DEFERRED = ("framework", "operators")


def _modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its own name)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _runtime_imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """``(module, deferred)`` for each deltaflow module ``name`` imports when it runs."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    visit_one(stmt, deferred)
                continue
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit_one(child, inner)

    def visit_one(child: ast.AST, deferred: bool) -> None:
        if isinstance(child, ast.Import):
            found.extend((alias.name, deferred) for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                base = ".".join(
                    package[: len(package) - child.level + 1] + ([base] if base else [])
                )
            for alias in child.names:
                sub = f"{base}.{alias.name}"
                found.append((sub if sub in modules else base, deferred))
        visit(child, deferred)

    visit(ast.parse(path.read_text()), False)
    out = []
    for target, deferred in found:
        # Importing a.b.c runs the packages a.b and a first, unless they are being imported.
        parts = target.split(".")
        for i in range(2, len(parts) + 1):
            mod = ".".join(parts[:i])
            if mod in modules and mod != name and not name.startswith(mod + "."):
                out.append((mod, deferred))
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the deltaflow modules it imports when it runs (see the module docstring)."""
    modules = _modules(root)
    return {
        name: {t for t, _ in _runtime_imports(name, path, modules)}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(found)


def deferred_imports(root: Path, packages: tuple[str, ...]) -> list[str]:
    """``module -> target`` for each deltaflow module imported inside a function of
    ``packages``."""
    modules = _modules(root)
    out = []
    for name, path in sorted(modules.items()):
        if name.split(".")[1:2] and name.split(".")[1] in packages:
            out.extend(
                f"{name} -> {t}"
                for t, deferred in _runtime_imports(name, path, modules)
                if deferred
            )
    return out


def test_no_import_cycles() -> None:
    """No set of deltaflow modules imports itself round, at any depth."""
    found = cycles(import_graph(ROOT))
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_framework_and_operators_import_at_module_level() -> None:
    """framework/ and operators/ import deltaflow modules at module level only: the order of
    the layers is what the import lines say."""
    found = deferred_imports(ROOT, NO_DEFERRED)
    assert not found, "\n".join(found)


def map_order(package: Path) -> list[str]:
    """The modules a package's ``__init__`` lists in its module map (``* :mod:`.name` - ...``
    lines), in order, by dotted name."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    base = ".".join(package.relative_to(ROOT.parent).parts)
    return [f"{base}.{m}" for m in re.findall(r"^\* :mod:`\.([\w.]+)`", doc, re.MULTILINE)]


def out_of_order(graph: dict[str, set[str]], order: list[str]) -> list[str]:
    """``module -> target`` for each import of a module listed later in ``order`` (a module
    stands for its sub-modules unless they are listed themselves)."""

    def rank(module: str) -> int | None:
        best = None
        for i, listed in enumerate(order):
            covers = module == listed or module.startswith(listed + ".")
            if covers and (best is None or len(listed) > len(order[best])):
                best = i
        return best

    found = []
    for module, targets in sorted(graph.items()):
        mine = rank(module)
        for target in sorted(targets):
            theirs = rank(target)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{module} -> {target}")
    return found


def test_operators_import_only_what_their_map_lists_before_them() -> None:
    """``operators/__init__``'s module map is the order of the layers inside it."""
    order = map_order(ROOT / "operators")
    assert len(order) > 10
    assert not out_of_order(import_graph(ROOT), order)
    assert out_of_order(import_graph(ROOT), list(reversed(order)))


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A cycle through a function-level import and a package ``__init__`` is found."""
    pkg = tmp_path / "deltaflow"
    (pkg / "operators" / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "operators" / "__init__.py").write_text("")
    (pkg / "operators" / "sub" / "__init__.py").write_text("from .low import f\n")
    (pkg / "operators" / "sub" / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..high import g\n"
        "def f():\n    from .. import high\n"
    )
    (pkg / "operators" / "high.py").write_text("from .sub.low import f\n")
    graph = import_graph(pkg)
    assert cycles(graph) == [
        ["deltaflow.operators.high", "deltaflow.operators.sub", "deltaflow.operators.sub.low"]
    ]
    assert deferred_imports(pkg, ("operators",)) == [
        "deltaflow.operators.sub.low -> deltaflow.operators.high"
    ]
    (pkg / "operators" / "sub" / "low.py").write_text("def f():\n    pass\n")
    assert cycles(import_graph(pkg)) == []
