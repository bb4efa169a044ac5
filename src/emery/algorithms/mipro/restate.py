"""MIPRO's last step: the winner with the restating answer stage, kept if it scores higher.

The answer stage runs only on a reply a stage's parser cannot read, which scores 0 without
it, so adding it to a program can raise its score and never lower one. TPE may still end
on a winner without it (its layout choices include the seed's own layout), e.g. worked
demos whose replies mostly end in the required line but sometimes not; this step scores
the winner with the answer stage on full val when the winner had unreadable replies there
and the budget allows (the readable replies repeat the winner's calls, which the response
cache answers).
"""

from __future__ import annotations

import logging

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro.state import MiproState
from emery.algorithms.operators import apply_operator
from emery.algorithms.sources import count
from emery.core.events import BestUpdated, MiproFullEvaluation
from emery.core.models import Candidate
from emery.systems.capabilities import StagedPrompts

log = logging.getLogger(__name__)

SOURCE = "best_with_answer_stage"


def restated(best: Candidate, program: StagedPrompts, number: int) -> Candidate | None:
    """``best`` with the answer stage in every stage that lacks it, or None if none does."""
    candidate = best
    for stage in program.config.stages:
        child = apply_operator("answer_stage", candidate, program, stage.name, iteration=number)
        candidate = child or candidate
    if candidate is best:
        return None
    return best.derive(
        components=candidate.components,
        demos=candidate.demos,
        lineage=candidate.lineage.model_copy(update={"parents": (best.id,)}),
    )


async def restate_best(ctx: SearchContext, state: MiproState, number: int) -> None:
    """Score the best program with the answer stage on full val; it becomes the best if
    it scores higher."""
    program = ctx.system
    if (
        not isinstance(program, StagedPrompts)
        or state.best_candidate_id is None
        or state.best_val_score is None
    ):
        return
    best = ctx.candidates[state.best_candidate_id]
    results = [ctx.evaluations.cached(best, example, "val") for example in ctx.val]
    if not any(result is not None and result.error is not None for result in results):
        return  # every val reply was readable: nothing for the answer stage to do
    candidate = restated(best, program, number)
    if candidate is None:
        return
    if not ctx.budget.can_afford(len(ctx.val)):
        log.info("mipro: no budget left to score the best with the answer stage")
        return
    result = await ctx.evaluate(ctx.add_candidate(candidate), ctx.val, "val")
    count(state.sources, SOURCE, "proposed")
    previous = state.best_val_score
    improved = result.mean > previous
    if improved:
        count(state.sources, SOURCE, "accepted")
        state.best_candidate_id, state.best_val_score = candidate.id, result.mean
        if state.baseline_val_score is not None:
            state.lift = result.mean - state.baseline_val_score
        ctx.emit(BestUpdated(candidate_id=candidate.id, score=result.mean, previous_score=previous))
    ctx.emit(
        MiproFullEvaluation(
            trial=number,
            candidate_id=candidate.id,
            params={},
            score=result.mean,
            minibatch_mean=None,
            n=len(result.results),
            best=improved,
            final=True,
        )
    )
