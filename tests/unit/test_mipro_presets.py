"""Presets and the plan: choices, trials and minibatch from the data size and the budget."""

from __future__ import annotations

import pytest

from emery.algorithms.mipro import MiproSettings, make_plan
from emery.algorithms.mipro.presets import PlanInputs, default_trials
from emery.algorithms.registry import parse_settings
from emery.core.errors import ConfigError


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
    assert plan.minibatch_size == 25
    assert plan.metric_calls["trials"] == plan.num_trials * 25
    assert plan.metric_calls["total"] == sum(
        plan.metric_calls[k] for k in ("baseline", "bootstrap", "trials", "full_evals")
    )
    assert plan.lm_calls["task"] == plan.metric_calls["total"]
    assert plan.lm_calls["proposer"] == plan.summary_calls + plan.proposal_attempts


def test_more_stages_mean_more_trials_and_calls() -> None:
    one = make_plan(MiproSettings(), inputs(stages=1))
    three = make_plan(MiproSettings(), inputs(stages=3))

    assert three.num_trials > one.num_trials
    assert three.lm_calls["task"] == 3 * three.metric_calls["total"]


def test_small_val_is_the_minibatch_and_needs_no_promotions() -> None:
    plan = make_plan(MiproSettings(), inputs(n_val=12))

    assert plan.minibatch_size == 12
    assert plan.metric_calls["full_evals"] == 0


def test_budget_shrinks_minibatch_then_trials_to_fit() -> None:
    unlimited = make_plan(MiproSettings(), inputs())
    plan = make_plan(MiproSettings(), inputs(budget=200))

    assert plan.metric_calls["total"] <= 200
    assert plan.minibatch_size < unlimited.minibatch_size
    assert plan.notes
    tight = make_plan(MiproSettings(), inputs(budget=110))
    assert tight.metric_calls["total"] <= 110
    assert tight.minibatch_size == 5
    assert tight.num_trials < unlimited.num_trials


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
