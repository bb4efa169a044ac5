"""Structure search: GEPA whose children may also change a graph's nodes and edges.

Modules: ``settings`` (``[algorithm.graph_gepa]``), ``mutations`` (the LM-free structural
templates), ``structure`` (a parent's next structural child, validated before any
rollout) and ``algorithm`` (GEPA's loop with structural children).
"""

from emery.algorithms.graph_gepa.algorithm import GraphGepa
from emery.algorithms.graph_gepa.settings import GraphGepaSettings
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: GraphGepaSettings) -> GraphGepa:
    return GraphGepa(settings)


SPEC = AlgorithmSpec(name="graph_gepa", settings=GraphGepaSettings, factory=_build)

__all__ = ["SPEC", "GraphGepa", "GraphGepaSettings"]
