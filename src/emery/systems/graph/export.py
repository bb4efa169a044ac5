"""A candidate's graph written out whole: the spec a ``[system] kind = "graph"`` loads again.

A candidate runs a graph (its ``graph:spec`` component, else the system's) with its own
node instructions, demos and layout choices, which are components. ``candidate_graph``
folds them back into the spec, so that the seed candidate of the exported graph is that
candidate, and it runs the same.
"""

from __future__ import annotations

import json
from typing import Any

from emery.core.models import Candidate
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import GraphSystem, drop_unset
from emery.systems.prompt_layout import StageLayout


def candidate_graph(system: GraphSystem, candidate: Candidate) -> GraphConfig:
    """The graph ``candidate`` runs, with its texts, demos and layouts in the spec."""
    graph = system.for_candidate(candidate).graph
    dump = _fill(graph.model_dump(mode="json"), candidate)
    return GraphConfig.model_validate(dump)


def _fill(value: Any, candidate: Candidate) -> Any:
    """``value`` (a graph dump) with each llm node's texts taken from ``candidate``."""
    if isinstance(value, list):
        return [_fill(item, candidate) for item in value]
    if not isinstance(value, dict):
        return value
    filled = {key: _fill(item, candidate) for key, item in value.items()}
    if value.get("kind") == "llm":
        name = value["name"]
        layout = StageLayout.of(candidate.components, name)
        filled["instruction"] = candidate.components.get(name, value.get("instruction", ""))
        filled["demos"] = [demo.model_dump(mode="json") for demo in candidate.demos.get(name, ())]
        filled["layout"] = None if layout == StageLayout() else layout.model_dump()
    return filled


def graph_json(graph: GraphConfig) -> str:
    """``graph`` as a JSON ``[system]`` table (unset options left out)."""
    return json.dumps(drop_unset(graph.model_dump(mode="json")), indent=2, ensure_ascii=False)
