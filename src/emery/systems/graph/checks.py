"""Structural checks of a graph spec that need no node classes: node kinds, code node
sources, cycles and dependency order. Each failure is a one-line ``ValueError``."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

NODE_KINDS = ("code", "llm", "map", "output")


def known_kinds(data: Any) -> Any:
    """``data`` with each node's ``kind`` defaulted to ``llm``, after checking it is known."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return data
    nodes = []
    for index, node in enumerate(data["nodes"]):
        if isinstance(node, dict):
            node = {"kind": "llm", **node}
            if node["kind"] not in NODE_KINDS:
                label = node.get("name", f"#{index}")
                raise ValueError(
                    f"node {label!r}: unknown kind {node['kind']!r};"
                    f" known kinds: {', '.join(NODE_KINDS)}"
                )
        nodes.append(node)
    return {**data, "nodes": nodes}


def code_function(
    node: str, source: str, function: str | None
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The definition of the function a code node's ``source`` defines, read from its
    syntax tree (nothing is executed).

    ``function`` names it; unset, the source must define exactly one top-level function.
    Only plain positional-or-keyword parameters are allowed (they are bound by name).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(
            f"code node {node!r}: syntax error on line {exc.lineno}: {exc.msg}"
        ) from None
    functions = {
        item.name: item
        for item in tree.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if function is not None:
        if function not in functions:
            raise ValueError(f"code node {node!r}: the source defines no function {function!r}")
        chosen = functions[function]
    elif len(functions) == 1:
        chosen = next(iter(functions.values()))
    else:
        found = ", ".join(sorted(functions)) or "none"
        raise ValueError(
            f"code node {node!r}: the source must define one function or set 'function'"
            f" (defines: {found})"
        )
    args = chosen.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise ValueError(
            f"code node {node!r}: function {chosen.name!r} may only take named parameters"
        )
    return chosen


def code_parameters(node: str, source: str, function: str | None) -> list[str]:
    """The parameter names of the function a code node's ``source`` defines."""
    return [arg.arg for arg in code_function(node, source, function).args.args]


def check_code(node: str, source: str, function: str | None) -> None:
    """Raise ValueError unless ``source`` compiles and defines the node's function.

    The module is compiled, never executed: its top-level code runs only in a process
    process when the node is first called (``emery.systems.graph.code``)."""
    code_function(node, source, function)
    try:
        compile(source, f"<code node {node}>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ValueError(
            f"code node {node!r}: syntax error on line {exc.lineno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"code node {node!r}: the source does not compile: {exc}") from None


def find_cycle(order: Sequence[str], deps: Mapping[str, set[str]]) -> list[str] | None:
    """A dependency cycle as a path that returns to its start (``a, b, a``), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dep in sorted(deps.get(name, set())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[name] = 2
        return None

    for name in order:
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def check_acyclic(order: Sequence[str], deps: Mapping[str, set[str]], where: str = "") -> None:
    """Raise ValueError naming the cycle when ``deps`` has one."""
    cycle = find_cycle(order, deps)
    if cycle is not None:
        raise ValueError(f"{where}the graph has a cycle: {' -> '.join(cycle)}")


def topological(order: Sequence[str], deps: Mapping[str, set[str]]) -> list[str]:
    """``order`` rearranged so each name follows its dependencies (stable; no cycles)."""
    done: set[str] = set()
    out: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for dep in order:
            if dep in deps.get(name, set()):
                visit(dep)
        out.append(name)

    for name in order:
        visit(name)
    return out
