"""The graph spec: ``[system] kind = "graph"``, a DAG of named nodes.

Every node produces one value named after the node. A node reads *sources* by name: a
dataset input field, another node's value, or (inside a map's sub-graph) the current item.

- ``llm``: one LM call, like a prompt-program stage: ``instruction`` (a component named
  after the node), ``messages`` with ``{name}`` placeholders, a ``parser``, the model
  ``role``, ``max_tokens``, ``temperature`` and ``samples`` (self-consistency: the node is
  called that many times and its value is the most common parsed reply) and ``layout``
  (the stage layout its candidate starts from: placement, reminder, answer, ...);
- ``code``: ``source`` defines a Python function (``function`` names it when the source
  defines several); its parameters are its inputs, its return value (JSON) the node's
  value. The source is only compiled here; it runs in node processes
  (``emery.systems.graph.code``);
- ``map``: runs its sub-graph ``nodes`` (which need their own output node) once per element
  of the list-valued source ``over``, the element named ``item``; its value is the list of
  the sub-graph's outputs;
- ``output``: ``value`` names the source that is the graph's output (exactly one per graph).

``inputs`` maps a node's local names (template placeholders, function parameters) to
sources; a local name it does not list reads the source of the same name. What an llm node
reads depends on the candidate (its instruction is a component), so the functions here
take the candidate's ``components`` (None: the spec's own texts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from emery.core.models import Demo
from emery.core.settings import Settings
from emery.systems.graph.checks import (
    check_acyclic,
    check_code,
    code_function,
    code_parameters,
    known_kinds,
    topological,
)
from emery.systems.graph.rlm_options import RLMOptions, check_rlm
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_layout import StageLayout, choice_name
from emery.systems.prompt_program import MessageTemplate
from emery.systems.templates import placeholders

Components = Mapping[str, str] | None


class NodeBase(Settings):
    """What every node has: an identifier name and its input bindings."""

    name: str
    inputs: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"node name {name!r} must be an identifier (letters, digits, _)")
        return name

    def local_names(self, components: Components = None) -> set[str]:
        """The names this node reads (before ``inputs`` maps them to sources)."""
        return set()

    def sources(self, components: Components = None) -> dict[str, str]:
        """Local name → source name for everything the node reads."""
        names = sorted(self.local_names(components))
        return {name: self.inputs.get(name, name) for name in names}


class LLMNode(NodeBase):
    """One LM call (see the module docstring)."""

    kind: Literal["llm"] = "llm"
    instruction: str = ""
    messages: list[MessageTemplate] = Field(min_length=1)
    parser: ParserConfig = ParserConfig()
    role: Literal["task"] = "task"
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0)
    samples: int = Field(default=1, ge=1, le=16)
    demos: list[Demo] = Field(default_factory=list)
    layout: StageLayout | None = None

    def local_names(self, components: Components = None) -> set[str]:
        texts = [self.instruction, *(m.template for m in self.messages)]
        if components is not None:
            texts[0] = components.get(self.name, self.instruction)
            texts.append(components.get(choice_name(self.name, "reminder"), ""))
        elif self.layout is not None:
            texts.append(self.layout.reminder)
        return set().union(*(placeholders(text) for text in texts))


class CodeNode(NodeBase):
    """A Python function of earlier values (see the module docstring)."""

    kind: Literal["code"] = "code"
    source: str
    function: str | None = None

    @model_validator(mode="after")
    def _compiles(self) -> CodeNode:
        check_code(self.name, self.source, self.function)
        return self

    def parameters(self) -> list[str]:
        """The function's parameter names (ValueError when the source does not define it)."""
        return code_parameters(self.name, self.source, self.function)

    def function_name(self) -> str:
        """The name of the function the node calls (``function``, else the one defined)."""
        return code_function(self.name, self.source, self.function).name

    def local_names(self, components: Components = None) -> set[str]:
        return set(self.parameters())


class OutputNode(NodeBase):
    """Names the source that is the graph's (or a map sub-graph's) output."""

    kind: Literal["output"] = "output"
    name: str = "output"
    value: str

    def local_names(self, components: Components = None) -> set[str]:
        return {self.value}


class MapNode(NodeBase):
    """Runs a sub-graph over each element of a list (see the module docstring)."""

    kind: Literal["map"] = "map"
    over: str
    item: str = "item"
    nodes: list[Node] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _known_kinds(cls, data: Any) -> Any:
        return known_kinds(data)

    @model_validator(mode="after")
    def _valid_subgraph(self) -> MapNode:
        check_scope(self.nodes, where=f"map {self.name!r}: ")
        if self.item in {node.name for node in self.nodes}:
            raise ValueError(f"map {self.name!r}: item name {self.item!r} is also a node name")
        return self

    def local_names(self, components: Components = None) -> set[str]:
        return {self.over} | self.outer_names(components)

    def sources(self, components: Components = None) -> dict[str, str]:
        return {self.over: self.inputs.get(self.over, self.over)} | {
            name: name for name in sorted(self.outer_names(components))
        }

    def outer_names(self, components: Components = None) -> set[str]:
        """Names the sub-graph reads from outside itself (neither its nodes nor the item)."""
        inner = {node.name for node in self.nodes} | {self.item}
        names: set[str] = set()
        for node in self.nodes:
            names |= set(node.sources(components).values()) - inner
        return names


Node = Annotated[LLMNode | CodeNode | MapNode | OutputNode, Field(discriminator="kind")]


def dependencies(nodes: list[Node], components: Components = None) -> dict[str, set[str]]:
    """Node name → the names of the nodes of the same scope whose values it reads."""
    names = {node.name for node in nodes}
    return {node.name: set(node.sources(components).values()) & names for node in nodes}


def dependency_order(nodes: list[Node], components: Components = None) -> list[Node]:
    """``nodes`` so that each follows the nodes it reads (declaration order otherwise)."""
    by_name = {node.name: node for node in nodes}
    order = topological(list(by_name), dependencies(nodes, components))
    return [by_name[name] for name in order]


def output_node(nodes: list[Node]) -> OutputNode:
    """The scope's one output node."""
    return next(node for node in nodes if isinstance(node, OutputNode))


def check_scope(nodes: list[Node], components: Components = None, where: str = "") -> None:
    """One scope (the graph or a map's sub-graph): unique names, exactly one output node,
    no cycle; raises ValueError with a one-line reason."""
    names = [node.name for node in nodes]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{where}node names must be unique; repeated: {repeated[0]!r}")
    outputs = [node.name for node in nodes if isinstance(node, OutputNode)]
    if len(outputs) != 1:
        found = f": {', '.join(outputs)}" if outputs else ""
        raise ValueError(
            f"{where}a graph needs exactly one output node (found {len(outputs)}{found})"
        )
    check_acyclic(names, dependencies(nodes, components), where)


def walk(nodes: list[Node], components: Components = None) -> list[Node]:
    """``nodes`` and every node of their map sub-graphs, each scope in dependency order."""
    out: list[Node] = []
    for node in dependency_order(nodes, components):
        out.append(node)
        if isinstance(node, MapNode):
            out.extend(walk(node.nodes, components))
    return out


GraphType = Literal["policy", "verifier", "rlm"]


class GraphConfig(Settings):
    """``[system]`` for ``kind = "graph"``: a named DAG of nodes with one output node.

    ``graph_type``: ``policy`` maps an example's input to an output; ``verifier`` scores a
    trace (its input fields are the trace's: input, output, transcript) and is trained to
    agree with the dataset's gold scores (``emery.verifiers.agreement``); ``rlm`` reaches
    a context too long for the prompt through tools (``rlm``: ``RLMOptions``)."""

    kind: Literal["graph"] = "graph"
    name: str = "graph"
    graph_type: GraphType = "policy"
    nodes: list[Node] = Field(min_length=1)
    rlm: RLMOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_kinds(cls, data: Any) -> Any:
        return known_kinds(data)

    @model_validator(mode="after")
    def _valid(self) -> GraphConfig:
        check_scope(self.nodes)
        names = [node.name for node in walk(self.nodes) if not isinstance(node, OutputNode)]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(
                f"node names must be unique in the whole graph; repeated: {repeated[0]!r}"
            )
        if not self.llm_nodes():
            raise ValueError("a graph needs at least one llm node")
        check_rlm(self.graph_type, self.rlm, self.prompt_reads())
        return self

    def llm_nodes(self, components: Components = None) -> list[LLMNode]:
        """Every llm node, map sub-graphs included, in dependency order."""
        return [node for node in walk(self.nodes, components) if isinstance(node, LLMNode)]

    def prompt_reads(self, components: Components = None) -> dict[str, set[str]]:
        """Each llm node's name → the names its prompt reads."""
        return {node.name: node.local_names(components) for node in self.llm_nodes(components)}


MapNode.model_rebuild()
GraphConfig.model_rebuild()
