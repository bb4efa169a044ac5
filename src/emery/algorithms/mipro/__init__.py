"""MIPRO: bootstrapped few-shot demos and grounded instructions per stage, searched with TPE."""

from emery.algorithms.mipro.algorithm import Mipro
from emery.algorithms.mipro.presets import MiproPlan, make_plan
from emery.algorithms.mipro.settings import MiproSettings
from emery.algorithms.mipro.state import MiproState
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: MiproSettings) -> Mipro:
    return Mipro(settings)


SPEC = AlgorithmSpec(name="mipro", settings=MiproSettings, factory=_build)

__all__ = ["SPEC", "Mipro", "MiproPlan", "MiproSettings", "MiproState", "make_plan"]
