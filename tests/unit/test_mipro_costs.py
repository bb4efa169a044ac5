"""MIPRO told a cost among ``[job] objectives``: its trials carry their cost per example
and TPE searches the score and the cost together (issue 33, item 2)."""

from __future__ import annotations

from collections import Counter

import pytest
from test_mipro_support import (
    dataset,
    format_and_demos_lm,
    make_ctx,
    proposer_lm,
    resumed_ctx,
    run_recorded,
)

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.search import next_params
from emery.algorithms.mipro.state import TrialRecord
from emery.algorithms.search_loop import StepRecord
from emery.lm import FakeLM

SETTINGS = MiproSettings(num_trials=10, minibatch_size=8, full_eval_every=3, search_layouts=False)
SPACES = {"s.instruction": 3, "s.demos": 3}


def tied_history(*, costs: bool) -> list[TrialRecord]:
    """Nine trials that all score 0.6; demo set d costs about 90 + 100 d tokens an example.
    The expensive sets come first, so a study that reads only the score keeps them."""
    return [
        TrialRecord(
            number=i,
            kind="full",
            params={"s.instruction": i % 3, "s.demos": 2 - i // 3},
            candidate_id=f"c{i}",
            score=0.6,
            n=30,
            costs=[90.0 + 100 * (2 - i // 3) + i] if costs else [],
        )
        for i in range(9)
    ]


def demo_choices(history: list[TrialRecord], costs: int) -> Counter[int]:
    return Counter(
        next_params(SPACES, history, seed=seed, startup_trials=3, costs=costs)[0]["s.demos"]
        for seed in range(40)
    )


def test_with_a_cost_tpe_tries_the_cheaper_choice_that_scores_as_well() -> None:
    history = tied_history(costs=True)

    assert demo_choices(history, costs=1)[0] >= 30
    # the same trials judged by the score alone: the cheap set is not preferred
    assert demo_choices(history, costs=0)[0] <= 10


def test_trials_recorded_without_costs_take_the_highest_recorded() -> None:
    # a checkpoint from before costs were kept: every trial ties, so none is preferred
    # for its cost, as the score alone would choose
    assert demo_choices(tied_history(costs=False), costs=1) == demo_choices(
        tied_history(costs=True), costs=0
    )


async def test_a_search_told_tokens_records_each_trials_tokens_per_example() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=4)
    ctx.objectives = ("score", "tokens")

    outcome, _ = await run_recorded(SETTINGS, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert all(len(trial.costs) == 1 and trial.costs[0] > 0 for trial in state.trials)
    seed = next(t for t in state.trials if t.kind == "baseline")
    with_demos = [t for t in state.trials if ctx.candidates[t.candidate_id].demos.get("solve")]
    assert with_demos
    # demos are prompt tokens: every program that shows them costs more than the seed
    assert all(trial.costs[0] > seed.costs[0] for trial in with_demos)
    # and TPE reads them: the same search told only the score chooses otherwise
    alone = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=4)
    by_score, _ = await run_recorded(SETTINGS, alone)
    assert [t.params for t in by_score.state.trials] != [t.params for t in state.trials]


async def test_on_the_defaults_trials_carry_no_costs() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=4)

    outcome, _ = await run_recorded(SETTINGS, ctx)

    assert isinstance(outcome.state, MiproState)
    assert all(trial.costs == [] for trial in outcome.state.trials)


@pytest.mark.parametrize("stop_after", [3, 7])
async def test_kill_and_resume_with_a_cost_continues_the_same_study(stop_after: int) -> None:
    data = dataset()

    def context(task_lm: FakeLM, records: list[StepRecord] | None = None) -> SearchContext:
        ctx = (
            resumed_ctx(data, task_lm, proposer_lm(), records, seed=4)
            if records
            else make_ctx(data, task_lm, proposer_lm(), seed=4)
        )
        ctx.objectives = ("score", "tokens")
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

    assert resumed.state.model_dump() == whole.state.model_dump()
