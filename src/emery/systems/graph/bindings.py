"""Check that every node input is bound: to a dataset field, a node of its scope or (in a
map's sub-graph) the item or a name of an enclosing scope."""

from __future__ import annotations

from emery.core.errors import ConfigError
from emery.systems.graph.spec import Components, MapNode, Node, OutputNode, check_scope


def check_bindings(
    nodes: list[Node], fields: set[str], components: Components = None, where: str = ""
) -> None:
    """Raise ConfigError naming the first node whose input no field or node provides, a
    node named like an input field, or a cycle the candidate's texts make."""
    try:
        check_scope(nodes, components, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    names = {node.name for node in nodes}
    shadowed = sorted(names & fields)
    if shadowed:
        raise ConfigError(f"{where}node {shadowed[0]!r} has the name of an input field")
    available = fields | names
    for node in nodes:
        sources = node.sources(components)
        if isinstance(node, MapNode):  # what its sub-graph reads is checked in there
            sources = {node.over: sources[node.over]}
        for local, source in sources.items():
            if source == node.name or source in available:
                continue
            bound = "" if local == source else f" (bound to {source!r})"
            known = ", ".join(sorted(available - {node.name})) or "none"
            raise ConfigError(
                f"{where}node {node.name!r}: input {{{local}}}{bound} is not an input field"
                f" or a node (available: {known})"
            )
        if isinstance(node, MapNode):
            outputs = {n.name for n in nodes if isinstance(n, OutputNode)}
            inner = (fields | names | {node.item}) - {node.name} - outputs
            check_bindings(node.nodes, inner, components, f"{where}map {node.name!r}: ")
