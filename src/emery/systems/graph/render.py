"""A graph spec for people: a text rendering (nodes, edges, prompts) and its layers.

Both read the graph's top scope: a map node is one node whose sub-graph is shown inside it.
"""

from __future__ import annotations

import textwrap

from emery.systems.graph.spec import (
    CodeNode,
    GraphConfig,
    LLMNode,
    MapNode,
    Node,
    OutputNode,
    dependencies,
    dependency_order,
)


def edges(nodes: list[Node]) -> list[tuple[str, str]]:
    """(source, node) for every name a node of this scope reads, in dependency order."""
    return [
        (source, node.name)
        for node in dependency_order(nodes)
        for source in sorted(set(node.sources().values()))
    ]


def layers(nodes: list[Node]) -> list[list[str]]:
    """The scope's names by depth: the input fields it reads first, then each node one
    layer after the deepest node it reads."""
    deps = dependencies(nodes)
    depth: dict[str, int] = dict.fromkeys(inputs(nodes), 0)
    for node in dependency_order(nodes):
        depth[node.name] = 1 + max((depth[dep] for dep in deps[node.name]), default=0)
    out: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
    for name, level in depth.items():
        out[level].append(name)
    return [layer for layer in out if layer]


def inputs(nodes: list[Node]) -> list[str]:
    """The names the scope reads that none of its nodes is (input fields, a map's item)."""
    names = {node.name for node in nodes}
    return sorted({source for source, _ in edges(nodes)} - names)


def node_summary(node: Node) -> str:
    """One line: the node's kind and its settings."""
    if isinstance(node, LLMNode):
        parts = [f"llm, parser {node.parser.kind}"]
        if node.parser.pattern:
            parts[0] += f" {node.parser.pattern!r}"
        for label, value in (("max_tokens", node.max_tokens), ("temperature", node.temperature)):
            if value is not None:
                parts.append(f"{label} {value}")
        if node.samples > 1:
            parts.append(f"{node.samples} samples, majority vote")
        if node.demos:
            parts.append(f"{len(node.demos)} demos")
        return ", ".join(parts)
    if isinstance(node, CodeNode):
        return f"code: {node.function or 'def'}({', '.join(node.parameters())})"
    if isinstance(node, MapNode):
        return f"map over {node.over} (each as {node.item})"
    assert isinstance(node, OutputNode)
    return f"output = {node.value}"


def graph_text(graph: GraphConfig) -> str:
    """``graph`` as readable text: a header, its nodes with their prompts, its edges."""
    calls = sum(node.samples for node in graph.llm_nodes())
    header = [
        f"graph {graph.name} ({graph.graph_type}): {len(graph.llm_nodes())} llm nodes,"
        f" {calls} LM calls per run",
        f"inputs: {', '.join(inputs(graph.nodes)) or 'none'}",
        "",
        "nodes:",
    ]
    lines = header + _nodes_text(graph.nodes, "  ") + ["", "edges:"]
    lines += [f"  {source} -> {target}" for source, target in edges(graph.nodes)]
    return "\n".join(lines) + "\n"


def _nodes_text(nodes: list[Node], indent: str) -> list[str]:
    lines: list[str] = []
    for node in dependency_order(nodes):
        lines.append(f"{indent}{node.name}  [{node_summary(node)}]")
        more = indent + "    "
        if isinstance(node, LLMNode):
            if node.instruction.strip():
                lines.append(f"{more}instruction:")
                lines.append(textwrap.indent(node.instruction.rstrip(), more + "  "))
            for message in node.messages:
                lines.append(f"{more}{message.role}:")
                lines.append(textwrap.indent(message.template.rstrip(), more + "  "))
            if node.layout is not None:
                lines.append(f"{more}layout: {node.layout.components(node.name)}")
        elif isinstance(node, CodeNode):
            lines.append(textwrap.indent(node.source.rstrip(), more))
        elif isinstance(node, MapNode):
            lines += _nodes_text(node.nodes, more)
    return lines
