"""emery's packages import only downwards (``emery.core.layers``), form no loop, and keep
their modules short."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import emery
from emery.core.layers import LAYERS, MAX_MODULE_LINES

SRC = Path(emery.__file__).parent


def package_of(path: Path) -> str:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def emery_imports(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported emery package, line) for each runtime import: ``import``, ``from … import``
    and ``importlib.import_module("emery.…")``; imports under ``if TYPE_CHECKING:`` skipped."""
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(inner) for branch in node.body for inner in ast.walk(branch))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        for name in names:
            parts = name.split(".")
            if parts[0] == "emery" and len(parts) > 1:
                yield parts[1], node.lineno


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def package_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Package → the packages it imports, and every upward import found."""
    edges: dict[str, set[str]] = defaultdict(set)
    upward = []
    for path in modules():
        package = package_of(path)
        for imported, line in emery_imports(ast.parse(path.read_text(), str(path))):
            if imported == package:
                continue
            edges[package].add(imported)
            if LAYERS.get(imported, 99) > LAYERS.get(package, 99):
                upward.append(
                    f"{path.relative_to(SRC.parent)}:{line}: {package} (rank "
                    f"{LAYERS.get(package)}) imports emery.{imported} (rank "
                    f"{LAYERS.get(imported)})"
                )
    return edges, upward


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every package loop, each once."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                cycle = [*path[path.index(nxt) :], nxt]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    found.append(cycle)
            else:
                visit(nxt, [*path, nxt])

    for start in sorted(edges):
        visit(start, [start])
    return found


def test_every_package_has_a_layer() -> None:
    packages = {package_of(path) for path in modules()}
    assert packages <= set(LAYERS), f"packages without a layer: {packages - set(LAYERS)}"


def test_no_module_imports_upwards() -> None:
    _, upward = package_graph()
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_package_loop() -> None:
    edges, _ = package_graph()
    found = loops(edges)
    assert not found, "package loops:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_check_sees_every_kind_of_import() -> None:
    source = (
        "import emery.jobs\n"
        "from emery.server import app\n"
        "import importlib\n"
        "importlib.import_module('emery.cli.app')\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from emery.taskapp import serve\n"
    )
    assert list(emery_imports(ast.parse(source))) == [("jobs", 1), ("server", 2), ("cli", 4)]
    assert loops({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_module_is_longer_than_the_limit() -> None:
    lines = {str(path.relative_to(SRC.parent)): path.read_text().count("\n") for path in modules()}
    long = {name: count for name, count in lines.items() if count > MAX_MODULE_LINES}
    assert not long, (
        f"modules over {MAX_MODULE_LINES} lines (a long module is two concepts: split it): {long}"
    )
