"""The search loop shared by the job engine and in-memory runs.

``run_search`` calls ``start`` (or continues from a given state), then ``step`` until its
``StopPolicy`` gives a reason to stop: the algorithm is done, a budget limit is reached or
``should_stop`` (a request from outside, such as a pause) says so. Before ``start`` it
records the budget's limits and, for a winner rule that reads a cost, what val separates
(``SelectPlanned``). After ``start``
and after each completed step it hands a ``StepRecord`` to ``on_step`` (the engine stores
it in one transaction); ``start``'s record also carries what the seed's evaluation told
about the plan and the budget (see ``pace``). A step cut short by the budget (the metric
calls it needs, or the LM token or cost limit or the wall time reached mid-step:
``Budget.step_gate``, ``Budget.within_wall_time``), a pause or a crash is abandoned whole:
its state changes, budget charges and results are rolled back, so a resumed run repeats it
exactly. Steps are timed by the budget's clock; the time of an abandoned step counts (a
step the budget cut ends the search with the best of the steps before it; the job engine
keeps a paused step's seconds for the resumed job: ``jobs/search_end``).

With an ``ApprovalGate`` (``[job] approve = "best"``), a step that would change the best is
stored with a pending request instead, and the loop waits for the decision, and applies
it, before it does anything else, also after a restart (see ``approval``); the wait is not
counted as the search's wall time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from emery.algorithms.approval import (
    ApprovalGate,
    applied_event,
    apply,
    hold,
    reviewer_notes,
)
from emery.algorithms.base import Algorithm, AlgorithmState, SearchContext
from emery.algorithms.pace import check_seed_spending, first_step_cut
from emery.algorithms.separation import separation
from emery.algorithms.stopping import StopPolicy, StopRequest
from emery.core.approvals import Approval
from emery.core.events import BudgetWarning, Event, IterationCompleted
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.core.plan_events import SelectPlanned
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
    approvals: list[Approval] = field(default_factory=list)
    """Approval requests made or applied by the step, stored with it."""


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
    gate: ApprovalGate | None = None,
) -> SearchOutcome:
    """Run ``algorithm`` from ``state`` (or from the start) until it stops; with ``gate``,
    a new best waits for a person's approval."""
    policy = StopPolicy(ctx.budget, should_stop)
    waiting = None if gate is None else gate.open()
    declined = _declined(ctx, gate)
    if state is None:
        ctx.emit(ctx.budget.plan())  # the limits, before any plan of the algorithm's
        if (select := _select_plan(ctx)) is not None:
            ctx.emit(select)
        before = ctx.budget.usage.model_copy()
        started = await _attempt(ctx, algorithm.start(ctx))
        if started is None:
            raise BudgetExhausted("the budget cannot pay for scoring the seed on val")
        state = started
        check_seed_spending(ctx, before, state)
        await _commit(ctx, state, on_step)
    while True:
        if gate is not None and waiting is not None:
            state = await _settle(ctx, algorithm, gate, waiting, state, on_step)
            waiting, declined = None, _declined(ctx, gate)
        if (reason := policy.reason(state)) is not None:
            return SearchOutcome(state=state, reason=reason)
        with ctx.budget.step_gate():
            step = algorithm.step(ctx, state.model_copy(deep=True))
            stepped = await _attempt(ctx, ctx.budget.within_wall_time(step))
        if stepped is None:
            reason = policy.out_of_budget()
            if (cut := first_step_cut(ctx.budget, state, reason)) is not None:
                ctx.emit(cut)  # stored with the job's last commit
            return SearchOutcome(state=state, reason=reason)
        waiting = None if gate is None else hold(ctx, gate, state, stepped, declined)
        _close_iteration(ctx, previous_best=state.best_val_score, state=stepped)
        state = stepped
        await _commit(ctx, state, on_step, [] if waiting is None else [waiting])


def _select_plan(ctx: SearchContext) -> SelectPlanned | None:
    """What val separates for the job's winner rule, when the rule reads a cost (the
    default rule is the search's own best, whose judging the algorithm's plan describes)."""
    if not ctx.select.costs or not ctx.val:
        return None
    return SelectPlanned(
        select=ctx.select.text,
        separation=separation(len(ctx.val), None),
        margin=ctx.select.margin,
    )


async def _settle(
    ctx: SearchContext,
    algorithm: Algorithm[Any],
    gate: ApprovalGate,
    waiting: Approval,
    state: AlgorithmState,
    on_step: StepCallback | None,
) -> AlgorithmState:
    """Wait for a person's decision on ``waiting``, act on it and store that."""
    decided = waiting if waiting.status != "pending" else await gate.decision(waiting)
    applied = await _attempt(ctx, apply(ctx, algorithm, state.model_copy(deep=True), decided))
    if applied is None:  # the budget cannot score an edit: the best stays
        note = "not scored: the budget ran out"
        marked = decided.model_copy(update={"applied": True, "result": note})
        ctx.emit(applied_event(marked))
        await _commit(ctx, state, on_step, [marked])
        return state
    state, marked = applied
    await _commit(ctx, state, on_step, [marked])
    return state


def _declined(ctx: SearchContext, gate: ApprovalGate | None) -> set[str]:
    """The candidates a person declined (never asked about again); their reasons, after those
    of the warm start's earlier job (``ctx.earlier_notes``), become the context's reviewer notes."""
    if gate is None:
        return set()
    declined = gate.declined()
    ctx.reviewer_notes[:] = [*ctx.earlier_notes, *reviewer_notes(declined)]
    return {a.candidate_id for a in declined}


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


T = TypeVar("T")


async def _attempt(ctx: SearchContext, work: Coroutine[Any, Any, T]) -> T | None:
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
        usage.wall_time_s += clock() - started  # spent, though the step is undone
        ctx.budget.usage = usage
        ctx.candidates.clear()
        ctx.candidates.update(known_candidates)
        if isinstance(exc, BudgetExhausted):
            return None
        raise
    ctx.budget.usage.wall_time_s += clock() - started
    return result


async def _commit(
    ctx: SearchContext,
    state: AlgorithmState,
    on_step: StepCallback | None,
    approvals: list[Approval] | None = None,
) -> None:
    events, candidates = ctx.log.drain()
    record = StepRecord(
        state=state,
        events=events,
        candidates=candidates,
        results=ctx.evaluations.drain(),
        budget=ctx.budget.usage.model_copy(deep=True),
        usage=ctx.budget.meter.by_role(),
        approvals=list(approvals or []),
    )
    if on_step is not None:
        await on_step(record)
