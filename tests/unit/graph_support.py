"""Shared by the graph structure tests: a graph as the parent of structural mutations, and
the checks a mutated spec must pass."""

from __future__ import annotations

import json
from collections.abc import Set
from typing import Any

from emery.systems.graph.bindings import check_bindings
from emery.systems.graph.mutations import Parent
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, read_spec


def graph_parent(spec: dict[str, Any], fields: Set[str]) -> Parent:
    """``spec``'s seed candidate as a mutation parent whose inputs are ``fields``."""
    system = GraphSystem(GraphConfig.model_validate(spec))
    seed = system.with_structure(system.seed_candidate())
    return Parent(
        spec=json.loads(seed.components[SPEC_COMPONENT]),
        graph=system.graph,
        components=seed.components,
        taken=frozenset(fields),
    )


def valid_graph(spec: dict[str, Any], fields: Set[str]) -> GraphConfig:
    """``spec`` read and its bindings checked against the inputs ``fields`` (raises if not)."""
    graph = read_spec(json.dumps(spec))
    check_bindings(graph.nodes, fields)
    return graph
