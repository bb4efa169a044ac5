"""MIPRO's designed trials (``mipro.screening``): the seed's repair, one change at a time in
the prior's order, then the changes that beat the base, together; and a run on a task
where demos carry the lift reaches them within its first round."""

from __future__ import annotations

from collections.abc import Mapping

from test_mipro_support import dataset, format_and_demos_lm, make_ctx, proposer_lm, run_recorded

from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.screening import combination, designed_trials
from emery.algorithms.mipro.state import (
    DemoSet,
    InstructionChoice,
    LayoutChoice,
    TrialRecord,
)


def state(layouts: int = 3) -> MiproState:
    """One stage: the seed's instruction, an operator variant, a proposal; the empty,
    bootstrapped, labeled and nearest demo sets (in the order ``assemble`` never uses,
    so the prior's order shows); ``layouts`` layouts."""
    return MiproState(
        stages=["s"],
        instructions={
            "s": [
                InstructionChoice(text="seed", source="original"),
                InstructionChoice(text="terse", source="operator", tip="terse"),
                InstructionChoice(text="proposal", source="proposed"),
            ]
        },
        demo_sets={
            "s": [
                DemoSet(kind="empty"),
                DemoSet(kind="bootstrapped"),
                DemoSet(kind="labeled"),
                DemoSet(kind="nearest"),
            ]
        },
        layouts={"s": [LayoutChoice(source=f"recipe{i}") for i in range(layouts)]}
        if layouts > 1
        else {},
    )


def key(params: Mapping[str, int]) -> str:
    return ",".join(f"{name}={value}" for name, value in sorted(params.items()))


def scored(st: MiproState, params: dict[str, int], score: float, kind: str = "full") -> None:
    st.trials.append(
        TrialRecord(
            number=len(st.trials),
            kind=kind,
            params=params,
            candidate_id=key(params),
            score=score,
            n=40,
        )
    )


BASE = {"s.instruction": 0, "s.demos": 0, "s.layout": 1}


def test_the_repair_first_then_one_change_at_a_time_in_the_priors_order() -> None:
    st = state()
    scored(st, {"s.instruction": 0, "s.demos": 0}, 0.5)  # the baseline, without a layout

    assert designed_trials(st, key) == [BASE]
    scored(st, BASE, 0.5)
    assert designed_trials(st, key) == [
        {**BASE, "s.instruction": 2},  # the proposal before the operator's variant
        {**BASE, "s.demos": 3},  # the nearest demos first
        {**BASE, "s.layout": 2},  # the next layout, the seed's own last
    ]


def test_without_layouts_the_seed_is_the_base() -> None:
    st = state(layouts=1)
    scored(st, {"s.instruction": 0, "s.demos": 0}, 0.5)

    assert designed_trials(st, key) == [
        {"s.instruction": 2, "s.demos": 0},
        {"s.instruction": 0, "s.demos": 3},
    ]


def test_the_changes_that_beat_the_base_are_combined_once_the_round_is_scored() -> None:
    st = state()
    scored(st, BASE, 0.5)
    scored(st, {**BASE, "s.instruction": 2}, 0.6)
    scored(st, {**BASE, "s.demos": 3}, 0.7)
    assert designed_trials(st, key) == [{**BASE, "s.layout": 2}]  # the round goes on

    scored(st, {**BASE, "s.layout": 2}, 0.4)  # worse than the base: left out

    combined = {**BASE, "s.instruction": 2, "s.demos": 3}
    assert designed_trials(st, key) == [combined]
    scored(st, combined, 0.8)
    assert designed_trials(st, key) == []  # the design is spent: TPE's turn


def test_the_seeds_baseline_is_not_a_change_of_the_repaired_base() -> None:
    st = state()
    scored(st, {"s.instruction": 0, "s.demos": 0}, 0.9, kind="baseline")  # no layout key
    scored(st, BASE, 0.5)
    scored(st, {**BASE, "s.instruction": 2}, 0.6)
    scored(st, {**BASE, "s.demos": 3}, 0.4)
    scored(st, {**BASE, "s.layout": 2}, 0.4)

    assert combination(st.trials, BASE) is None  # one change beat the base, not two
    assert designed_trials(st, key) == []


def test_a_promoted_choice_is_read_at_its_first_trial() -> None:
    st = state()
    scored(st, BASE, 0.5, kind="minibatch")
    scored(st, {**BASE, "s.instruction": 2}, 0.6, kind="minibatch")
    scored(st, {**BASE, "s.demos": 3}, 0.7, kind="minibatch")
    scored(st, BASE, 0.9)  # the base promoted to full val: not what the changes beat
    st.trials[-1].candidate_id = key(BASE) + "'"

    assert combination(st.trials, BASE) == {**BASE, "s.instruction": 2, "s.demos": 3}


def test_nothing_to_combine_when_fewer_than_two_changes_beat_the_base() -> None:
    st = state()
    scored(st, BASE, 0.5)
    scored(st, {**BASE, "s.instruction": 2}, 0.5)  # a tie is not better
    scored(st, {**BASE, "s.demos": 3}, 0.7)
    scored(st, {**BASE, "s.layout": 2}, 0.4)

    assert combination(st.trials, BASE) is None
    assert designed_trials(st, key) == []


def test_a_change_that_makes_a_scored_candidate_is_not_tried_again() -> None:
    st = state()
    scored(st, BASE, 0.5)

    def same_as_base_when_demos_change(params: Mapping[str, int]) -> str:
        return key({**params, "s.demos": 0})

    assert {**BASE, "s.demos": 3} not in designed_trials(st, same_as_base_when_demos_change)


async def test_a_run_where_demos_carry_the_lift_reaches_them_on_its_second_trial() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3)
    settings = MiproSettings(num_trials=4, minibatch_size=30, full_eval_every=5)

    outcome, _ = await run_recorded(settings, ctx)

    st = outcome.state
    assert isinstance(st, MiproState)
    trials = [t for t in st.trials if t.kind != "baseline"]
    assert trials[0].params == {"solve.instruction": 0, "solve.demos": 0, "solve.layout": 1}
    base = trials[0].params
    for trial in trials[1:4]:  # the first round: one change each (instruction, demos, layout)
        assert sum(1 for name, value in trial.params.items() if value != base[name]) == 1
    assert st.best_val_score is not None
    assert st.baseline_val_score is not None
    assert st.best_val_score > st.baseline_val_score
