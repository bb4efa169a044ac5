"""A child that only turns the answer stage on takes its parent's readable runs
(``algorithms.restate_sharing``): it is run, and charged, only where the parent's reply
could not be read."""

from __future__ import annotations

from collections.abc import Sequence

from test_mipro_support import dataset, events_of, gold_table, make_ctx, proposer_lm, run_recorded

from emery.algorithms.base import SearchContext
from emery.algorithms.mipro import MiproSettings
from emery.algorithms.mipro.events import MiproTrial
from emery.algorithms.operators import apply_operator
from emery.algorithms.restate_sharing import restates_only
from emery.core.events import CandidateEvaluated
from emery.core.models import Candidate, ChatMessage, Dataset, Lineage
from emery.evaluation.eval_result import EvalResult
from emery.lm import FakeLM
from emery.systems.capabilities import StagedPrompts

WORKED = "Worked reply:"


def half_unreadable_lm(gold: dict[str, int]) -> FakeLM:
    """Reads 'Answer: N' on even answers; on odd ones writes a sentence no parser reads,
    which the answer stage restates right."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        if content.startswith(WORKED):
            return f"Answer: {content.rsplit('it is ', 1)[1].split('.')[0]}"
        answer = gold[content]
        return f"Answer: {answer}" if answer % 2 == 0 else f"I think it is {answer}."

    return FakeLM(reply, model="fake/half-unreadable")


async def seed_and_its_restated_child() -> tuple[SearchContext, Dataset, EvalResult, Candidate]:
    """A context whose seed is scored on val (half its replies unreadable), the seed's
    val results and its answer-stage child (not yet added)."""
    data = dataset(n_train=4, n_val=12)
    ctx = make_ctx(data, half_unreadable_lm(gold_table(data)), proposer_lm())
    program = ctx.system
    assert isinstance(program, StagedPrompts)
    seed = ctx.add_candidate(ctx.seed_candidate)
    before = await ctx.evaluate(seed, data.val, "val")
    child = apply_operator("answer_stage", seed, program, "solve", iteration=1)
    assert child is not None
    return ctx, data, before, child


async def test_a_child_that_only_restates_runs_where_its_parent_was_unreadable() -> None:
    ctx, data, before, child = await seed_and_its_restated_child()
    seed = ctx.seed_candidate
    unreadable = [r.example_id for r in before.results if r.unreadable is not None]
    assert 0 < len(unreadable) < len(data.val)
    assert restates_only(child, seed)
    child = ctx.add_candidate(child)
    paid = ctx.budget.usage.metric_calls
    after = await ctx.evaluate(child, data.val, "val")

    assert ctx.budget.usage.metric_calls - paid == len(unreadable), "only those were run"
    assert after.mean == 1.0, "the answer stage read every unreadable reply"
    for mine, theirs in zip(after.results, before.results, strict=True):
        if theirs.example_id not in unreadable:  # the parent's run, stored as the child's
            assert (mine.candidate_id, mine.output) == (child.id, theirs.output)
            assert mine.rollout_id == theirs.rollout_id
    stored = {r.example_id for r in ctx.evaluations.new_results if r.candidate_id == child.id}
    assert stored == {e.id for e in data.val}, "shared results are stored with new runs"


async def test_a_child_that_changes_anything_else_runs_everywhere() -> None:
    ctx, data, _, restated = await seed_and_its_restated_child()
    seed = ctx.seed_candidate
    reworded = restated.derive(
        components={**restated.components, "solve": "Solve it. End with 'Answer: N'."},
        lineage=Lineage(parents=(seed.id,), generation=1, operation="test"),
    )
    assert not restates_only(reworded, seed)
    assert not restates_only(seed, seed), "no change is not a restating child"
    assert not restates_only(seed, restated), "turning the answer stage off is a change"

    paid = ctx.budget.usage.metric_calls
    await ctx.evaluate(ctx.add_candidate(reworded), data.val, "val")
    assert ctx.budget.usage.metric_calls - paid == len(data.val)


async def test_mipros_first_trial_costs_nothing_where_the_seeds_replies_all_parse() -> None:
    data = dataset(n_train=8, n_val=12)
    gold = gold_table(data)

    def reply(messages: Sequence[ChatMessage]) -> str:
        return f"Answer: {gold[messages[-1]['content']]}"

    ctx = make_ctx(data, FakeLM(reply, model="fake/readable"), proposer_lm())
    settings = MiproSettings(num_trials=1, num_demo_sets=1, format_hint_instruction=False)
    _, records = await run_recorded(settings, ctx)

    (trial,) = events_of(records, MiproTrial.kind)
    assert trial["params"]["solve.layout"] == 1, "the seed's repair: the answer stage"
    assert trial["n"] == len(data.val)
    scored = [
        e
        for e in events_of(records, CandidateEvaluated.kind)
        if e["candidate_id"] == trial["candidate_id"]
    ]
    assert scored, "scored chunk by chunk"
    assert all(e["new_rollouts"] == 0 for e in scored), "every run was the seed's"
