"""GEPA: reflective prompt evolution with a per-example Pareto front.

Agrawal et al. (2025), "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning". Works on any system whose candidates have text components.
"""

from emery.algorithms.gepa.algorithm import Gepa
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: GepaSettings) -> Gepa:
    return Gepa(settings)


SPEC = AlgorithmSpec(name="gepa", settings=GepaSettings, factory=_build)

__all__ = ["SPEC", "Gepa", "GepaSettings", "GepaState", "PoolEntry"]
