"""No search: score the seed (and any extra candidates) on val and stop."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from emery.algorithms.base import AlgorithmSettings, AlgorithmState, SearchContext
from emery.algorithms.registry import AlgorithmSpec
from emery.core.events import BaselineEvaluated, BestUpdated, PlanPayload, register_payload
from emery.core.models import Lineage


@register_payload
class BaselinePlanned(PlanPayload):
    """A baseline run's plan: the seed on val, then each given candidate on val."""

    kind: ClassVar[str] = "baseline.plan"
    trial_unit: ClassVar[str] = "candidates"
    val_size: int
    candidates: int

    def planned_trials(self) -> int | None:
        return self.candidates


class BaselineSettings(AlgorithmSettings):
    """``[algorithm.baseline]``: extra component assignments to score beside the seed."""

    candidates: list[dict[str, str]] = Field(default_factory=list)


class BaselineState(AlgorithmState):
    scores: dict[str, float] = Field(default_factory=dict)


class Baseline:
    """Scores given candidates on val; the best of them is the result."""

    name: ClassVar[str] = "baseline"
    state_type = BaselineState

    def __init__(self, settings: BaselineSettings | None = None) -> None:
        self.settings = settings or BaselineSettings()

    async def start(self, ctx: SearchContext) -> BaselineState:
        seed = ctx.add_candidate(ctx.seed_candidate)
        state = BaselineState(seed_candidate_id=seed.id)
        ctx.emit(baseline_plan(ctx, len(self.settings.candidates)))
        result = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            BaselineEvaluated(
                candidate_id=seed.id, split="val", score=result.mean, n=len(result.results)
            )
        )
        state.baseline_val_score = result.mean
        state.scores[seed.id] = result.mean
        _update_best(ctx, state, seed.id, result.mean)
        state.done = not self.settings.candidates
        state.done_reason = "seed scored" if state.done else None
        return state

    async def step(self, ctx: SearchContext, state: BaselineState) -> BaselineState:
        components = self.settings.candidates[state.iteration]
        seed = ctx.seed_candidate
        candidate = ctx.add_candidate(
            seed.derive(
                components=components,
                lineage=Lineage(
                    parents=(seed.id,), generation=1, operation="manual", iteration=state.iteration
                ),
            )
        )
        result = await ctx.evaluate(candidate, ctx.val, "val")
        state.scores[candidate.id] = result.mean
        _update_best(ctx, state, candidate.id, result.mean)
        state.iteration += 1
        if state.iteration >= len(self.settings.candidates):
            state.done, state.done_reason = True, "all candidates scored"
        return state


def baseline_plan(ctx: SearchContext, candidates: int) -> BaselinePlanned:
    """The plan (``baseline.plan``): the seed and each of ``candidates`` on all of val."""
    n_val, budget = len(ctx.val), ctx.budget.remaining_metric_calls()
    total = n_val * (1 + candidates)
    return BaselinePlanned(
        summary=(
            f"baseline plan: seed on {n_val} val, then {candidates} given"
            f" candidate{'s' * (candidates != 1)} on val ({n_val} metric calls each);"
            f" budget {'no limit' if budget is None else budget} metric calls"
        ),
        metric_calls={"baseline": n_val, "candidates": total - n_val, "total": total},
        budget_metric_calls=budget,
        val_size=n_val,
        candidates=candidates,
    )


def _update_best(ctx: SearchContext, state: BaselineState, candidate_id: str, score: float) -> None:
    """Make ``candidate_id`` the best if its val ``score`` beats the best so far."""
    previous = state.best_val_score
    if previous is None or score > previous:
        state.best_candidate_id, state.best_val_score = candidate_id, score
        ctx.emit(BestUpdated(candidate_id=candidate_id, score=score, previous_score=previous))


def _build(settings: BaselineSettings) -> Baseline:
    return Baseline(settings)


SPEC = AlgorithmSpec(name="baseline", settings=BaselineSettings, factory=_build)
