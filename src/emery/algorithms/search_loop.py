"""The search loop shared by the job engine and in-memory runs.

``run_search`` calls ``start`` (or continues from a given state), then ``step`` until its
``StopPolicy`` gives a reason to stop: the algorithm is done, a budget limit is reached or
``should_stop`` (a request from outside, such as a pause) says so. After ``start``
and after each completed step it hands a ``StepRecord`` to ``on_step`` (the engine stores
it in one transaction); ``start``'s record also carries what the seed's evaluation told
about the plan and the budget (see ``pace``). A step cut short by the budget (the metric
calls it needs, or the LM token or cost limit reached mid-step: ``Budget.step_gate``), a
pause or a crash is abandoned whole: its state changes, budget charges and results are
rolled back, so a resumed run repeats it exactly. Steps are timed by the budget's clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from emery.algorithms.base import Algorithm, AlgorithmState, SearchContext
from emery.algorithms.pace import check_seed_spending
from emery.algorithms.stopping import StopPolicy, StopRequest
from emery.core.events import BudgetWarning, Event, IterationCompleted
from emery.core.models import Candidate
from emery.core.results import ExampleResult
from emery.evaluation.budget import BudgetExhausted, BudgetUsage
from emery.lm.usage import RoleUsage


@dataclass
class StepRecord:
    """Everything one step changed, to be stored together."""

    state: AlgorithmState
    events: list[Event]
    candidates: list[Candidate]
    results: list[ExampleResult]
    budget: BudgetUsage
    usage: dict[str, RoleUsage]


@dataclass
class SearchOutcome:
    """How the loop ended: the last committed state and why it stopped."""

    state: AlgorithmState
    reason: str


StepCallback = Callable[[StepRecord], Awaitable[None]]


async def run_search(
    algorithm: Algorithm[Any],
    ctx: SearchContext,
    *,
    state: AlgorithmState | None = None,
    on_step: StepCallback | None = None,
    should_stop: StopRequest | None = None,
) -> SearchOutcome:
    """Run ``algorithm`` from ``state`` (or from the start) until it stops."""
    policy = StopPolicy(ctx.budget, should_stop)
    if state is None:
        before = ctx.budget.usage.model_copy()
        started = await _attempt(ctx, algorithm.start(ctx))
        if started is None:
            raise BudgetExhausted("the budget cannot pay for scoring the seed on val")
        state = started
        check_seed_spending(ctx, before, state)
        await _commit(ctx, state, on_step)
    while (reason := policy.reason(state)) is None:
        with ctx.budget.step_gate():
            stepped = await _attempt(ctx, algorithm.step(ctx, state.model_copy(deep=True)))
        if stepped is None:
            return SearchOutcome(state=state, reason=policy.out_of_budget())
        _close_iteration(ctx, previous_best=state.best_val_score, state=stepped)
        state = stepped
        await _commit(ctx, state, on_step)
    return SearchOutcome(state=state, reason=reason)


def _close_iteration(
    ctx: SearchContext, *, previous_best: float | None, state: AlgorithmState
) -> None:
    """Count the iteration (improved or not) and report it and any budget warnings."""
    improved = state.best_val_score is not None and (
        previous_best is None or state.best_val_score > previous_best
    )
    ctx.budget.record_iteration(improved)
    ctx.emit(
        IterationCompleted(
            iteration=ctx.budget.usage.iterations,
            metric_calls=ctx.budget.usage.metric_calls,
            best_score=state.best_val_score,
        )
    )
    for name, used, limit in ctx.budget.warnings():
        ctx.emit(BudgetWarning(resource=name, used=used, limit=limit))


async def _attempt(
    ctx: SearchContext, work: Coroutine[Any, Any, AlgorithmState]
) -> AlgorithmState | None:
    """Await one step; undo everything it did if it fails (None if the budget ran out)."""
    usage = ctx.budget.usage.model_copy(deep=True)
    known_candidates = dict(ctx.candidates)
    clock = ctx.budget.clock
    started = clock()
    try:
        result = await work
        if ctx.budget.cut is not None:  # the LM gate refused a call the step went on without
            raise BudgetExhausted(ctx.budget.cut)
    except BaseException as exc:
        ctx.evaluations.discard_pending()
        ctx.log.drain()
        ctx.budget.usage = usage
        ctx.candidates.clear()
        ctx.candidates.update(known_candidates)
        if isinstance(exc, BudgetExhausted):
            return None
        raise
    ctx.budget.usage.wall_time_s += clock() - started
    return result


async def _commit(ctx: SearchContext, state: AlgorithmState, on_step: StepCallback | None) -> None:
    events, candidates = ctx.log.drain()
    record = StepRecord(
        state=state,
        events=events,
        candidates=candidates,
        results=ctx.evaluations.drain(),
        budget=ctx.budget.usage.model_copy(deep=True),
        usage=ctx.budget.meter.by_role(),
    )
    if on_step is not None:
        await on_step(record)
