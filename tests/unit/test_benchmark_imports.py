"""Every name the benchmarks and examples import from emery exists: a benchmark is run by
hand, rarely, so a renamed or moved name would otherwise be found only by whoever runs it
next."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("benchmarks", "examples")


def emery_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) for each ``from emery... import name`` in the folders."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.ImportFrom)
                    and (node.module or "").split(".")[0] == "emery"
                ):
                    for alias in node.names:
                        found.append((str(path.relative_to(ROOT)), str(node.module), alias.name))
    return found


def missing(module_name: str, name: str) -> bool:
    module = importlib.import_module(module_name)
    if hasattr(module, name):
        return False
    try:
        importlib.import_module(f"{module_name}.{name}")
    except ImportError:
        return True
    return False


@pytest.mark.timeout(60)
def test_every_emery_name_a_benchmark_or_example_imports_exists() -> None:
    imports = emery_imports()
    assert len(imports) > 100  # the scan sees the benchmarks
    absent = [f"{path}: {module}.{name}" for path, module, name in imports if missing(module, name)]
    assert absent == []
