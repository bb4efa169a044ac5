"""Run a graph: each node as soon as the nodes it reads are done, independent nodes
concurrently, one span per node under the rollout, and the first failing node stopping the
graph with an error that names it.

A node's exception becomes a ``NodeError`` naming the node (emery's own errors, such as a
missing model, pass through unchanged: they are the job's faults, not the node's). Its
``failure`` says whether the run raised (``error``: a code node failed, a map was given no
list), an llm node's reply could not be read (``unreadable``, scored as a wrong answer) or
was otherwise unusable (``output``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.util.types import AttributeValue

from emery.core.errors import EmeryError
from emery.core.example_result import ComponentCall
from emery.systems.base import RunFailure
from emery.systems.graph.code import CodeFailure, NodeCaller
from emery.systems.graph.spec import (
    CodeNode,
    Components,
    LLMNode,
    MapNode,
    Node,
    OutputNode,
    check_scope,
    dependencies,
    dependency_order,
    output_node,
)
from emery.tracing.scope import current_scope
from emery.verifiers.base import as_text

NODE_SPAN = "emery.node"
NODE_NAME = "emery.node.name"
NODE_KIND = "emery.node.kind"
MAP_ITEM = "emery.node.item"

LLMCall = Callable[[LLMNode, dict[str, Any], list[ComponentCall]], Awaitable[Any]]
"""Runs one llm node on its local values, appending its calls; raises NodeError."""


class NodeError(Exception):
    """A node failed; the message names it, ``failure`` says how (module docstring)."""

    def __init__(self, node: str, reason: str, failure: RunFailure = "error") -> None:
        super().__init__(f"node {node!r}: {reason}")
        self.node = node
        self.failure: RunFailure = failure


@dataclass
class GraphRuntime:
    """What running one graph under one candidate needs besides the values."""

    components: Components
    llm: LLMCall
    node_caller: NodeCaller

    async def run(
        self, nodes: list[Node], values: Mapping[str, Any], calls: list[ComponentCall]
    ) -> Any:
        """The output of the scope ``nodes`` given the ``values`` it may read; the calls of
        its nodes are appended to ``calls`` in dependency order (also when a node fails)."""
        try:
            check_scope(nodes, self.components)
        except ValueError as exc:
            raise NodeError(output_node(nodes).name, str(exc)) from None
        deps = dependencies(nodes, self.components)
        order = dependency_order(nodes, self.components)
        by_node: dict[str, list[ComponentCall]] = {node.name: [] for node in order}
        tasks: dict[str, asyncio.Task[Any]] = {}

        async def one(node: Node) -> Any:
            got = {name: await tasks[name] for name in sorted(deps[node.name])}
            with node_span(node):
                try:
                    return await self.node(node, {**values, **got}, by_node[node.name])
                except (NodeError, EmeryError):
                    raise
                except Exception as exc:
                    raise NodeError(node.name, f"{type(exc).__name__}: {exc}") from exc

        try:
            async with asyncio.TaskGroup() as group:
                for node in order:
                    tasks[node.name] = group.create_task(one(node))
        except BaseExceptionGroup as group_error:
            raise first_failure(group_error, [node.name for node in order]) from None
        finally:
            for node in order:
                calls.extend(by_node[node.name])
        return tasks[output_node(nodes).name].result()

    async def node(self, node: Node, values: Mapping[str, Any], calls: list[ComponentCall]) -> Any:
        """One node's value (NodeError when it fails)."""
        local = bound_values(node, values, self.components)
        if isinstance(node, LLMNode):
            return await self.llm(node, local, calls)
        if isinstance(node, CodeNode):
            return await self.code(node, local, calls)
        if isinstance(node, MapNode):
            return await self.map(node, values, local[node.over], calls)
        assert isinstance(node, OutputNode)
        return local[node.value]

    async def code(
        self, node: CodeNode, arguments: dict[str, Any], calls: list[ComponentCall]
    ) -> Any:
        call = ComponentCall(component=node.name, inputs=arguments)
        calls.append(call)
        try:
            call.output = await self.node_caller.call(node, arguments)
        except CodeFailure as exc:
            call.error = str(exc)
            raise NodeError(node.name, call.error) from None
        call.reply = as_text(call.output)
        return call.output

    async def map(
        self, node: MapNode, values: Mapping[str, Any], items: Any, calls: list[ComponentCall]
    ) -> list[Any]:
        if not isinstance(items, list | tuple):
            kind = type(items).__name__
            raise NodeError(node.name, f"'over' ({node.over}) must be a list, not a {kind}")
        per_item: list[list[ComponentCall]] = [[] for _ in items]

        async def one(index: int, item: Any) -> Any:
            with item_span(node, index):
                return await self.run(node.nodes, {**values, node.item: item}, per_item[index])

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(i, item)) for i, item in enumerate(items)]
        except BaseExceptionGroup as group_error:
            error = first_failure(group_error, [])
            failure: RunFailure = getattr(error, "failure", "error")
            reason = f"{error} (item {error_index(tasks, error)})"
            raise NodeError(node.name, reason, failure) from None
        finally:
            for item_calls in per_item:
                calls.extend(item_calls)
        return [task.result() for task in tasks]


def bound_values(node: Node, values: Mapping[str, Any], components: Components) -> dict[str, Any]:
    """The node's local names with the values of the sources they are bound to."""
    local: dict[str, Any] = {}
    for name, source in node.sources(components).items():
        if source not in values:
            known = ", ".join(sorted(values)) or "none"
            raise NodeError(node.name, f"input {{{name}}} has no value (available: {known})")
        local[name] = values[source]
    return local


def first_failure(group: BaseExceptionGroup[Any], order: list[str]) -> BaseException:
    """The NodeError of the earliest failed node in ``order`` (any error if none is one)."""
    errors = [e for e in _leaves(group) if not isinstance(e, asyncio.CancelledError)]
    node_errors = [e for e in errors if isinstance(e, NodeError)]
    if node_errors:
        rank = {name: i for i, name in enumerate(order)}
        return min(node_errors, key=lambda e: rank.get(e.node, len(rank)))
    return errors[0] if errors else group


def error_index(tasks: list[asyncio.Task[Any]], error: BaseException) -> int | str:
    """The index of the task that raised ``error`` (``?`` when none did)."""
    for index, task in enumerate(tasks):
        if task.done() and not task.cancelled() and task.exception() is error:
            return index
    return "?"


def _leaves(group: BaseExceptionGroup[Any]) -> Iterator[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


@contextmanager
def node_span(node: Node) -> Iterator[None]:
    """A span around one node's run (nothing outside a rollout)."""
    scope = current_scope()
    if scope is None:
        yield
        return
    attributes: dict[str, AttributeValue] = {NODE_NAME: node.name, NODE_KIND: node.kind}
    with scope.tracer.start_as_current_span(NODE_SPAN, attributes=attributes):
        yield


@contextmanager
def item_span(node: MapNode, index: int) -> Iterator[None]:
    """A span around one item of a map node (nothing outside a rollout)."""
    scope = current_scope()
    if scope is None:
        yield
        return
    attributes: dict[str, AttributeValue] = {
        NODE_NAME: node.name,
        NODE_KIND: "map_item",
        MAP_ITEM: index,
    }
    with scope.tracer.start_as_current_span(NODE_SPAN, attributes=attributes):
        yield
