"""Kill and resume: GEPA continued from a stored checkpoint ends exactly where an
uninterrupted run does, without paying for any rollout twice."""

from __future__ import annotations

from typing import Any

import pytest
from test_gepa_support import (
    keyword_context,
    keyword_example,
    run_gepa,
    word_problem_context,
    word_problems,
)

from emery.algorithms import SearchContext, StepRecord
from emery.algorithms.gepa import GepaState
from emery.core.models import Dataset
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.service import eval_key
from emery.lm.usage import UsageMeter

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def checkpoint(records: list[StepRecord]) -> GepaState:
    """The last committed state as the engine would reload it: through JSON."""
    return GepaState.model_validate_json(records[-1].state.model_dump_json())


def known_results(records: list[StepRecord]) -> dict[Any, Any]:
    return {
        eval_key(r.candidate_id, r.example_id, r.split): r
        for record in records
        for r in record.results
    }


def restore_candidates(ctx: SearchContext, records: list[StepRecord]) -> None:
    """As the engine does on resume: every stored candidate of the job is known again."""
    for record in records:
        for candidate in record.candidates:
            ctx.candidates[candidate.id] = candidate


def summary(state: GepaState) -> dict[str, Any]:
    return {
        "best": state.best_candidate_id,
        "best_score": state.best_val_score,
        "pool": [(item.id, item.parents, item.iteration, item.val_score) for item in state.pool],
        "front": state.front,
        "iteration": state.iteration,
        "counters": state.counters.model_dump(),
        "rng": state.rng_state,
        "done": state.done_reason,
    }


@pytest.mark.parametrize("kill_after", [1, 2, 4])
async def test_resume_from_any_checkpoint_matches_an_uninterrupted_run(kill_after: int) -> None:
    dataset = word_problems()
    budget = BudgetConfig(metric_calls=300)
    full_ctx = word_problem_context(dataset, budget=budget)
    full, full_records = await run_gepa(full_ctx)

    first_part: list[StepRecord] = []
    killed_ctx = word_problem_context(dataset, budget=budget)
    outcome, _ = await run_gepa(
        killed_ctx,
        should_stop=lambda: "killed" if len(first_part) >= kill_after else None,
        records=first_part,
    )
    assert outcome.reason == "killed"

    meter = UsageMeter(dict(first_part[-1].usage))
    resumed_ctx = word_problem_context(
        dataset,
        budget=budget,
        meter=meter,
        known=known_results(first_part),
        budget_usage=first_part[-1].budget.model_copy(deep=True),
    )
    restore_candidates(resumed_ctx, first_part)
    second_part: list[StepRecord] = []
    resumed, _ = await run_gepa(resumed_ctx, state=checkpoint(first_part), records=second_part)

    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert summary(resumed.state) == summary(full.state)
    assert resumed.reason == full.reason
    assert resumed_ctx.budget.usage.metric_calls == full_ctx.budget.usage.metric_calls
    # Nothing ran twice: the two parts together ran exactly what the full run ran.
    parts = [r for rec in first_part + second_part for r in rec.results]
    whole = [r for rec in full_records for r in rec.results]
    assert sorted((r.candidate_id, r.example_id) for r in parts) == sorted(
        (r.candidate_id, r.example_id) for r in whole
    )
    assert [e.kind for rec in first_part + second_part for e in rec.events] == [
        e.kind for rec in full_records for e in rec.events
    ]


async def test_resume_with_merges_matches_an_uninterrupted_run() -> None:
    dataset = Dataset(
        train=[
            keyword_example("t1", a="alpha"),
            keyword_example("t2", b="beta"),
            keyword_example("t3", a="alpha", b="beta"),
            keyword_example("t4", a="alpha"),
        ],
        val=[
            keyword_example("v1", a="alpha"),
            keyword_example("v2", b="beta"),
            keyword_example("v3"),
        ],
    )
    budget = BudgetConfig(metric_calls=200)
    full, _full_records = await run_gepa(keyword_context(dataset, budget=budget, seed=3))
    first_part: list[StepRecord] = []
    await run_gepa(
        keyword_context(dataset, budget=budget, seed=3),
        should_stop=lambda: "killed" if len(first_part) >= 3 else None,
        records=first_part,
    )
    ctx = keyword_context(dataset, budget=budget, seed=3)
    ctx.evaluations.known.update(known_results(first_part))
    ctx.budget.usage = first_part[-1].budget.model_copy(deep=True)
    restore_candidates(ctx, first_part)
    resumed, _ = await run_gepa(ctx, state=checkpoint(first_part))
    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert summary(resumed.state) == summary(full.state)


PIPELINED: dict[str, Any] = {"proposals_per_step": 3, "acceptance": "two_stage"}


@pytest.mark.parametrize("kill_after", [2, 4, 10])
async def test_a_pipelined_search_resumed_with_children_pending_matches_an_uninterrupted_run(
    kill_after: int,
) -> None:
    # Pipelined steps (two_stage at k > 1): each checkpoint killed at here holds the last
    # step's children, waiting for the next step's verdicts.
    dataset = word_problems()
    budget = BudgetConfig(metric_calls=300)
    full_ctx = word_problem_context(dataset, budget=budget)
    full, full_records = await run_gepa(full_ctx, PIPELINED)

    first_part: list[StepRecord] = []
    await run_gepa(
        word_problem_context(dataset, budget=budget),
        PIPELINED,
        should_stop=lambda: "killed" if len(first_part) >= kill_after else None,
        records=first_part,
    )
    stored = checkpoint(first_part)
    assert stored.pending is not None
    assert stored.pending.children
    resumed_ctx = word_problem_context(
        dataset,
        budget=budget,
        meter=UsageMeter(dict(first_part[-1].usage)),
        known=known_results(first_part),
        budget_usage=first_part[-1].budget.model_copy(deep=True),
    )
    restore_candidates(resumed_ctx, first_part)
    second_part: list[StepRecord] = []
    resumed, _ = await run_gepa(resumed_ctx, PIPELINED, state=stored, records=second_part)

    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert full.state.pending is None  # the search's end decided the last children
    assert summary(resumed.state) == summary(full.state)
    assert resumed.reason == full.reason
    assert resumed_ctx.budget.usage.metric_calls == full_ctx.budget.usage.metric_calls
    parts = [r for rec in first_part + second_part for r in rec.results]
    whole = [r for rec in full_records for r in rec.results]
    assert sorted((r.candidate_id, r.example_id) for r in parts) == sorted(
        (r.candidate_id, r.example_id) for r in whole
    )
    assert [e for rec in first_part + second_part for e in rec.events] == [
        e for rec in full_records for e in rec.events
    ]


async def test_a_pipelined_search_resumed_before_a_merge_matches_an_uninterrupted_run() -> None:
    # The third step decides the second's pending children, then merges.
    dataset = Dataset(
        train=[
            keyword_example("t1", a="alpha"),
            keyword_example("t2", b="beta"),
            keyword_example("t3", a="alpha", b="beta"),
            keyword_example("t4", a="alpha"),
        ],
        val=[
            keyword_example("v1", a="alpha"),
            keyword_example("v2", b="beta"),
            keyword_example("v3"),
        ],
    )
    budget, settings = BudgetConfig(metric_calls=200), {**PIPELINED, "proposals_per_step": 2}
    full, full_records = await run_gepa(keyword_context(dataset, budget=budget), settings)
    merged = [i for i, r in enumerate(full_records) for e in r.events if "merge" in e.kind]
    assert merged
    assert full_records[merged[0] - 1].state.pending is not None  # type: ignore[attr-defined]
    first_part: list[StepRecord] = []
    await run_gepa(
        keyword_context(dataset, budget=budget),
        settings,
        should_stop=lambda: "killed" if len(first_part) >= merged[0] else None,
        records=first_part,
    )
    ctx = keyword_context(dataset, budget=budget)
    ctx.evaluations.known.update(known_results(first_part))
    ctx.budget.usage = first_part[-1].budget.model_copy(deep=True)
    restore_candidates(ctx, first_part)
    resumed, _ = await run_gepa(ctx, settings, state=checkpoint(first_part))
    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert summary(resumed.state) == summary(full.state)
