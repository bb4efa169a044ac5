"""Collection for the whole suite: the order of the tests, and the modules ``make check``
need not import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NOT_SLOW = "not slow"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that must share one pytest-xdist worker (``xdist_group``: the Ray tests, about
    three minutes together) come first, so that worker starts them at once instead of
    running them alone at the end while the other worker waits."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` (``make check``) a module marked slow as a whole
    (``pytestmark``) is not imported: each of its tests would be deselected anyway, and
    importing it costs each xdist worker its imports (Ray, MLflow, schemathesis)."""
    if " ".join(str(config.option.markexpr).split()) != NOT_SLOW:
        return None
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if module_marked_slow(collection_path) else None


def module_marked_slow(path: Path) -> bool:
    """Whether the module's top-level ``pytestmark`` (one mark or a list) holds
    ``pytest.mark.slow``; read from its source, without importing it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            value = node.value
            marks = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            return any(ast.unparse(mark) == "pytest.mark.slow" for mark in marks)
    return False
