"""APO: automatic prompt optimization with textual gradients and beam search.

Pryzant et al. (2023), "Automatic Prompt Optimization with "Gradient Descent" and Beam
Search": critiques of a prompt written from its failures act as gradients, edits apply
them, and a beam keeps the best prompts. Works on any system with text components; on a
prompt program, LM-free edit operators add children beside the edits (``operate``).
"""

from emery.algorithms.apo.algorithm import Apo
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.apo.state import ApoState
from emery.algorithms.registry import AlgorithmSpec


def _build(settings: ApoSettings) -> Apo:
    return Apo(settings)


SPEC = AlgorithmSpec(name="apo", settings=ApoSettings, factory=_build)

__all__ = ["SPEC", "Apo", "ApoSettings", "ApoState"]
