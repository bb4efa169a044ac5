"""The workflow-graph system: a graph spec run as a DAG, its llm nodes seen as stages.

A ``GraphSystem`` is a ``PromptProgram`` whose stages are the graph's llm nodes (map
sub-graphs included, in dependency order, the node that gives the output last when nothing
reads it). So each llm node's instruction is a component named after the node, its demos and
layout choices (``node:placement``, ``node:reminder``, ``node:answer``, ...) work as a
stage's do, and GEPA, MIPRO and APO optimize a graph as they optimize a program. Only
``run`` and the input checks differ: nodes run as the graph wires them.

A candidate may carry its own graph spec as the component ``graph:spec`` (the JSON of
``spec_text``: the graph without its llm nodes' texts, which stay components of their own).
Then it runs, and is checked, as that graph: this is how structure search
(``graph_gepa``) gives each candidate its own nodes and edges. Without it a candidate runs
the system's graph. The graph offers this as ``MutatesStructure``
(``systems.capabilities``): structural edits (``mutations``), the spec read back with the
graph's own validation, and a candidate's LM calls.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any, cast

from pydantic import ValidationError

from emery.core.errors import ConfigError
from emery.core.example_result import ComponentCall
from emery.core.hashing import content_hash
from emery.core.models import Candidate
from emery.core.validation import describe
from emery.systems.base import RunContext, SystemRun
from emery.systems.capabilities import StructureEdit
from emery.systems.graph.bindings import check_bindings
from emery.systems.graph.code import CALLER, NodeCaller
from emery.systems.graph.mutations import structure_edits
from emery.systems.graph.rlm import (
    check_rlm_candidate,
    loop_calls,
    run_rlm_stage,
    tool_options,
)
from emery.systems.graph.runtime import GraphRuntime, NodeError
from emery.systems.graph.spec import GraphConfig, LLMNode, output_node, walk
from emery.systems.prompt_program import (
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
    StageError,
)
from emery.systems.registry import SystemKind

TEXT_KEYS = ("instruction", "demos", "layout")
SPEC_COMPONENT = "graph:spec"


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


def drop_unset(value: Any) -> Any:
    """``value`` without the dict entries that are None or empty (all defaults)."""
    if isinstance(value, dict):
        return {k: drop_unset(v) for k, v in value.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [drop_unset(item) for item in value]
    return value


def spec_text(graph: GraphConfig) -> str:
    """The ``graph:spec`` component of ``graph``: its JSON without the llm nodes' texts
    (nor unset options)."""
    return json.dumps(drop_unset(_structure(graph)), indent=1)


def _structure(graph: GraphConfig) -> Any:
    """``graph`` dumped without its llm nodes' texts (nor the default graph type)."""
    policy = graph.graph_type == "policy"
    return _shape(graph.model_dump(mode="json", exclude={"graph_type"} if policy else None))


def read_spec(text: str) -> GraphConfig:
    """The graph a ``graph:spec`` component holds; ConfigError with a one-line reason."""
    try:
        return GraphConfig.model_validate_json(text)
    except ValidationError as exc:
        raise ConfigError(describe(exc, GraphConfig, prefix=SPEC_COMPONENT)) from None


def llm_calls(graph: GraphConfig) -> int:
    """LM calls one run of ``graph`` makes: each llm node's ``samples`` (an rlm tool node's
    times the most calls its loop makes; a map sub-graph's nodes counted once, a restated
    answer not at all)."""
    return sum(node.samples * loop_calls(graph, node.name) for node in graph.llm_nodes())


def majority(values: list[Any]) -> Any:
    """The most common of ``values`` (compared as JSON); the earliest wins a tie."""
    keys = [json.dumps(value, sort_keys=True, default=str) for value in values]
    top = Counter(keys).most_common(1)[0][1]
    return next(value for key, value in zip(keys, values, strict=True) if keys.count(key) == top)


class GraphSystem(PromptProgram):
    """Runs a graph spec; components are its llm nodes' instructions (and layout choices)."""

    def __init__(self, graph: GraphConfig, node_caller: NodeCaller = CALLER) -> None:
        super().__init__(stage_view(graph))
        self.graph = graph
        self.spec = spec_text(graph)
        self.node_caller = node_caller
        self._views: dict[str, GraphSystem] = {}

    def version(self) -> str:
        return content_hash(_structure(self.graph))

    def seed_candidate(self) -> Candidate:
        """The nodes' instructions and demos, and the choice components of their layouts."""
        seed = super().seed_candidate()
        choices = {
            name: text
            for node in self.graph.llm_nodes()
            if node.layout is not None
            for name, text in node.layout.components(node.name).items()
        }
        return Candidate(components={**seed.components, **choices}, demos=seed.demos)

    def for_candidate(self, candidate: Candidate) -> GraphSystem:
        """The system of the graph ``candidate`` runs (its ``graph:spec``, else this one);
        ConfigError when its spec is invalid."""
        text = candidate.components.get(SPEC_COMPONENT)
        if text is None or text == self.spec:
            return self
        if text not in self._views:
            self._views[text] = GraphSystem(read_spec(text), self.node_caller)
        return self._views[text]

    # MutatesStructure

    structure_component = SPEC_COMPONENT

    def with_structure(self, candidate: Candidate) -> Candidate:
        """``candidate`` carrying its graph as the ``graph:spec`` component."""
        if SPEC_COMPONENT in candidate.components:
            return candidate
        components = {**candidate.components, SPEC_COMPONENT: self.spec}
        return candidate.model_copy(update={"components": components})

    def structure_json(self, candidate: Candidate) -> dict[str, Any]:
        spec: dict[str, Any] = json.loads(spec_text(self.for_candidate(candidate).graph))
        return spec

    def structure_nodes(self, candidate: Candidate) -> list[str]:
        return [node.name for node in self.for_candidate(candidate).graph.llm_nodes()]

    def structure_edits(
        self, candidate: Candidate, fields: set[str], samples: int
    ) -> Iterator[tuple[str, StructureEdit]]:
        graph = self.for_candidate(candidate).graph
        spec = json.loads(spec_text(graph))
        return structure_edits(graph, spec, candidate.components, fields, samples)

    def read_structure(self, spec: dict[str, Any]) -> str:
        return spec_text(read_spec(json.dumps(spec)))

    def lm_calls(self, candidate: Candidate) -> int:
        return llm_calls(self.for_candidate(candidate).graph)

    def check_candidate(self, candidate: Candidate, fields: set[str]) -> None:
        """Raise ConfigError naming the first node input no field or node provides (or why
        the candidate's own spec is invalid)."""
        graph = self.for_candidate(candidate).graph
        check_bindings(graph.nodes, set(fields), candidate.components)
        check_rlm_candidate(graph, set(fields), candidate.components)

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        try:
            system = self.for_candidate(candidate)
        except ConfigError as exc:
            return SystemRun(error=str(exc))
        return await system.run_graph(candidate, ctx)

    async def run_graph(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        """Run this system's graph (whatever spec ``candidate`` carries)."""
        calls: list[ComponentCall] = []
        runtime = GraphRuntime(
            components=candidate.components,
            llm=partial(self._llm_node, candidate, ctx),
            node_caller=self.node_caller,
        )
        try:
            output = await runtime.run(self.graph.nodes, dict(ctx.example.input), calls)
        except NodeError as exc:
            return SystemRun(calls=calls, error=str(exc), failure=exc.failure)
        return SystemRun(output=output, calls=calls)

    async def _llm_node(
        self,
        candidate: Candidate,
        ctx: RunContext,
        node: LLMNode,
        fields: dict[str, Any],
        calls: list[ComponentCall],
    ) -> Any:
        """One llm node run as its stage (``PromptProgram.run_stage``; an rlm tool node as a
        tool loop), ``samples`` times concurrently when it votes; a failure (of every sample)
        raises NodeError naming it."""
        stage = self.stages[node.name]
        tools = tool_options(self.graph, node.name)
        per_sample: list[list[ComponentCall]] = [[] for _ in range(node.samples)]

        async def sample(own: list[ComponentCall]) -> Any:
            try:
                if tools is not None:
                    return await run_rlm_stage(self, tools, candidate, ctx, stage, fields, own)
                return await self.run_stage(candidate, ctx, stage, fields, own)
            except StageError as exc:
                return exc

        outcomes = await asyncio.gather(*(sample(own) for own in per_sample))
        for own in per_sample:
            calls.extend(own)
        values = [value for value in outcomes if not isinstance(value, StageError)]
        if not values:
            first = cast(StageError, outcomes[0])
            raise NodeError(node.name, str(first), failure=first.failure)
        return values[0] if node.samples == 1 else majority(values)


KIND = SystemKind(name="graph", config=GraphConfig, build=GraphSystem)
