"""Code nodes: compile a node's source once and call its function with named values."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from emery.systems.graph.spec import CodeNode


class CodeError(ValueError):
    """A code node's source could not be compiled or its function failed."""


def compile_node(node: CodeNode) -> Callable[..., Any]:
    """The function ``node.source`` defines (compiled and executed once, in a fresh
    namespace)."""
    parameters = node.parameters()
    namespace: dict[str, Any] = {"__name__": f"emery_graph_{node.name}"}
    try:
        exec(compile(node.source, f"<code node {node.name}>", "exec"), namespace)
    except Exception as exc:
        raise CodeError(
            f"code node {node.name!r}: the source failed to load: {type(exc).__name__}: {exc}"
        ) from None
    name = node.function or _only_function(namespace, parameters)
    function = namespace.get(name)
    if not callable(function):
        raise CodeError(f"code node {node.name!r}: {name!r} is not a function")
    found: Callable[..., Any] = function
    return found


def _only_function(namespace: Mapping[str, Any], parameters: list[str]) -> str:
    """The name of the one function defined with ``parameters``."""
    for name, value in namespace.items():
        if inspect.isfunction(value) and list(inspect.signature(value).parameters) == parameters:
            return name
    return ""


async def call_node(function: Callable[..., Any], arguments: Mapping[str, Any]) -> Any:
    """Call ``function`` with ``arguments``; a coroutine function is awaited."""
    result = function(**arguments)
    if inspect.isawaitable(result):
        result = await result
    return result
