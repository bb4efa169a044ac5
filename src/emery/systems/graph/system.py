"""The workflow-graph system: a graph spec run as a DAG, its llm nodes seen as stages.

A ``GraphSystem`` is a ``PromptProgram`` whose stages are the graph's llm nodes (map
sub-graphs included, in dependency order, the node that gives the output last when nothing
reads it). So each llm node's instruction is a component named after the node, its demos and
layout choices (``node:placement``, ``node:reminder``, ``node:answer``, ...) work as a
stage's do, and GEPA, MIPRO and APO optimize a graph as they optimize a program. Only
``run`` and the input checks differ: nodes run as the graph wires them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Candidate
from emery.core.results import ComponentCall
from emery.systems.base import RunContext, SystemRun
from emery.systems.graph.bindings import check_bindings
from emery.systems.graph.code import CodeError, compile_node
from emery.systems.graph.runtime import GraphRuntime, NodeError
from emery.systems.graph.spec import CodeNode, GraphConfig, LLMNode, output_node, walk
from emery.systems.prompt_program import (
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
    StageError,
)
from emery.systems.registry import SystemKind

TEXT_KEYS = ("instruction", "demos")


def stage_view(graph: GraphConfig) -> PromptProgramConfig:
    """The graph's llm nodes as prompt-program stages (see the module docstring)."""
    nodes = graph.llm_nodes()
    final = output_node(graph.nodes).value
    readers = {source for node in walk(graph.nodes) for source in node.sources().values()}
    last = next((node for node in nodes if node.name == final), None)
    if last is not None and last.name not in readers - {final}:
        nodes = [node for node in nodes if node is not last] + [last]
    return PromptProgramConfig(name=graph.name, stages=[_stage(node) for node in nodes])


def _stage(node: LLMNode) -> StageConfig:
    return StageConfig(
        name=node.name,
        instruction=node.instruction,
        messages=node.messages,
        parser=node.parser,
        demos=node.demos,
        temperature=node.temperature,
        max_tokens=node.max_tokens,
    )


def _shape(value: Any) -> Any:
    """A graph dump without its llm nodes' texts (instructions, demos)."""
    if isinstance(value, dict):
        drop = TEXT_KEYS if value.get("kind") == "llm" else ()
        return {key: _shape(item) for key, item in value.items() if key not in drop}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return value


class GraphSystem(PromptProgram):
    """Runs a graph spec; components are its llm nodes' instructions (and layout choices)."""

    def __init__(self, graph: GraphConfig) -> None:
        super().__init__(stage_view(graph))
        self.graph = graph
        try:
            self.functions = {
                node.name: compile_node(node)
                for node in walk(graph.nodes)
                if isinstance(node, CodeNode)
            }
        except CodeError as exc:
            raise ConfigError(f"system: {exc}") from None

    def version(self) -> str:
        return content_hash(_shape(self.graph.model_dump(mode="json")))

    def check_candidate(self, candidate: Candidate, fields: set[str]) -> None:
        """Raise ConfigError naming the first node input no field or node provides."""
        check_bindings(self.graph.nodes, set(fields), candidate.components)

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        calls: list[ComponentCall] = []
        runtime = GraphRuntime(
            components=candidate.components,
            llm=partial(self._llm_node, candidate, ctx),
            functions=self.functions,
        )
        try:
            output = await runtime.run(self.graph.nodes, dict(ctx.example.input), calls)
        except NodeError as exc:
            return SystemRun(calls=calls, error=str(exc))
        return SystemRun(output=output, calls=calls)

    async def _llm_node(
        self,
        candidate: Candidate,
        ctx: RunContext,
        node: LLMNode,
        fields: dict[str, Any],
        calls: list[ComponentCall],
    ) -> Any:
        """One llm node run as its stage (``PromptProgram.run_stage``); a failure raises
        NodeError naming the node."""
        try:
            return await self.run_stage(candidate, ctx, self.stages[node.name], fields, calls)
        except StageError as exc:
            raise NodeError(node.name, str(exc)) from None


KIND = SystemKind(name="graph", config=GraphConfig, build=GraphSystem)
