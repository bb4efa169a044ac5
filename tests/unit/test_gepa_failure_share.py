"""GEPA's ``failure_share``: the reflection is shown a minibatch drawn from the parent's
failures and the rest in the stated share, the child is judged on the uniform minibatch,
None keeps the search as it was, and a resumed search draws the same minibatches."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError
from test_gepa_parallel import ONE_PER_STEP, RECORDED, candidate_ids
from test_gepa_resume import checkpoint, known_results, restore_candidates, summary
from test_gepa_support import events, run_gepa, word_problem_context, word_problems

from emery.algorithms import StepRecord
from emery.algorithms.gepa import GepaSettings, GepaState
from emery.algorithms.gepa.failure_batches import failure_minibatch
from emery.algorithms.gepa.plan import GepaPlanInputs, make_gepa_plan
from emery.algorithms.gepa.state import SamplerState
from emery.evaluation.budget import BudgetConfig
from emery.lm.usage import UsageMeter

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

TRAIN = [f"t{i}" for i in range(10)]


def draw(known: dict[str, float], share: float, size: int = 4, **kw: Any) -> list[str]:
    sampler = kw.pop("sampler", SamplerState())
    rng = kw.pop("rng", random.Random(0))
    return failure_minibatch(sampler, TRAIN, size, rng, known=known, share=share, perfect_score=1.0)


def test_half_the_minibatch_comes_from_the_parents_failures() -> None:
    known = {"t0": 0.0, "t1": 0.5, "t2": 0.0, "t3": 1.0, "t4": 0.0, "t5": 1.0}
    failed = {"t0", "t1", "t2", "t4"}
    for seed in range(20):
        batch = draw(known, 0.5, rng=random.Random(seed))
        assert len(batch) == len(set(batch)) == 4
        assert (
            sum(example in failed for example in batch) == 2
        )  # the rest: known perfect or unknown
    assert sum(e in failed for e in draw(known, 1.0)) == 4
    assert sum(e in failed for e in draw(known, 0.0)) == 0
    assert sum(e in failed for e in draw(known, 0.5, size=3)) == 2  # 1.5 rounds up


def test_a_pool_that_runs_short_is_filled_from_the_other() -> None:
    assert draw({"t0": 0.0}, 1.0)[0] == "t0"
    assert sum(e == "t0" for e in draw({"t0": 0.0}, 1.0)) == 1
    all_failed = dict.fromkeys(TRAIN, 0.0)
    assert len(draw(all_failed, 0.0)) == 4  # no 'rest' left: all four are failures
    assert sorted(draw({}, 1.0, size=20)) == sorted(TRAIN)  # at most all of train, once each


def test_the_least_shown_examples_come_first_within_a_pool() -> None:
    sampler, rng = SamplerState(), random.Random(1)
    known = dict.fromkeys(TRAIN[:6], 0.0)
    first = draw(known, 1.0, size=3, sampler=sampler, rng=rng)
    second = draw(known, 1.0, size=3, sampler=sampler, rng=rng)
    assert set(first) | set(second) == set(TRAIN[:6])  # a pass over the failures
    assert all(sampler.shown[example] == 1 for example in TRAIN[:6])


def test_failure_share_is_between_zero_and_one() -> None:
    with pytest.raises(ValidationError, match="failure_share"):
        GepaSettings(failure_share=1.5)
    assert GepaSettings().failure_share is None


async def test_failure_share_none_makes_the_same_candidates_as_before() -> None:
    ctx = word_problem_context(word_problems(), budget=BudgetConfig(metric_calls=300))
    outcome, records = await run_gepa(ctx, RECORDED | {"failure_share": None})
    ids, iterations, calls = ONE_PER_STEP["default"]
    assert candidate_ids(records) == ids
    assert (outcome.state.iteration, ctx.budget.usage.metric_calls) == (iterations, calls)
    assert all(not entry.train_scores for entry in outcome.state.pool)


async def test_the_child_is_judged_on_the_uniform_minibatch_not_the_one_shown() -> None:
    ctx = word_problem_context(word_problems(), budget=BudgetConfig(metric_calls=300))
    outcome, records = await run_gepa(ctx, {"failure_share": 1.0, "operator_every": 0})
    sampled: dict[int, list[list[str]]] = {}
    for event in events(records, "gepa.minibatch_sampled"):
        sampled.setdefault(event.data["iteration"], []).append(event.data["example_ids"])
    children = [c for r in records for c in r.candidates if "minibatch_shown" in c.lineage.details]
    assert len(children) >= 3
    for child in children:
        details = child.lineage.details
        uniform, shown = sampled[child.lineage.iteration][:2]
        assert details["minibatch_shown"] == shown
        assert details["minibatch"][: len(uniform)] == uniform  # then any extension
        assert details["evidence"]["n"] == len(details["minibatch"])
    # what the parents were shown failing is kept for the next draw
    assert any(entry.train_scores for entry in outcome.state.pool)


async def test_a_resumed_failure_aware_search_matches_an_uninterrupted_run() -> None:
    dataset, settings = word_problems(), {"failure_share": 0.5}
    budget = BudgetConfig(metric_calls=300)
    full_ctx = word_problem_context(dataset, budget=budget)
    full, full_records = await run_gepa(full_ctx, settings)
    first_part: list[StepRecord] = []
    outcome, _ = await run_gepa(
        word_problem_context(dataset, budget=budget),
        settings,
        should_stop=lambda: "killed" if len(first_part) >= 3 else None,
        records=first_part,
    )
    assert outcome.reason == "killed"
    resumed_ctx = word_problem_context(
        dataset,
        budget=budget,
        meter=UsageMeter(dict(first_part[-1].usage)),
        known=known_results(first_part),
        budget_usage=first_part[-1].budget.model_copy(deep=True),
    )
    restore_candidates(resumed_ctx, first_part)
    second_part: list[StepRecord] = []
    resumed, _ = await run_gepa(
        resumed_ctx, settings, state=checkpoint(first_part), records=second_part
    )
    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert summary(resumed.state) == summary(full.state)
    assert resumed.state.sampler == full.state.sampler
    assert [e.train_scores for e in resumed.state.pool] == [e.train_scores for e in full.state.pool]
    assert candidate_ids(first_part + second_part) == candidate_ids(full_records)
    assert resumed_ctx.budget.usage.metric_calls == full_ctx.budget.usage.metric_calls


def test_the_plan_counts_three_minibatches_an_iteration() -> None:
    inputs = GepaPlanInputs("gepa", 30, 10, 1, 130, operators=True)
    assert make_gepa_plan(GepaSettings(), inputs).iteration_cost == 6
    plan = make_gepa_plan(GepaSettings(failure_share=0.5), inputs)
    assert (plan.iteration_cost, plan.iterations) == (9, 12)  # while 3 + 10 of 120 are left
