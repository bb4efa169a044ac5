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
from emery.algorithms.registry import AlgorithmSpec, algorithm_spec, build_algorithm, parse_settings
from emery.algorithms.runner import SearchOutcome, StepRecord, run_search

__all__ = [
    "Algorithm",
    "AlgorithmSettings",
    "AlgorithmSpec",
    "AlgorithmState",
    "SearchContext",
    "SearchOutcome",
    "StepLog",
    "StepRecord",
    "algorithm_spec",
    "build_algorithm",
    "load_rng",
    "parse_settings",
    "run_search",
    "save_rng",
]
