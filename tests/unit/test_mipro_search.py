"""The TPE search: plan, reproducible trials, promotion every K, resume, winning program."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from events_support import assert_best_updates_follow_the_state, payloads
from test_mipro_support import (
    TASK,
    TWO_STAGES,
    dataset,
    event_kinds,
    format_and_demos_lm,
    gold_table,
    make_ctx,
    proposer_lm,
    resumed_ctx,
    run_recorded,
    step_by_step_lm,
    two_stage_lm,
)

from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import Mipro, MiproSettings, MiproState
from emery.algorithms.mipro.events import MiproFullEvaluation, MiproPlanned, MiproRace, MiproTrial
from emery.algorithms.search_loop import StepRecord, run_search
from emery.core.errors import ConfigError
from emery.core.events import BestUpdated
from emery.core.models import Candidate, ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.eval_result import EvalResult
from emery.lm import FakeLM
from emery.systems.base import RunContext, SystemRun
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.config import VerifierConfig, build_verifier

SETTINGS = MiproSettings(num_trials=10, minibatch_size=8, full_eval_every=3)


def params_of(state: MiproState) -> list[tuple[str, dict[str, int]]]:
    return [(t.kind, t.params) for t in state.trials]


async def test_plan_is_emitted_and_logged_before_the_baseline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = dataset()
    caplog.set_level("INFO", logger="emery.algorithms.mipro.algorithm")

    outcome, records = await run_recorded(
        SETTINGS, make_ctx(data, format_and_demos_lm(data), proposer_lm()), stop_after=1
    )

    kinds = event_kinds(records)
    assert kinds.index("mipro.plan") < kinds.index("baseline_evaluated")
    plan = payloads(records, MiproPlanned)[0]
    assert plan.num_trials == 10
    assert plan.minibatch_size == 8
    assert plan.full_eval_every == 3
    assert plan.num_instructions == plan.num_demo_sets == 6  # the light preset
    assert plan.metric_calls["baseline"] == len(data.val)
    assert plan.metric_calls["trials"] == 10 * 8
    assert plan.lm_calls["proposer"] > 0
    assert "mipro plan (light)" in caplog.text
    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.trials[0].kind == "baseline"
    assert state.trials[0].n == len(data.val)


async def test_the_same_seed_gives_the_same_trials() -> None:
    data = dataset()

    async def run(seed: int) -> MiproState:
        ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=seed)
        outcome, _ = await run_recorded(SETTINGS, ctx)
        assert isinstance(outcome.state, MiproState)
        return outcome.state

    first, second, other = await run(5), await run(5), await run(6)

    assert params_of(first) == params_of(second)
    assert [t.score for t in first.trials] == [t.score for t in second.trials]
    assert first.model_dump() == second.model_dump()
    assert params_of(first) != params_of(other)


async def test_best_minibatch_combination_is_promoted_every_k_trials() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=1)

    outcome, records = await run_recorded(SETTINGS, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.trials_done == 10
    assert outcome.reason == "10 trials done"
    full = [t for t in state.trials if t.kind == "full"]
    # every K=3 trials the pending combinations race the best so far; only a race's
    # leader, when it is not the best so far, is scored on full val
    races = payloads(records, MiproRace)
    assert [r.trial for r in races if not r.final] == [3, 6, 9]
    assert races[-1].final
    assert races[-1].trial == 10
    assert all(r.incumbent in r.racers for r in races)
    assert full, "a race promoted a combination"
    assert [t.candidate_id for t in full] == [r.promoted for r in races if r.promoted]
    assert {t.number for t in full} <= {r.trial for r in races}
    for record in full:
        assert record.n == len(data.val)
        trials_before = [
            t for t in state.trials if t.kind == "minibatch" and t.number <= record.number
        ]
        assert record.candidate_id in {t.candidate_id for t in trials_before}
    assert all(t.n == 8 for t in state.trials if t.kind == "minibatch")
    full_events = payloads(records, MiproFullEvaluation)
    assert [e.trial for e in full_events] == [t.number for t in full]
    # only full-val scores choose the winner
    fully_scored = {c.candidate_id: c.full_score for c in state.combos.values()}
    assert state.best_candidate_id in fully_scored
    assert state.best_val_score == max(s for s in fully_scored.values() if s is not None)
    assert state.top[0].candidate_id == state.best_candidate_id
    assert len(state.top) == 5


async def test_minibatch_promotion_picks_the_best_mean() -> None:
    data = dataset()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=2)

    outcome, _ = await run_recorded(SETTINGS, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    for index, promoted in enumerate(state.trials):
        if promoted.kind != "full":
            continue
        earlier = [t for t in state.trials if t.kind == "minibatch" and t.number <= promoted.number]
        promoted_before = {t.candidate_id for t in state.trials[:index] if t.kind == "full"} | {
            state.seed_candidate_id
        }
        means: dict[str, list[float]] = {}
        for t in earlier:
            if t.candidate_id not in promoted_before:
                means.setdefault(t.candidate_id, []).append(t.score)
        best = max(sum(v) / len(v) for v in means.values())
        scores = means[promoted.candidate_id]
        assert sum(scores) / len(scores) == best


async def test_best_program_beats_the_baseline_when_instructions_and_demos_matter() -> None:
    data = dataset()
    ctx = make_ctx(data, step_by_step_lm(data), proposer_lm(), seed=0)
    settings = MiproSettings(num_trials=16, minibatch_size=10, full_eval_every=4)

    outcome, records = await run_recorded(settings, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    assert state.lift == 1.0
    best = ctx.candidates[state.best_candidate_id]
    assert "step by step" in best.components["solve"]
    assert best.demos["solve"]
    assert best.lineage.operation == "mipro"
    # neither the format sentence alone nor demos alone wins
    hint_only = [
        c for c in state.combos.values() if c.params["solve.instruction"] == 1 and c.full_score
    ]
    assert all(c.full_score == 0.0 for c in hint_only)
    best_updates = payloads(records, BestUpdated)
    assert best_updates[0] == BestUpdated(candidate_id=state.seed_candidate_id, score=0.0)
    assert best_updates[-1].candidate_id == state.best_candidate_id
    assert_best_updates_follow_the_state(records)


@pytest.mark.parametrize("stop_after", [1, 2, 3, 4, 7, 11])
async def test_kill_and_resume_continues_the_study(stop_after: int) -> None:
    data = dataset()
    task_lm = format_and_demos_lm(data)
    whole, whole_records = await run_recorded(
        SETTINGS, make_ctx(data, task_lm, proposer_lm(), seed=4)
    )
    whole_task_calls = len(task_lm.calls)

    first_lm = format_and_demos_lm(data)
    killed, records = await run_recorded(
        SETTINGS, make_ctx(data, first_lm, proposer_lm(), seed=4), stop_after=stop_after
    )
    assert killed.reason == "killed"
    assert len(records) == stop_after
    second_lm = format_and_demos_lm(data)
    ctx = resumed_ctx(data, second_lm, proposer_lm(), records, seed=4)
    state = MiproState.model_validate_json(records[-1].state.model_dump_json())

    resumed, more = await run_recorded(SETTINGS, ctx, state=state)

    assert resumed.state.model_dump() == whole.state.model_dump()
    assert resumed.reason == whole.reason
    assert len(records) + len(more) == len(whole_records)
    assert ctx.budget.usage.metric_calls == sum(len(r.results) for r in whole_records)
    # no rollout is paid twice: the two halves together ran what one run ran
    assert len(first_lm.calls) + len(second_lm.calls) == whole_task_calls


def crash_after(ctx: SearchContext, evaluations: int) -> None:
    """Make the ``evaluations``-th evaluation die after running, like a killed process."""
    real = ctx.evaluations.evaluate
    count = 0

    async def evaluate(*args: Any, **kwargs: Any) -> EvalResult:
        nonlocal count
        count += 1
        result = await real(*args, **kwargs)
        if count == evaluations:
            raise RuntimeError("killed mid-step")
        return result

    ctx.evaluations.evaluate = evaluate  # type: ignore[method-assign]


class CrashingProposer(FakeLM):
    """A proposer that dies on its n-th call."""

    def __init__(self, crash_at: int) -> None:
        inner = proposer_lm()
        super().__init__(inner._reply, model=inner.model)
        self.crash_at = crash_at

    def _reply(self, messages: Sequence[ChatMessage]) -> str:
        if len(self.calls) == self.crash_at:
            raise RuntimeError("killed mid-step")
        return super()._reply(messages)


@pytest.mark.parametrize("where", ["proposals", "trial"])
async def test_a_step_killed_midway_is_repeated_on_resume(where: str) -> None:
    data = dataset()
    whole, _ = await run_recorded(
        SETTINGS, make_ctx(data, format_and_demos_lm(data), proposer_lm(), seed=3)
    )
    proposer = CrashingProposer(5) if where == "proposals" else proposer_lm()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer, seed=3)
    if where == "trial":
        crash_after(ctx, 6)
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    with pytest.raises(RuntimeError, match="killed mid-step"):
        await run_search(Mipro(SETTINGS), ctx, on_step=keep)
    last = records[-1].state
    assert isinstance(last, MiproState)
    assert last.phase == ("propose" if where == "proposals" else "search")
    ctx2 = resumed_ctx(data, format_and_demos_lm(data), proposer_lm(), records, seed=3)
    state = MiproState.model_validate_json(last.model_dump_json())

    resumed, _ = await run_recorded(SETTINGS, ctx2, state=state)

    assert resumed.state.model_dump() == whole.state.model_dump()


async def test_metric_call_budget_is_respected_and_ends_with_a_full_evaluation() -> None:
    data = dataset()
    # each trial is judged on all 30 val: 250 calls pay for the 6 trials that find the
    # combination the scripted model needs (150 paid for 3, which did not)
    budget = BudgetConfig(metric_calls=250)
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), budget=budget)

    outcome, records = await run_recorded(MiproSettings(), ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert ctx.budget.usage.metric_calls <= 250
    plan = payloads(records, MiproPlanned)[0]
    assert plan.metric_calls["total"] <= 250
    assert plan.budget_metric_calls == 250
    # 30 val examples are fewer than a 20-point difference needs: every trial is judged on
    # all of them, paired with the seed, and no race is needed
    assert plan.minibatch_size == 30
    assert all(trial.full for trial in payloads(records, MiproTrial))
    assert not payloads(records, MiproRace)
    assert state.best_val_score is not None
    # the scripted model needs the format and demos: the budget buys a strict lift
    assert state.baseline_val_score is not None
    assert state.best_val_score > state.baseline_val_score


@pytest.mark.parametrize(("n_val", "metric_calls"), [(40, 200), (80, 400)])
async def test_trials_go_on_until_the_budget_cannot_pay_another(
    n_val: int, metric_calls: int
) -> None:
    # races drop most racers early, so reserving every racer's worst case for the final
    # promotion left a third of the budget unspent (130 of 200, 225 of 400)
    data = dataset(n_train=60, n_val=n_val)
    budget = BudgetConfig(metric_calls=metric_calls)
    ctx = make_ctx(data, format_and_demos_lm(data), proposer_lm(), budget=budget)

    _, records = await run_recorded(MiproSettings(), ctx)

    plan = payloads(records, MiproPlanned)[0]
    left = metric_calls - ctx.budget.usage.metric_calls
    leader_rest = n_val - plan.minibatch_size
    assert 0 <= left < plan.minibatch_size + leader_rest
    assert len(payloads(records, MiproTrial)) >= plan.num_trials


class EchoSystem:
    name = "echo"

    def seed_candidate(self) -> Candidate:
        return Candidate(components={"x": "y"})

    def version(self) -> str:
        return "v"

    def check_inputs(self, fields: set[str]) -> None:
        return None

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        return SystemRun(output="x")


async def test_mipro_needs_a_prompt_program() -> None:
    data = dataset()
    ctx = build_search_context(
        system=EchoSystem(),
        dataset=data,
        verifier=build_verifier(VerifierConfig()),
        lms={"task": FakeLM(["x"])},
    )
    with pytest.raises(ConfigError, match="mipro optimizes prompt programs"):
        await Mipro().start(ctx)


async def test_multi_stage_search_chooses_per_stage() -> None:
    data = dataset()
    ctx = build_search_context(
        system=PromptProgram(TWO_STAGES),
        dataset=data,
        verifier=build_verifier(TASK.verifier),
        lms={"task": two_stage_lm(gold_table(data)), "proposer": proposer_lm()},
        seed=2,
    )

    outcome, _ = await run_recorded(SETTINGS, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert set(state.spaces()) == {
        "plan.instruction",
        "plan.demos",
        "solve.instruction",
        "solve.demos",
        "plan.layout",
        "solve.layout",
    }
    assert [c.source for c in state.instructions["plan"][:1]] == ["original"]
    assert all(c.source != "format_hint" for c in state.instructions["plan"])  # raw parser
    assert state.instructions["solve"][1].source == "format_hint"
    assert state.trials_done == 10
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    best = ctx.candidates[state.best_candidate_id]
    assert "Answer:" in best.components["solve"]
