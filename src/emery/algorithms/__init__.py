"""Search algorithms: GEPA, MIPRO, APO and the no-search baseline, behind one contract."""

from emery.algorithms.base import (
    Algorithm,
    AlgorithmSettings,
    AlgorithmState,
    SearchContext,
    StepLog,
    load_rng,
    save_rng,
)
from emery.algorithms.registry import ALGORITHMS, build_algorithm, register

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "AlgorithmSettings",
    "AlgorithmState",
    "SearchContext",
    "StepLog",
    "build_algorithm",
    "load_rng",
    "register",
    "save_rng",
]
