"""Warm starts (``[job] warm_start = "JOB"``): an earlier job's candidates rescored here.

The job engine loads the earlier job (``jobs/warm_start.py``) into ``ctx.warm`` before the
first step; an algorithm that can start from it (``WarmStartable``) ends its ``start``
with its ``warm_start`` when ``ctx.warm`` is set: ``rescore`` adds the
earlier candidates to this search (lineage ``warm_start``, naming the earlier job and
candidate) and scores each on all of this job's val, which costs metric calls from this
job's budget (stored results of the same examples are free). What each algorithm makes
of them is its own: GEPA adds them to its pool and front, APO to its beam, MIPRO to its
best and, in its search phase, to its choices and TPE trials. All of it lands in the
state the first step checkpoints, so a resumed job never loads the earlier job again.

Rescoring takes at most half the metric-call budget: a warm start continues a search, it
does not replace it. ``warm_note`` says in the plan line how many candidates will be
rescored and what that costs.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

from emery.algorithms.base import SearchContext, WarmStart
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.core.events import WarmStartScored
from emery.core.models import Candidate
from emery.core.payloads import PlanPayload
from emery.evaluation.results import EvalResult

P = TypeVar("P", bound=PlanPayload)


@runtime_checkable
class WarmStartable(Protocol):
    """An algorithm that can start from an earlier job's candidates."""

    async def warm_start(self, ctx: SearchContext, state: Any) -> Any:
        """``state`` (what ``start`` made) with ``ctx.warm``'s candidates taken in
        (``rescore``); ``start`` ends with it when ``ctx.warm`` is set."""
        ...


def picks(ctx: SearchContext) -> list[Candidate]:
    """The earlier job's candidates this search rescores: best first, not the seed, as many
    as half the metric-call budget scores on all of val."""
    warm = ctx.warm
    if warm is None:
        return []
    chosen = [c for c in warm.candidates if c.id != ctx.seed_candidate.id]
    limit = ctx.budget.config.metric_calls
    if limit is not None and ctx.val:
        chosen = chosen[: limit // 2 // len(ctx.val)]
    return chosen


def warm_note(ctx: SearchContext, plan: P) -> P:
    """``plan`` with a note (and a clause in its summary) on the warm start's rescoring."""
    warm = ctx.warm
    if warm is None:
        return plan
    chosen = picks(ctx)
    calls = len(chosen) * len(ctx.val)
    note = (
        f"warm start from {warm.job_id} ({warm.algorithm}, {warm.what}): {len(chosen)}"
        f" candidate{'s' if len(chosen) != 1 else ''} rescored on val, up to {calls} metric"
        " calls of this budget before the search"
    )
    if len(chosen) < len(warm.candidates) - _seed_among(ctx, warm):
        note += " (half the budget at most)"
    return plan.model_copy(
        update={"summary": f"{plan.summary}; {note}", "notes": [*plan.notes, note]}
    )


def _seed_among(ctx: SearchContext, warm: WarmStart) -> int:
    return sum(1 for c in warm.candidates if c.id == ctx.seed_candidate.id)


async def rescore(ctx: SearchContext) -> list[tuple[Candidate, EvalResult]]:
    """The earlier job's picked candidates added to this search and scored on all of val,
    in order (at once), each reported with its earlier and new score."""
    warm = ctx.warm
    chosen = [ctx.add_candidate(candidate) for candidate in picks(ctx)]
    if warm is None or not chosen:
        return []
    results = await score_concurrently(ctx, [ScoreRequest(c, ctx.val, "val") for c in chosen])
    for candidate, result in zip(chosen, results, strict=True):
        earlier = candidate.lineage.details.get("earlier_val_score")
        ctx.emit(
            WarmStartScored(
                job_id=warm.job_id,
                candidate_id=candidate.id,
                earlier_score=earlier if isinstance(earlier, float | int) else None,
                score=result.mean,
                n=len(result.results),
            )
        )
    return list(zip(chosen, results, strict=True))
