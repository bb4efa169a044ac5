"""Search algorithms: GEPA, MIPRO, APO and the no-search baseline, behind one contract."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.algorithms.base import (
        Algorithm,
        AlgorithmSettings,
        AlgorithmState,
        SearchContext,
        StepLog,
        load_rng,
        save_rng,
    )
    from emery.algorithms.registry import (
        AlgorithmSpec,
        algorithm_spec,
        build_algorithm,
        parse_settings,
    )
    from emery.algorithms.search_loop import SearchOutcome, StepRecord, run_search

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Algorithm": "emery.algorithms.base",
        "AlgorithmSettings": "emery.algorithms.base",
        "AlgorithmState": "emery.algorithms.base",
        "SearchContext": "emery.algorithms.base",
        "StepLog": "emery.algorithms.base",
        "load_rng": "emery.algorithms.base",
        "save_rng": "emery.algorithms.base",
        "AlgorithmSpec": "emery.algorithms.registry",
        "algorithm_spec": "emery.algorithms.registry",
        "build_algorithm": "emery.algorithms.registry",
        "parse_settings": "emery.algorithms.registry",
        "SearchOutcome": "emery.algorithms.search_loop",
        "StepRecord": "emery.algorithms.search_loop",
        "run_search": "emery.algorithms.search_loop",
    },
)

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
