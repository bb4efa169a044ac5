"""MIPRO's last steps: variants of the winner scored on full val.

**The answer stage** (every job). The answer stage runs only on a reply a stage's parser
cannot read, which scores 0 without it, so adding it to a program can raise its score and
never lower one. TPE may still end on a winner without it (its layout choices include the
seed's own layout), e.g. worked demos whose replies mostly end in the required line but
sometimes not; the winner with the answer stage is scored on full val when the winner had
unreadable replies there and the budget allows (the readable replies repeat the winner's
calls, which the response cache answers). It becomes the best if it scores higher.

**Fewer demos** (a ``select`` rule that reads a cost, e.g. ``cheapest_within``). Demos are
most of a prompt's tokens, and TPE's demo sets hold up to ``max_bootstrapped_demos`` each,
so a cheaper program that scores as well is most often the winner with fewer of its own
demos: the winner with the first half of each stage's demos (or, in a stage that shows the
nearest few of a pool, half as many of them per input) is scored on full val when the
trials left the calls for it, where the rule can choose it. It becomes the best only if it
scores higher. The trials keep no calls for it: kept, they cost a 200-call search one or
two of its six trials, which moved its outcome by 4-18 points on the shared datasets while the
variant scored 7-11 points below its winner there (benchmarks/efficiency/README.md).
"""

from __future__ import annotations

import logging

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro.events import MiproFullEvaluation
from emery.algorithms.mipro.state import MiproState
from emery.algorithms.mipro.winner import make_best
from emery.algorithms.operators import apply_operator
from emery.algorithms.sources import count
from emery.core.models import Candidate, Lineage
from emery.systems.capabilities import StagedPrompts
from emery.systems.prompt_layout import StageLayout, with_layout

log = logging.getLogger(__name__)

RESTATED = "best_with_answer_stage"
HALVED = "best_with_half_its_demos"


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
    if not isinstance(program, StagedPrompts) or state.best_candidate_id is None:
        return
    best = ctx.candidates[state.best_candidate_id]
    results = [ctx.evaluations.cached(best, example, "val") for example in ctx.val]
    if not any(result is not None and (result.unreadable or result.error) for result in results):
        return  # every val reply was readable: nothing for the answer stage to do
    candidate = restated(best, program, number)
    if candidate is not None:
        await _score_variant(ctx, state, candidate, number, RESTATED)


def halved(best: Candidate, number: int) -> Candidate | None:
    """``best`` showing half of what each stage shows: the first half (rounded down) of
    the demos a stage shows whole, half as many per input (rounded down, at least one) of
    a pool a stage shows the nearest few of; None when that changes nothing."""
    components, demos = dict(best.components), dict(best.demos)
    for stage, stage_demos in best.demos.items():
        layout = StageLayout.of(best.components, stage)
        if layout.select == "all":
            demos[stage] = stage_demos[: len(stage_demos) // 2]
        elif stage_demos and layout.shown > 1:
            fewer = layout.model_copy(update={"shown": layout.shown // 2})
            components = with_layout(components, stage, fewer)
    if components == best.components and demos == best.demos:
        return None
    return best.derive(
        components=components,
        demos=demos,
        lineage=Lineage(
            parents=(best.id,),
            generation=best.lineage.generation + 1,
            operation="mipro",
            iteration=number,
            details={"variant": HALVED},
        ),
    )


async def trim_best(ctx: SearchContext, state: MiproState, number: int) -> None:
    """Under a rule that reads a cost, score the best program with half its demos on full
    val, where the rule can choose it; it becomes the best if it scores higher."""
    if not ctx.select.costs or state.best_candidate_id is None:
        return
    candidate = halved(ctx.candidates[state.best_candidate_id], number)
    if candidate is not None:
        await _score_variant(ctx, state, candidate, number, HALVED)


async def _score_variant(
    ctx: SearchContext, state: MiproState, candidate: Candidate, number: int, source: str
) -> None:
    """Score a variant of the best on full val (budget allowing); the best if higher."""
    if state.best_val_score is None:
        return
    if not ctx.budget.can_afford(len(ctx.val)):
        log.info("mipro: no budget left to score the best's variant (%s)", source)
        return
    result = await ctx.evaluate(ctx.add_candidate(candidate), ctx.val, "val")
    count(state.sources, source, "proposed")
    previous = state.best_val_score
    improved = result.mean > previous
    if improved:
        count(state.sources, source, "accepted")
        make_best(ctx, state, candidate.id, result.mean)
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
