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
from emery.evaluation.eval_result import EvalResult

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
    chosen = _offered(ctx, warm)
    limit = ctx.budget.config.metric_calls
    if limit is not None and ctx.val:
        chosen = chosen[: limit // 2 // len(ctx.val)]
    return chosen


def warm_note(ctx: SearchContext, plan: P) -> P:
    """``plan`` with a note on the warm start: what is rescored and what it costs."""
    warm = ctx.warm
    if warm is None:
        return plan
    chosen, offered = picks(ctx), _offered(ctx, warm)
    head = f"warm start from {warm.job_id} ({warm.algorithm}, {warm.what})"
    if not offered:
        note = f"{head}: its candidates are this job's seed, nothing to rescore"
    elif not chosen:
        note = f"{head}: half the budget cannot rescore any of its {len(offered)} candidates"
    else:
        many = "s" if len(chosen) != 1 else ""
        note = (
            f"{head}: {len(chosen)} candidate{many} rescored on all {len(ctx.val)} val"
            f" examples first, up to {len(chosen) * len(ctx.val)} metric calls of this budget"
        )
        if len(chosen) < len(offered):
            note += f" ({len(chosen)} of {len(offered)}: rescoring takes half the budget at most)"
    return plan.model_copy(update={"notes": [*plan.notes, note]})


def _offered(ctx: SearchContext, warm: WarmStart) -> list[Candidate]:
    return [c for c in warm.candidates if c.id != ctx.seed_candidate.id]


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
