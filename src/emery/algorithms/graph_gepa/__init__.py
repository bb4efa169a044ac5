"""Structure search: GEPA whose children may also change a graph's nodes and edges.

An algorithm of its own (``algorithm = "graph_gepa"``) rather than a ``structure = true``
option of GEPA: it needs a graph system and a seed carrying its spec, and its settings add
structure knobs that mean nothing to other systems; its loop and state are GEPA's (a
subclass overriding where children come from and which components a parent rewrites).
``target_llm_calls`` rejects a child over it before any rollout rather than penalising
its score: a penalty would still pay for the rollouts and blur the val scores that select
parents. There are no population or generation counts: GEPA runs one child per iteration
until the budget ends it.

Modules: ``settings`` (``[algorithm.graph_gepa]``), ``mutations`` (the LM-free structural
templates), ``spec_proposal`` (a whole new graph from the reflection model),
``structure`` (a parent's next structural child, validated before any rollout) and
``algorithm`` (GEPA's loop with structural children).
"""

from emery.algorithms.graph_gepa.algorithm import GraphGepa
from emery.algorithms.graph_gepa.settings import GraphGepaSettings
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: GraphGepaSettings) -> GraphGepa:
    return GraphGepa(settings)


SPEC = AlgorithmSpec(name="graph_gepa", settings=GraphGepaSettings, factory=_build)

__all__ = ["SPEC", "GraphGepa", "GraphGepaSettings"]
