"""emery's packages import only downwards (``emery.core.layers``), form no loop, hold no
import circle between their modules, and a long module says why it is long."""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import emery
from emery.core.layers import LAYERS, LONG_MODULE_LINES

SRC = Path(emery.__file__).parent

# one xdist process parses src/emery for all the checks (``parsed`` is cached per process)
pytestmark = pytest.mark.xdist_group("layers")


def package_of(path: Path) -> str:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imported_modules(tree: ast.AST) -> Iterator[tuple[str, list[str], int]]:
    """(imported ``emery.…`` module, the names taken from it, line) for each runtime import:
    ``import``, ``from … import`` and ``importlib.import_module("emery.…")``; imports under
    ``if TYPE_CHECKING:`` skipped."""
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(inner) for branch in node.body for inner in ast.walk(branch))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        found: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = [(node.module, [alias.name for alias in node.names])]
        elif isinstance(node, ast.Import):
            found = [(alias.name, []) for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found = [(node.args[0].value, [])]
        for module, names in found:
            if module.startswith("emery."):
                yield module, names, node.lineno


def emery_imports(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported emery package, line) for each runtime import."""
    for module, _, line in imported_modules(tree):
        yield module.split(".")[1], line


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """Module → the modules of its own package it imports (``from a import b`` counts
    ``a.b`` when that is a module)."""
    paths = modules()
    known = {module_name(path) for path in paths}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        here = module_name(path)
        for module, names, _ in runtime_imports(path):
            targets = [f"{module}.{name}" for name in names if f"{module}.{name}" in known]
            for target in targets or [module]:
                if (
                    target in known
                    and target != here
                    and package_of_module(target) == (package_of_module(here))
                ):
                    edges[here].add(target)
    return edges


def package_of_module(name: str) -> str:
    return name.split(".")[1] if "." in name else name


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@functools.cache
def parsed(path: Path) -> tuple[str, ast.Module]:
    """A module's text and syntax tree, read once per test process (every check reads all
    of ``src/emery``)."""
    text = path.read_text()
    return text, ast.parse(text, str(path))


@functools.cache
def runtime_imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``imported_modules`` of a module of ``src/emery``, found once per test process."""
    return list(imported_modules(parsed(path)[1]))


@functools.cache
def package_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Package → the packages it imports, and every upward import found."""
    edges: dict[str, set[str]] = defaultdict(set)
    upward = []
    for path in modules():
        package = package_of(path)
        for module, _, line in runtime_imports(path):
            imported = module.split(".")[1]  # as emery_imports gives it
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


def test_no_import_circle_inside_a_package() -> None:
    found = [cycle for cycle in loops(module_graph()) if len(cycle) > 2]
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_check_sees_from_imports_of_modules() -> None:
    tree = ast.parse(
        "from emery.jobs import engine\nfrom emery.reports.job_result import JobResult\n"
    )
    assert [(m, n) for m, n, _ in imported_modules(tree)] == [
        ("emery.jobs", ["engine"]),
        ("emery.reports.job_result", ["JobResult"]),
    ]
    assert "emery.jobs.kinds" in module_graph().get("emery.jobs.manage", set())


def test_a_long_module_says_why() -> None:
    unexplained = []
    for path in modules():
        text, tree = parsed(path)
        docstring = ast.get_docstring(tree) or ""
        if text.count("\n") > LONG_MODULE_LINES and "why this is long" not in docstring.lower():
            unexplained.append(f"{path.relative_to(SRC.parent)} ({text.count(chr(10))} lines)")
    assert not unexplained, (
        f"modules over {LONG_MODULE_LINES} lines whose docstring does not say why this is long "
        f"(a long module is often two concepts): {unexplained}"
    )


def test_the_architecture_page_shows_the_layer_table() -> None:
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    shown = {
        ("__init__" if name == "emery" else name): int(rank)
        for rank, name in re.findall(r"^\| (\d+) \| `(\w+)`", page, flags=re.MULTILINE)
    }
    expected = {name: rank for name, rank in LAYERS.items() if name != "__main__"}
    assert shown == expected, "docs/architecture.md's package table differs from LAYERS"


def test_the_executors_live_in_workers_above_evaluation() -> None:
    """``evaluation`` keeps scoring and the ``Executor`` protocol with its in-process
    default; the executors that run rollouts elsewhere live in ``workers``."""
    assert LAYERS["workers"] > LAYERS["evaluation"]
    found: dict[str, list[str]] = {}
    for path in (SRC / "evaluation").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Executor"):
                found.setdefault(node.name, []).append(path.name)
    assert found == {"Executor": ["executor.py"], "LocalExecutor": ["executor.py"]}
    workers = {path.stem for path in (SRC / "workers").glob("*.py")}
    assert {"queue_executor", "ray_executor", "ray_dispatch", "ray_worker"} <= workers
