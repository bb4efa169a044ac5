"""Every MIPRO trial scores a candidate no trial has scored: TPE's suggestion of a scored
one is told its score and replaced, and the search ends when none is left."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

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
from emery.algorithms.mipro.trials import combo_candidate

SPACES = {"s.instruction": 2, "s.demos": 3}
# one instruction and no layouts or format hint: a few candidates, so TPE repeats itself
SMALL = MiproSettings(
    num_instructions=1,
    num_demo_sets=2,
    search_layouts=False,
    format_hint_instruction=False,
    num_trials=12,
    minibatch_size=5,
    full_eval_every=4,
)


def key(params: Mapping[str, int]) -> str:
    return f"{params['s.instruction']}/{params['s.demos']}"


def record(number: int, params: dict[str, int], score: float) -> TrialRecord:
    return TrialRecord(
        number=number, kind="minibatch", params=params, candidate_id=key(params), score=score, n=5
    )


@pytest.mark.parametrize("seed", range(8))
def test_a_scored_candidate_is_never_picked_again(seed: int) -> None:
    combos = list(itertools.product(range(2), range(3)))
    history = [
        record(n, {"s.instruction": i, "s.demos": d}, 0.1 * n)
        for n, (i, d) in enumerate(combos[:4])
    ]

    picks = next_params(SPACES, history, seed=seed, startup_trials=3, count=3, identify=key)

    # two untried candidates are left: both come back, once each, and nothing else
    assert sorted(key(p) for p in picks) == ["1/1", "1/2"]


def test_choices_that_make_the_same_candidate_count_as_one() -> None:
    def same_demos(params: Mapping[str, int]) -> str:
        return str(params["s.demos"])  # the instruction changes nothing

    history = [record(0, {"s.instruction": 0, "s.demos": 0}, 0.5)]
    history[0].candidate_id = "0"
    picks = next_params(SPACES, history, seed=1, startup_trials=3, count=3, identify=same_demos)
    assert sorted(same_demos(p) for p in picks) == ["1", "2"]


def candidate_ids(ctx: SearchContext, state: MiproState) -> set[str]:
    """Every candidate the study's space holds."""
    spaces = state.spaces()
    return {
        combo_candidate(ctx, state, dict(zip(spaces, combo, strict=True)), 0).id
        for combo in itertools.product(*(range(n) for n in spaces.values()))
    }


@pytest.mark.parametrize("trials_per_step", [1, 3])
async def test_trials_score_new_candidates_until_none_is_left(trials_per_step: int) -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=2)
    settings = SMALL.model_copy(update={"trials_per_step": trials_per_step})

    outcome, _ = await run_recorded(settings, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    searched = [t.candidate_id for t in state.trials if t.kind == "minibatch"]
    assert len(set(searched)) == len(searched)  # no trial repeats a candidate
    assert state.seed_candidate_id not in searched
    space = candidate_ids(ctx, state)
    assert len(space) <= 12  # fewer candidates than planned trials: TPE repeats itself
    assert set(searched) | {state.seed_candidate_id} == space  # every candidate tried
    assert state.done_reason == f"{len(searched)} trials done, every combination tried"


@pytest.mark.parametrize("stop_after", [5, 8])
async def test_kill_and_resume_with_a_small_space_is_exact(stop_after: int) -> None:
    data = dataset()
    whole, _ = await run_recorded(
        SMALL, make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3)
    )
    killed, records = await run_recorded(
        SMALL,
        make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3),
        stop_after=stop_after,
    )
    assert killed.reason == "killed"
    ctx = resumed_ctx(data, format_and_demos_lm(data), proposer_lm(), records, seed=3)
    state = MiproState.model_validate_json(records[-1].state.model_dump_json())

    resumed, _ = await run_recorded(SMALL, ctx, state=state)

    assert resumed.state.model_dump() == whole.state.model_dump()
