"""MIPRO told the job's ``select`` rule: its trials carry their cost per example and TPE
aims for what the rule chooses (``SelectRule.aim``; issue 33, item 2)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from test_mipro_support import (
    dataset,
    format_and_demos_lm,
    gold_table,
    make_ctx,
    proposer_lm,
    resumed_ctx,
    run_recorded,
    system_text,
)

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.search import next_params
from emery.algorithms.mipro.state import TrialRecord
from emery.algorithms.mipro.winner_variants import HALVED
from emery.algorithms.search_loop import StepRecord
from emery.core.models import Candidate, ChatMessage, Dataset
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.front import choose
from emery.evaluation.objectives import CandidateCost
from emery.evaluation.selection import BEST_SCORE, CheapestWithin, SelectRule, WithinBudget
from emery.jobs.winner import val_pool
from emery.lm import FakeLM
from emery.systems.demo_retrieval import NEAREST_SHOWN
from emery.systems.prompt_layout import StageLayout

SETTINGS = MiproSettings(num_trials=10, minibatch_size=8, full_eval_every=3, search_layouts=False)
SPACES = {"s.instruction": 3, "s.demos": 3}
CHEAPEST = CheapestWithin(margin=0.02, cost="tokens", text="cheapest_within:0.02")


def tokens(n: float) -> CandidateCost:
    return CandidateCost(n=30, tokens_by_role={"task": n})


def history(scores: tuple[float, float, float], *, costs: bool = True) -> list[TrialRecord]:
    """Nine trials, three per demo set d (the expensive sets first): set d scores
    ``scores[d]`` at about 90 + 100 d tokens an example."""
    return [
        TrialRecord(
            number=i,
            kind="full",
            params={"s.instruction": i % 3, "s.demos": 2 - i // 3},
            candidate_id=f"c{i}",
            score=scores[2 - i // 3],
            n=30,
            cost=tokens(90.0 + 100 * (2 - i // 3) + i) if costs else None,
        )
        for i in range(9)
    ]


def demo_choices(trials: list[TrialRecord], rule: SelectRule) -> Counter[int]:
    return Counter(
        next_params(SPACES, trials, seed=seed, startup_trials=3, rule=rule)[0]["s.demos"]
        for seed in range(40)
    )


def test_cheapest_within_tries_the_cheaper_choice_that_scores_as_well() -> None:
    tied = history((0.6, 0.6, 0.6))

    assert demo_choices(tied, CHEAPEST)[0] >= 30
    # the same trials judged by the score alone: the cheap set is not preferred
    assert demo_choices(tied, BEST_SCORE)[0] <= 10


def test_cheapest_within_does_not_chase_a_cheap_choice_below_the_margin() -> None:
    # the cheap set is cheap because it scores less: outside the margin it counts at the
    # best's cost, so the rule aims where the score alone does
    trials = history((0.3, 0.45, 0.6))

    assert demo_choices(trials, CHEAPEST) == demo_choices(trials, BEST_SCORE)
    assert demo_choices(trials, CHEAPEST)[2] >= 30


def test_a_budget_aims_for_the_best_score_within_its_limits() -> None:
    trials = history((0.5, 0.55, 0.6))  # the best set costs about 290 tokens
    budget = WithinBudget(limits={"tokens": 200.0}, text="budget:tokens=200")

    assert demo_choices(trials, BEST_SCORE)[2] >= 30
    assert demo_choices(trials, budget)[1] >= 30


def test_trials_recorded_without_costs_count_at_the_bests() -> None:
    # a checkpoint from before costs were kept: every trial ties on cost with the best,
    # so none is preferred for it and the rule chooses as the score alone does
    tied = (0.6, 0.6, 0.6)
    assert demo_choices(history(tied, costs=False), CHEAPEST) == demo_choices(
        history(tied), BEST_SCORE
    )


async def test_a_search_told_its_rule_records_costs_and_aims_for_it() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=1)
    ctx.objectives, ctx.select = ("score", "tokens"), CHEAPEST

    outcome, _ = await run_recorded(SETTINGS, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert all(trial.cost is not None and trial.cost.tokens > 0 for trial in state.trials)
    seed = next(t for t in state.trials if t.kind == "baseline")
    with_demos = [t for t in state.trials if ctx.candidates[t.candidate_id].demos.get("solve")]
    assert with_demos
    assert seed.cost is not None
    # demos are prompt tokens: every program that shows them costs more than the seed
    assert all(t.cost is not None and t.cost.tokens > seed.cost.tokens for t in with_demos)
    # and TPE reads them: the same search on the default rule chooses otherwise
    by_score, _ = await run_recorded(
        SETTINGS, make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=1)
    )
    assert [t.params for t in by_score.state.trials] != [t.params for t in state.trials]


@pytest.mark.parametrize("stop_after", [3, 7])
async def test_kill_and_resume_with_a_cost_rule_continues_the_same_study(stop_after: int) -> None:
    data = dataset()

    def context(task_lm: FakeLM, records: list[StepRecord] | None = None) -> SearchContext:
        ctx = (
            resumed_ctx(data, task_lm, proposer_lm(), records, seed=4)
            if records
            else make_ctx(data, task_lm, proposer_lm(), seed=4)
        )
        ctx.objectives, ctx.select = ("score", "tokens"), CHEAPEST
        return ctx

    whole, _ = await run_recorded(SETTINGS, context(format_and_demos_lm(data)))
    killed, records = await run_recorded(
        SETTINGS, context(format_and_demos_lm(data)), stop_after=stop_after
    )
    assert killed.reason == "killed"
    state = MiproState.model_validate_json(records[-1].state.model_dump_json())

    resumed, _ = await run_recorded(
        SETTINGS, context(format_and_demos_lm(data), records=records), state=state
    )

    # the same study: every choice, score and cost but the seconds each run took
    assert decisions(resumed.state) == decisions(whole.state)


def decisions(state: object) -> dict[str, object]:
    assert isinstance(state, MiproState)
    dump = state.model_dump()
    for trial in dump["trials"]:
        assert trial["cost"] is not None
        trial["cost"].pop("latency_s")
    return dump


# --- the last step under a cost rule: the winner with half its demos ---------------------


def halves(ctx: SearchContext) -> list[Candidate]:
    return [c for c in ctx.candidates.values() if c.lineage.details.get("variant") == HALVED]


async def test_a_cost_rule_scores_the_winner_with_half_its_demos_and_can_choose_it() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3)
    ctx.objectives, ctx.select = ("score", "tokens"), CHEAPEST

    outcome, _ = await run_recorded(SETTINGS, ctx)

    best = ctx.candidates[str(outcome.state.best_candidate_id)]
    (half,) = halves(ctx)
    assert half.lineage.parents == (best.id,)
    assert len(half.demos["solve"]) == len(best.demos["solve"]) // 2 >= 1
    assert half.components == best.components
    pool = val_pool(ctx)  # scored on all of val: the rule can choose it
    scored = {s.candidate_id: s for s in pool}
    assert scored[half.id].mean == scored[best.id].mean == 1.0
    assert scored[half.id].cost.tokens < scored[best.id].cost.tokens
    front = choose(pool, scored[best.id], ctx.objectives, CHEAPEST)
    assert front.winner_id == half.id


async def test_on_the_default_rule_the_winner_keeps_its_demos_untried() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3)

    outcome, _ = await run_recorded(SETTINGS, ctx)

    assert ctx.candidates[str(outcome.state.best_candidate_id)].demos["solve"]
    assert halves(ctx) == []


async def test_the_variant_spends_only_the_calls_the_trials_leave() -> None:
    data = dataset()
    runs = []
    for rule in (BEST_SCORE, CHEAPEST):
        budget = BudgetConfig(metric_calls=150)
        ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=0, budget=budget)
        ctx.objectives, ctx.select = ("score", "tokens"), rule
        outcome, _ = await run_recorded(SETTINGS, ctx)
        runs.append([t.params for t in outcome.state.trials])
        assert ctx.budget.usage.metric_calls <= 150

    assert len(runs[0]) == len(runs[1])  # the cost rule's search ran as many trials
    assert halves(ctx) == []  # and the trials left too few calls to score the variant


def val_scored(ctx: SearchContext, candidate: Candidate) -> bool:
    return all(ctx.evaluations.cached(candidate, e, "val") is not None for e in ctx.val)


def many_demos_lm(data: Dataset, least: int) -> FakeLM:
    """Right only with 'Answer:' in the instruction and at least ``least`` demos shown."""
    gold = gold_table(data)

    def reply(messages: Sequence[ChatMessage]) -> str:
        answer = gold[messages[-1]["content"]]
        shown = sum(1 for m in messages if m["role"] == "assistant")
        right = "Answer:" in system_text(messages) and shown >= least
        return f"Answer: {answer if right else answer + 1}"

    return FakeLM(reply, model="fake/many-demos")


async def test_a_best_showing_the_nearest_few_is_tried_with_half_as_many_per_input() -> None:
    data = dataset()
    # only the nearest pool (4 per input) shows enough demos: the other sets hold 2
    ctx = make_ctx(data, many_demos_lm(data, NEAREST_SHOWN), proposer_lm(), seed=0)
    ctx.objectives, ctx.select = ("score", "tokens"), CHEAPEST
    settings = SETTINGS.model_copy(update={"max_labeled_demos": 2, "max_bootstrapped_demos": 2})

    outcome, _ = await run_recorded(settings, ctx)

    best = ctx.candidates[str(outcome.state.best_candidate_id)]
    assert best.components["solve:select"] == "nearest"  # its pool is shown 4 per input
    (half,) = halves(ctx)
    assert half.lineage.parents == (best.id,)
    assert half.demos == best.demos
    assert StageLayout.of(half.components, "solve").shown == NEAREST_SHOWN // 2
    assert val_scored(ctx, half)
    scored = {s.candidate_id: s for s in val_pool(ctx)}
    assert scored[half.id].cost.tokens < scored[best.id].cost.tokens
