"""MIPRO's ``trials_per_step``: several TPE trials picked at once and scored together."""

from __future__ import annotations

import pytest
from events_support import payloads
from test_mipro_support import (
    dataset,
    format_and_demos_lm,
    make_ctx,
    proposer_lm,
    resumed_ctx,
    run_recorded,
)

from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.events import MiproTrial

ONE = MiproSettings(num_trials=9, minibatch_size=8, full_eval_every=3)
THREE = ONE.model_copy(update={"trials_per_step": 3})


async def test_a_step_runs_its_trials_and_the_run_the_planned_trials() -> None:
    data = dataset()

    outcome, records = await run_recorded(
        THREE, make_ctx(data, format_and_demos_lm(data), proposer_lm())
    )

    state = outcome.state
    assert isinstance(state, MiproState)
    searched = [t for t in state.trials if t.kind == "minibatch"]
    assert [t.number for t in searched] == list(range(1, 10))
    # three trials a step: the search phase took 3 steps, not 9
    per_step = [len(payloads([r], MiproTrial)) for r in records]
    assert [n for n in per_step if n] == [3, 3, 3]
    # asked together, TPE's later picks see the earlier ones as running and spread out
    for step in range(3):
        picks = [tuple(sorted(t.params.items())) for t in searched[3 * step : 3 * step + 3]]
        assert len(set(picks)) == 3
    assert state.best_val_score is not None
    assert state.baseline_val_score is not None
    assert state.best_val_score >= state.baseline_val_score


async def test_one_trial_per_step_is_the_default_and_unchanged() -> None:
    data = dataset()
    default, _ = await run_recorded(ONE, make_ctx(data, format_and_demos_lm(data), proposer_lm()))
    explicit, _ = await run_recorded(
        ONE.model_copy(update={"trials_per_step": 1}),
        make_ctx(data, format_and_demos_lm(data), proposer_lm()),
    )
    assert default.state.model_dump() == explicit.state.model_dump()


@pytest.mark.parametrize("stop_after", [4, 5, 6])
async def test_kill_and_resume_with_three_trials_a_step_is_exact(stop_after: int) -> None:
    data = dataset()
    task_lm = format_and_demos_lm(data)
    whole, whole_records = await run_recorded(THREE, make_ctx(data, task_lm, proposer_lm(), seed=4))
    first_lm = format_and_demos_lm(data)
    killed, records = await run_recorded(
        THREE, make_ctx(data, first_lm, proposer_lm(), seed=4), stop_after=stop_after
    )
    assert killed.reason == "killed"
    assert len(records) < len(whole_records)  # killed inside the search phase
    second_lm = format_and_demos_lm(data)
    ctx = resumed_ctx(data, second_lm, proposer_lm(), records, seed=4)
    state = MiproState.model_validate_json(records[-1].state.model_dump_json())

    resumed, more = await run_recorded(THREE, ctx, state=state)

    assert resumed.state.model_dump() == whole.state.model_dump()
    assert len(records) + len(more) == len(whole_records)
    assert len(first_lm.calls) + len(second_lm.calls) == len(task_lm.calls)


def test_trials_per_step_must_be_positive() -> None:
    with pytest.raises(ValueError, match="trials_per_step"):
        MiproSettings.model_validate({"trials_per_step": 0})
