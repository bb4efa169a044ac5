"""Presets and the plan: choices, trials and minibatch from the data size and the budget."""

from __future__ import annotations

import math

import pytest
from test_mipro_support import dataset, format_and_demos_lm, make_ctx, proposer_lm

from emery.algorithms.mipro import Mipro, MiproPlan, MiproSettings, make_plan
from emery.algorithms.mipro.algorithm import _program
from emery.algorithms.mipro.presets import PlanInputs, default_trials
from emery.algorithms.registry import parse_settings
from emery.algorithms.separation import examples_for
from emery.core.errors import ConfigError
from emery.evaluation.budget import BudgetConfig


def inputs(
    *, n_val: int = 40, n_train: int = 40, budget: int | None = None, stages: int = 1
) -> PlanInputs:
    return PlanInputs(
        stages=stages,
        n_train=n_train,
        n_val=n_val,
        labeled_examples=4,
        fixed_instructions=2,
        budget_metric_calls=budget,
    )


@pytest.mark.parametrize(("preset", "n"), [("light", 6), ("medium", 12), ("heavy", 18)])
def test_presets_set_the_number_of_choices_and_trials(preset: str, n: int) -> None:
    plan = make_plan(MiproSettings.model_validate({"preset": preset}), inputs())

    assert plan.num_instructions == plan.num_demo_sets == n
    assert plan.num_trials == default_trials(n, 1)
    # 40 val are fewer than a 20-point difference needs (55): trials are judged on all
    assert plan.minibatch_size == 40
    assert plan.metric_calls["trials"] == plan.num_trials * 40
    assert plan.metric_calls["total"] == sum(
        plan.metric_calls[k] for k in ("baseline", "bootstrap", "trials", "full_evals")
    )
    assert plan.lm_calls["task"] == plan.metric_calls["total"]
    # the first round, and the retry round's call per missing choice (4 wanted)
    retry = min(plan.proposal_attempts, n - 2)
    assert plan.lm_calls["proposer"] == plan.summary_calls + plan.proposal_attempts + retry


def test_more_stages_mean_more_trials_and_calls() -> None:
    one = make_plan(MiproSettings(), inputs(stages=1))
    three = make_plan(MiproSettings(), inputs(stages=3))

    assert three.num_trials > one.num_trials
    assert three.lm_calls["task"] == 3 * three.metric_calls["total"]


def test_small_val_is_the_minibatch_and_needs_no_promotions() -> None:
    plan = make_plan(MiproSettings(), inputs(n_val=12))

    assert plan.minibatch_size == 12
    assert plan.metric_calls["full_evals"] == 0


def test_budget_cuts_trials_and_choices_never_the_minibatch() -> None:
    unlimited = make_plan(MiproSettings(), inputs(n_val=120))
    plan = make_plan(MiproSettings(), inputs(n_val=120, budget=600))

    assert unlimited.minibatch_size == plan.minibatch_size == examples_for(0.2) == 55
    assert plan.metric_calls["total"] <= 600
    assert 0 < plan.num_trials < unlimited.num_trials
    assert plan.num_instructions == plan.num_demo_sets == plan.num_trials
    assert any("the budget pays for" in note for note in plan.notes)
    # each race is priced at its leader's rest of val, the reserve the trials keep
    races = math.ceil(plan.num_trials / 5) * (120 - 55)
    assert plan.metric_calls["full_evals"] == races
    assert plan.separation is not None
    assert (plan.separation.candidates, plan.separation.examples) == (plan.num_trials, 55)


@pytest.mark.parametrize("budget", [100, 200, 400])
def test_small_budgets_plan_fewer_trials_on_batches_that_separate(budget: int) -> None:
    """The 60/40 job of issue 30 at 200 calls planned 10 trials on 5 examples each (a
    coin flip); now each trial is judged on all 40 val and the budget says how many."""
    plan = make_plan(MiproSettings(), inputs(n_val=40, n_train=60, budget=budget))

    assert plan.minibatch_size == 40  # never scaled down to fit
    assert plan.metric_calls["total"] <= budget
    assert plan.num_trials == {100: 1, 200: 3, 400: 8}[budget]
    assert plan.separation is not None
    assert plan.separation.detectable <= 0.25
    assert f"about {plan.num_trials} trial" in plan.describe()


def test_a_budget_that_cannot_judge_one_trial_plans_none_and_says_so() -> None:
    plan = make_plan(MiproSettings(), inputs(n_val=120, budget=150))

    assert plan.num_trials == 0
    assert plan.minibatch_size == 55
    assert any("cannot judge one trial on 55 val examples" in note for note in plan.notes)


def test_explicit_values_override_presets_and_are_never_scaled() -> None:
    settings = MiproSettings(num_instructions=3, num_trials=30, minibatch_size=20)

    plan = make_plan(settings, inputs(budget=100))

    assert (plan.num_instructions, plan.num_trials, plan.minibatch_size) == (3, 30, 20)
    assert plan.num_demo_sets == 6
    assert any("the budget will end it early" in note for note in plan.notes)


def test_settings_are_validated_with_one_line_errors() -> None:
    assert isinstance(parse_settings("mipro", {"preset": "heavy"}), MiproSettings)
    with pytest.raises(ConfigError, match="preset"):
        parse_settings("mipro", {"preset": "huge"})
    with pytest.raises(ConfigError, match="num_trails"):
        parse_settings("mipro", {"num_trails": 3})


def test_without_a_labeled_set_its_slot_goes_to_a_bootstrapped_one() -> None:
    def plan(labeled: int) -> MiproPlan:
        shape = PlanInputs(
            stages=1,
            n_train=44,
            n_val=20,
            labeled_examples=labeled,
            fixed_instructions=2,
            budget_metric_calls=100,
        )
        return make_plan(MiproSettings(), shape)

    with_gold, without = plan(4), plan(0)  # without: the gold is a test suite

    assert with_gold.bootstrapped_sets == with_gold.num_demo_sets - 2
    assert with_gold.bootstrap_examples == 0  # the labeled set and the seed's fill it
    assert without.bootstrapped_sets == without.num_demo_sets - 1
    assert 0 < without.bootstrap_examples <= 25  # at most a quarter of the budget


async def test_a_gold_that_is_a_test_suite_makes_no_labeled_set_in_the_plan() -> None:
    data = dataset()
    suite = "def check(candidate):\n    assert candidate(1) == 2"
    tests = data.model_copy(
        update={"train": [e.model_copy(update={"expected": suite}) for e in data.train]}
    )
    budget = BudgetConfig(metric_calls=100)
    mipro = Mipro(MiproSettings())
    for data_set, labeled in ((data, True), (tests, False)):
        ctx = make_ctx(data_set, format_and_demos_lm(data), proposer_lm(), seed=0, budget=budget)
        assert await mipro._labeled_possible(ctx, _program(ctx)) is labeled
        plan = (await mipro.start(ctx)).resolved_plan()
        assert plan.bootstrapped_sets == plan.num_demo_sets - (2 if labeled else 1)
