"""The winner of a finished search under the job's ``objectives`` and ``select`` rule.

Every candidate of the search scored on all of val (its results in the evaluation
service: this job's runs and stored ones alike) is measured for its mean cost per example;
the front over the objectives is kept and the rule picks the winner. A job on the
defaults (``objectives = ["score"]``, ``select = "best_score"``) keeps the search's own
best and records no front.
"""

from __future__ import annotations

from emery.algorithms.base import AlgorithmState, SearchContext
from emery.config.schema import JobSection
from emery.core.example_result import ExampleResult
from emery.evaluation.front import CostFront, choose
from emery.evaluation.objectives import Scored
from emery.evaluation.service import eval_key

EXCLUDED_OPERATIONS = ("reference",)
"""Candidates that are not the search's to choose: hand-written references."""


def val_pool(ctx: SearchContext) -> list[Scored]:
    """Each candidate with results on every val example, in the order they were added."""
    pool: list[Scored] = []
    for candidate in ctx.candidates.values():
        if candidate.lineage.operation in EXCLUDED_OPERATIONS or not ctx.val:
            continue
        results: list[ExampleResult] = []
        for example in ctx.val:
            result = ctx.evaluations.known.get(eval_key(candidate.id, example.id, "val"))
            if result is None:
                break
            results.append(result)
        else:
            pool.append(Scored.of(candidate.id, results))
    return pool


def cost_front(ctx: SearchContext, job: JobSection, state: AlgorithmState) -> CostFront | None:
    """The front and the winner ``job``'s rule chose; None on the defaults, or when the
    search's best has no score on all of val (then the best stays the winner)."""
    if not job.chooses_by_cost:
        return None
    pool = val_pool(ctx)
    best = next((s for s in pool if s.candidate_id == state.best_candidate_id), None)
    if best is None:
        return None
    return choose(pool, best, job.objectives, job.select_rule())
