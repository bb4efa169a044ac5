"""GEPA under every stopper, and exact metric-call accounting."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gepa_support import events, run_gepa, task_lm, word_problem_context, word_problems
from walltime_support import ClockedLM, FakeClock

from emery.algorithms.gepa import GepaState
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.lm.usage import MeteredLM, Price, UsageMeter

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


async def test_metric_calls_equal_the_distinct_new_rollouts() -> None:
    dataset = word_problems()
    task = task_lm(dataset)
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300), task=task)
    outcome, records = await run_gepa(ctx)
    results = [r for record in records for r in record.results]
    keys = [(r.candidate_id, r.example_id, r.split) for r in results]
    assert len(keys) == len(set(keys))  # no example scored twice for a candidate
    # a child that only restates stores its parent's readable runs as its own (the same
    # rollout), charged nothing: every rollout that ran is charged once
    ran = {r.rollout_id for r in results}
    assert len(ran) < len(results), "the answer-stage child shared its parent's runs"
    assert ctx.budget.usage.metric_calls == len(ran) == len(task.calls)
    assert records[-1].budget.metric_calls == len(ran)
    # Minibatch runs of parents and children and val runs are all charged.
    assert {r.split for r in results} == {"train", "val"}
    state = outcome.state
    assert isinstance(state, GepaState)
    assert sum(1 for r in results if r.split == "val") == len(dataset.val) * len(state.pool)


async def test_the_metric_call_limit_is_never_exceeded() -> None:
    dataset = word_problems()
    for limit in (10, 17, 25, 40):
        ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=limit))
        outcome, records = await run_gepa(ctx)
        assert ctx.budget.usage.metric_calls <= limit
        assert outcome.reason.startswith("metric_calls")
        assert sum(len(r.results) for r in records) == ctx.budget.usage.metric_calls


async def test_the_search_stops_when_no_new_candidate_could_join_the_pool() -> None:
    # A candidate joins the pool only after it is scored on all of val (and a child on its
    # minibatch first): with fewer calls left, more steps cannot change the best. Before,
    # the last steps here spent 90 -> 93 -> 97 of 100 calls on children that could never
    # be promoted.
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=100))
    outcome, records = await run_gepa(ctx, {"acceptance": "evidence"})
    needed = 3 + len(dataset.val)  # the minibatch and val
    left = 100 - ctx.budget.usage.metric_calls
    assert outcome.reason == (
        f"metric_calls: the {left} left cannot score a new candidate on its minibatch"
        f" and on val ({needed}), so none can join the pool"
    )
    assert left < needed
    started_with = [100 - record.budget.metric_calls for record in records[:-1]]
    assert min(started_with) >= len(dataset.val)  # every step could still promote one


async def test_max_proposals_stops_the_search() -> None:
    ctx = word_problem_context(word_problems(), budget=BudgetConfig(max_proposals=2))
    outcome, records = await run_gepa(ctx)
    assert outcome.reason.startswith("max_proposals")
    assert len(events(records, "candidate_proposed")) == 2


async def test_lm_token_and_cost_limits_stop_the_search() -> None:
    dataset = word_problems()
    meter = UsageMeter()
    ctx = word_problem_context(dataset, budget=BudgetConfig(lm_tokens=400), meter=meter)
    outcome, _ = await run_gepa(ctx)
    assert outcome.reason.startswith("lm_tokens")
    assert meter.by_role()["reflection"].calls >= 1

    priced = UsageMeter()
    lms = {
        "task": MeteredLM(task_lm(dataset), priced, "task", price=Price(input_per_mtok=1000)),
    }
    ctx = word_problem_context(
        dataset, budget=BudgetConfig(lm_cost_usd=0.5), meter=priced, task=lms["task"]
    )
    outcome, _ = await run_gepa(ctx)
    assert outcome.reason.startswith("lm_cost_usd")


async def test_wall_time_limit_stops_the_search() -> None:
    """Every task call takes a second on a fake clock (a real one made this test fail on a
    busy machine: the seed's scoring itself outlasted a 0.05 s limit)."""
    dataset = word_problems()
    gold = {e.input["question"]: int(e.expected) for e in dataset}
    clock = FakeClock()
    answers = FakeLM(lambda m: f"It is {gold[m[-1]['content']]}.", model="fake/answers")
    limit = len(dataset.val) + 5.0  # the seed on val, then five calls of the search
    budget = BudgetConfig(wall_time_s=limit)
    ctx = word_problem_context(dataset, budget=budget, task=ClockedLM(answers, clock, 1.0))
    ctx.budget.clock = clock
    outcome, records = await run_gepa(ctx)
    assert outcome.reason.startswith("wall_time_s: ")
    assert limit <= clock.now <= limit + 4  # calls already admitted on the 4 lanes finish
    assert records  # the seed's step was kept


async def test_no_improvement_and_stop_file_and_pause(tmp_path: Path) -> None:
    dataset = word_problems()
    useless = FakeLM(lambda m: "```\nAnswer the question, please, and think.\n```", model="f")
    ctx = word_problem_context(
        dataset, budget=BudgetConfig(no_improvement_iterations=3), reflection=useless
    )
    outcome, records = await run_gepa(ctx)
    assert outcome.reason.startswith("no_improvement")
    assert len(records) == 1 + 3

    stop = tmp_path / "stop"
    ctx = word_problem_context(dataset, budget=BudgetConfig(stop_file=str(stop)))
    seen: list[object] = []

    def create_stop_file() -> None:
        if len(seen) == 2:
            stop.write_text("")

    async def watch(_: object) -> None:
        seen.append(_)
        create_stop_file()

    from emery.algorithms import build_algorithm, run_search

    outcome = await run_search(build_algorithm("gepa"), ctx, on_step=watch)
    assert outcome.reason.startswith("stop_file")
    assert len(seen) == 2

    ctx = word_problem_context(dataset)
    steps: list[object] = []
    outcome, _ = await run_gepa(
        ctx,
        should_stop=lambda: "paused" if len(steps) >= 3 else None,
        records=steps,  # type: ignore[arg-type]
    )
    assert outcome.reason == "paused"
    assert outcome.state.iteration == 2
