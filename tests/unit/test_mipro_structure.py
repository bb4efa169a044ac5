"""MIPRO searches prompt structure: a layout no proposal reaches still lifts; demo-set rules."""

from __future__ import annotations

from fake_models import boxed_reasoner_lm, format_last_lm
from test_mipro_support import TASK, dataset, gold_table, make_ctx, run_recorded

from emery.algorithms.base import SearchContext
from emery.algorithms.labeled import labeled_demos
from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.demos import assemble, teacher_candidate
from emery.algorithms.mipro.winner_variants import restate_best
from emery.core.models import Demo, Example
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.systems.formats import format_sentence
from emery.systems.prompt_layout import StageLayout
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.config import build_verifier

STAGE = TASK.program.stages[0]
REMINDER = format_sentence(STAGE)


def junk_proposer() -> FakeLM:
    """A proposer as weak as the task model: answers a problem instead of instructing."""
    return FakeLM(lambda messages: "42", model="fake/junk")


def format_last_context() -> SearchContext:
    """A task model right only with the format sentence last in the user turn, a proposer
    that writes only junk, 160 metric calls."""
    data = dataset(n_train=12, n_val=12)
    return make_ctx(
        data,
        format_last_lm(gold_table(data), REMINDER or ""),
        junk_proposer(),
        seed=1,
        budget=BudgetConfig(metric_calls=160),
    )


async def test_a_layout_lifts_when_every_proposal_is_junk() -> None:
    ctx = format_last_context()
    settings = MiproSettings(num_trials=6, minibatch_size=6, full_eval_every=2)

    outcome, _ = await run_recorded(settings, ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    best = ctx.candidates[state.best_candidate_id]
    # the race promotes the first perfect layout: the reminder, or the restated answer
    layout = StageLayout.of(best.components, "solve")
    assert layout.reminder == REMINDER or layout.answer == "restate"
    # the planned 6 trials were a floor: the budget paid for more
    assert state.trials_done > 6
    assert ctx.budget.usage.metric_calls <= 160


async def test_the_first_trial_is_the_seed_with_its_answer_restated() -> None:
    data = dataset(n_train=12, n_val=12)
    ctx = make_ctx(
        data,
        boxed_reasoner_lm(gold_table(data), REMINDER or ""),
        junk_proposer(),
        seed=1,
        budget=BudgetConfig(metric_calls=160),
    )
    outcome, _ = await run_recorded(
        MiproSettings(num_trials=4, minibatch_size=6, full_eval_every=2), ctx
    )

    state = outcome.state
    assert isinstance(state, MiproState)
    baseline, first = state.trials[0], state.trials[1]
    assert (baseline.kind, baseline.score) == ("baseline", 0.0)
    assert first.params == {"solve.instruction": 0, "solve.demos": 0, "solve.layout": 1}
    layout = StageLayout.of(ctx.candidates[first.candidate_id].components, "solve")
    assert (layout.answer, layout.reminder) == ("restate", "")
    assert first.score == 1.0
    # the reminder makes this model guess: no trial with it scores
    reminded = [t for t in state.trials if t.params.get("solve.layout") == 2]
    assert reminded
    assert all(t.score == 0.0 for t in reminded)
    assert state.best_val_score == 1.0


BARE = [Demo(inputs={"question": "q"}, output="Answer: 3", source="labeled")]
WORKED = [Demo(inputs={"question": "q"}, output="3 = 1 + 2\nAnswer: 3", source="labeled")]
BOOT = [[Demo(inputs={"question": "r"}, output="2 + 2 = 4\nAnswer: 4", source="bootstrapped")]]


def kinds(sets: list) -> list[str]:  # type: ignore[type-arg]
    return [s.kind for s in sets]


def test_bare_labeled_demos_are_never_a_reasoning_stages_only_set() -> None:
    assert kinds(assemble((), BARE, [], limit=4, reasoning=True)) == ["empty"]
    assert kinds(assemble((), BARE, BOOT, limit=4, reasoning=True)) == [
        "empty",
        "labeled",
        "bootstrapped",
    ]
    assert kinds(assemble((), WORKED, [], limit=4, reasoning=True)) == ["empty", "labeled"]
    assert kinds(assemble((), BARE, [], limit=4, reasoning=False)) == ["empty", "labeled"]


def test_teacher_of_a_reasoning_stage_never_sees_bare_answers() -> None:
    program = PromptProgram(TASK.program)
    seed = program.seed_candidate()
    common = {"format_hint": True, "use_labeled": "always", "reasoning": True}
    reasoning = teacher_candidate(
        seed, program, {"solve": BARE}, reasoning_stages=frozenset({"solve"}), **common
    )
    assert "solve" not in reasoning.demos
    terse = teacher_candidate(seed, program, {"solve": BARE}, **common)
    assert terse.demos["solve"] == tuple(BARE)
    worked = teacher_candidate(
        seed, program, {"solve": WORKED}, reasoning_stages=frozenset({"solve"}), **common
    )
    assert worked.demos["solve"] == tuple(WORKED)


async def test_labeled_demos_show_the_rationale_before_the_answer() -> None:
    program = PromptProgram(TASK.program)
    example = Example(
        id="e", input={"question": "2 + 3?"}, expected=5, meta={"rationale": "( 2.0 + 3.0 )"}
    )
    demos = await labeled_demos(
        program,
        program.stages["solve"],
        [example],
        build_verifier(TASK.verifier),
        limit=1,
        threshold=1.0,
    )
    assert [d.output for d in demos] == ["( 2.0 + 3.0 )\nAnswer: 5"]


async def test_sources_count_trials_and_new_bests() -> None:
    ctx = format_last_context()
    outcome, records = await run_recorded(
        MiproSettings(num_trials=6, minibatch_size=6, full_eval_every=2), ctx
    )

    state = outcome.state
    assert isinstance(state, MiproState)
    sources = state.sources
    assert sum(c.proposed for n, c in sources.items() if n.startswith("layout.")) == (
        state.trials_done
    )
    best = ctx.candidates[state.best_candidate_id]
    layout = best.lineage.details["choices"]["solve"].split("+", 2)[2]
    assert sources[f"layout.{layout}"].accepted >= 1
    assert any(e.kind == "proposal_sources" for r in records for e in r.events)


async def test_the_best_with_unreadable_replies_is_tried_with_the_answer_stage() -> None:
    data = dataset(n_train=4, n_val=6)
    ctx = make_ctx(
        data,
        boxed_reasoner_lm(gold_table(data), REMINDER or ""),
        junk_proposer(),
        budget=BudgetConfig(metric_calls=12),
    )
    best = ctx.add_candidate(ctx.seed_candidate)
    scored = await ctx.evaluate(best, ctx.val, "val")
    assert scored.mean == 0.0  # every reply ends in \boxed{}: unreadable
    state = MiproState(stages=["solve"], best_candidate_id=best.id, best_val_score=0.0)

    await restate_best(ctx, state, number=3)

    assert state.best_val_score == 1.0
    restated = ctx.candidates[state.best_candidate_id]
    assert restated.lineage.parents == (best.id,)
    assert StageLayout.of(restated.components, "solve").answer == "restate"
    assert state.sources["best_with_answer_stage"].accepted == 1
    # once the best reads, there is nothing left to restate: no more metric calls
    spent = ctx.budget.usage.metric_calls
    await restate_best(ctx, state, number=4)
    assert ctx.budget.usage.metric_calls == spent == 12
