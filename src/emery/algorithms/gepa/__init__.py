"""GEPA: reflective prompt evolution with a per-example Pareto front.

Agrawal et al. (2025), "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning". Works on any system whose candidates have text components.

Modules: ``settings`` (``[algorithm.gepa]``), ``state`` (the checkpointed state), ``pareto``
and ``selection`` (fronts, dominance, parent and component choice), ``batches`` (epoch-
shuffled minibatches), ``failure_batches`` (the failure-aware minibatches the reflection is
shown with ``failure_share``), ``reflective_dataset`` (what the reflection model is shown),
``reflection`` and ``compact`` (the prompts and reply parsing), ``checks`` (is a reply a
usable instruction?), ``propose`` (one component's proposal), ``mutation`` (a child from the
reflection or, on a prompt program, from an LM-free edit operator), ``merge`` (crossover of
two front candidates), ``acceptance`` (the rule that accepts children and guards the
winner: ``evidence``, ``two_stage`` or a plug-in), ``val_gate`` (``two_stage``'s val
chunks and the winner's confirmation), ``pool`` (val scores, fronts and best),
``algorithm`` (the loop).

Small reflection models. The defaults follow the paper; what differs for weak models is
opt-in or chosen by ``reflection_style = "auto"`` (compact for ``local/`` models):

- compact prompts: the problems without names or numbers, answered in TASK / METHOD /
  FORMAT lines that GEPA joins, the format on a labelled line of its own;
- checks that reject answers, copies of an example, decoding loops and broken
  ``{placeholders}`` before any rollout is spent on them, with sampled retries;
- a stop after iterations that run no new rollout (the same proposals again, or
  minibatches already solved), so a search that can no longer move ends by itself.
"""

from emery.algorithms.gepa.algorithm import Gepa
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: GepaSettings) -> Gepa:
    return Gepa(settings)


SPEC = AlgorithmSpec(name="gepa", settings=GepaSettings, factory=_build)

__all__ = ["SPEC", "Gepa", "GepaSettings", "GepaState", "PoolEntry"]
