"""What the seed's evaluation tells before the first step, for every algorithm.

``start`` records the algorithm's plan (its ``*.plan`` event) and scores the seed on val.
The seconds and the metric calls that took give the run's pace (seconds per metric call,
concurrency included). From it ``check_seed_spending`` estimates how long the plan's calls
after the seed take, and records a ``pace_warning`` when the wall-time budget left cannot
hold all the planned trials; and it records a ``search_not_run`` warning when the seed's
evaluation alone spent a budget limit, so the search ends before its first step with the
seed as best (``first_step_cut``: the same warning when a limit cut the first step short,
so that no step was kept). The figures are estimates: proposals' LM calls are not metric
calls, and rollouts already scored are free.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass

from emery.algorithms.base import AlgorithmState, SearchContext
from emery.core.events import PAYLOADS, Event, PaceWarning, PlanPayload, SearchNotRun
from emery.core.payloads import SPENDING_LIMITS
from emery.evaluation.budget import Budget, BudgetUsage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pace:
    """Seconds per metric call, measured on the seed's evaluation."""

    seconds: float
    metric_calls: int

    @property
    def per_call(self) -> float:
        return self.seconds / self.metric_calls if self.metric_calls else 0.0


def planned_search_calls(plan: PlanPayload) -> int | None:
    """The plan's metric calls after the seed's evaluation, within its metric-call budget;
    None when the plan counts none (no limit decides how many it runs)."""
    total = plan.metric_calls.get("total")
    if total is None:
        return None
    baseline = plan.metric_calls.get("baseline", 0)
    calls = total - baseline
    if plan.budget_metric_calls is not None:
        calls = min(calls, plan.budget_metric_calls - baseline)
    return max(calls, 0)


def pace_warning(
    plan: PlanPayload, pace: Pace, *, wall_time_s: float, used_s: float
) -> PaceWarning | None:
    """The warning that the wall time left (``wall_time_s`` less ``used_s``) holds only
    some of ``plan``'s trials at ``pace``; None when it holds them all, or when the plan
    or the pace give nothing to estimate."""
    trials = plan.planned_trials()
    calls = planned_search_calls(plan)
    if not trials or not calls or pace.metric_calls <= 0:
        return None
    left_s = max(0.0, wall_time_s - used_s)
    if calls * pace.per_call <= left_s:
        return None
    setup = min(plan.setup_calls(), calls)
    per_trial = max(calls - setup, 1) / trials
    held = math.floor((left_s / pace.per_call - setup) / per_trial)
    return PaceWarning(
        plan=plan.kind,
        unit=plan.trial_unit,
        wall_time_s=wall_time_s,
        left_s=left_s,
        seed_s=pace.seconds,
        seed_calls=pace.metric_calls,
        seconds_per_call=pace.per_call,
        planned_calls=calls,
        planned_trials=trials,
        trials_held=min(max(held, 0), trials - 1),
    )


def search_not_run(budget: Budget, state: AlgorithmState) -> SearchNotRun | None:
    """The warning when a budget limit is already spent before the first step (and the
    algorithm itself had more to do); None otherwise."""
    if state.done or budget.usage.iterations:
        return None
    reason = budget.exhausted()
    limit = None if reason is None else reason.split(":", 1)[0]
    if reason is None or limit not in SPENDING_LIMITS:
        return None
    return SearchNotRun(limit=limit, reason=reason)


def first_step_cut(budget: Budget, state: AlgorithmState, reason: str) -> SearchNotRun | None:
    """The warning when a spending limit (``reason``) cut the search's first step short, so
    that no step was kept; None otherwise."""
    limit = reason.split(":", 1)[0]
    if state.done or budget.usage.iterations or limit not in SPENDING_LIMITS:
        return None
    return SearchNotRun(limit=limit, reason=reason, first_step=True)


def latest_plan(events: Iterable[Event]) -> PlanPayload | None:
    """The last ``*.plan`` payload among ``events``; None when there is none."""
    plan = None
    for item in events:
        model = PAYLOADS.get(item.kind)
        if model is not None and issubclass(model, PlanPayload):
            plan = model.model_validate(item.data)
    return plan


def check_seed_spending(ctx: SearchContext, before: BudgetUsage, state: AlgorithmState) -> None:
    """After ``start`` (``before``: the budget's usage when it began): log the plan's time
    at the measured pace and emit ``pace_warning`` and ``search_not_run`` where they
    apply."""
    usage = ctx.budget.usage
    pace = Pace(usage.wall_time_s - before.wall_time_s, usage.metric_calls - before.metric_calls)
    plan = latest_plan(ctx.log.events)
    calls = None if plan is None else planned_search_calls(plan)
    if calls and pace.metric_calls:
        log.info(
            "the seed's %d metric calls took %.3g s (%.3g s per call): the plan's %d calls"
            " after it need about %.3g s",
            pace.metric_calls,
            pace.seconds,
            pace.per_call,
            calls,
            calls * pace.per_call,
        )
    limit = ctx.budget.config.wall_time_s
    if plan is not None and limit is not None:
        short = pace_warning(plan, pace, wall_time_s=limit, used_s=usage.wall_time_s)
        if short is not None:
            log.warning(short.message())
            ctx.emit(short)
    not_run = search_not_run(ctx.budget, state)
    if not_run is not None:
        log.warning(not_run.message())
        ctx.emit(not_run)
