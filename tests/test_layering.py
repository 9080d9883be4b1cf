"""The four layers import only downward: framework < operators < scheduler < adapters."""

from __future__ import annotations

import ast
from pathlib import Path

import deltaflow

ROOT = Path(deltaflow.__file__).parent
ORDER = ["framework", "operators", "scheduler", "adapters"]


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{alias.name}" for alias in node.names)
    return out


def test_layers_import_only_downward() -> None:
    """No module imports a layer above its own, and framework never imports trio."""
    violations = []
    for layer_index, layer in enumerate(ORDER):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for mod in _imports(path):
                parts = mod.split(".")
                if layer == "framework" and parts[0] == "trio":
                    violations.append(f"{path.name}: imports trio")
                if parts[0] != "deltaflow" or len(parts) < 2 or parts[1] not in ORDER:
                    continue
                if ORDER.index(parts[1]) > layer_index:
                    violations.append(f"{layer}/{path.relative_to(ROOT / layer)} imports {mod}")
    assert not violations, "\n".join(violations)


def test_layering_check_can_fail(tmp_path: Path) -> None:
    """The import scan sees relative imports that climb a layer."""
    fake = ROOT / "framework" / "lattice.py"
    assert "deltaflow.framework.antichain" not in _imports(fake)
    antichain = _imports(ROOT / "framework" / "antichain.py")
    assert any(m.startswith("deltaflow.framework") for m in antichain)
