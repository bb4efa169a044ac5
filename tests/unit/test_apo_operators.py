"""APO with LM-free edit operators: when every LM edit is rejected, operator children still
give each round candidates, and one of them lifts the score."""

from __future__ import annotations

from events_support import payloads
from fake_models import format_last_lm
from test_apo_support import context, dataset, fenced, program, reflection_lm, run, settings

from emery.algorithms.apo import Apo, ApoState
from emery.algorithms.apo.events import ApoEdit, ApoOperatorChild
from emery.core.events import ProposalSources
from emery.evaluation.budget import BudgetConfig
from emery.systems.formats import format_sentence
from emery.systems.prompt_layout import StageLayout

REMINDER = format_sentence(program().stages["solve"]) or ""


async def test_operator_children_lift_when_every_edit_is_an_answer() -> None:
    data = dataset()
    gold = {str(e.input["question"]): int(e.expected) for e in data}
    ctx = context(reflection_lm(["42"]), data=data, task=format_last_lm(gold, REMINDER))

    outcome, records = await run(ctx, Apo(settings(operator_children=2)))

    state = outcome.state
    assert isinstance(state, ApoState)
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    best = ctx.candidates[state.best_candidate_id]
    assert best.lineage.operation == "operator.format_reminder"
    assert StageLayout.of(best.components, "solve").reminder == REMINDER
    # every LM edit was rejected; the operators gave the rounds their children
    edits = payloads(records, ApoEdit)
    assert edits
    assert not any(e.accepted for e in edits)
    assert state.sources["apo_edit"].proposed == 0
    assert state.sources["apo_edit"].invalid == len(edits)
    assert state.sources["operator.format_reminder"].accepted >= 1
    children = payloads(records, ApoOperatorChild)
    # the answer stage comes first (it can only help) but this model cannot restate
    assert [c.operator for c in children[:2]] == ["answer_stage", "format_reminder"]
    # at most two operator children per parent and round
    per_parent: dict[tuple[int, str], int] = {}
    for child in children:
        key = (child.round, child.parent_id)
        per_parent[key] = per_parent.get(key, 0) + 1
    assert max(per_parent.values()) <= 2
    reported = payloads(records, ProposalSources)
    assert reported
    assert reported[-1].counts == state.sources
    assert all(e.algorithm == "apo" for e in reported)


async def test_without_operator_children_the_same_run_finds_nothing() -> None:
    data = dataset()
    gold = {str(e.input["question"]): int(e.expected) for e in data}
    ctx = context(reflection_lm(["42"]), data=data, task=format_last_lm(gold, REMINDER))

    outcome, _ = await run(ctx, Apo(settings(operator_children=0)))

    assert outcome.state.best_val_score == 0.0
    assert outcome.state.best_candidate_id == outcome.state.seed_candidate_id


async def test_a_budget_too_small_for_every_operator_child_still_pays_for_the_edit() -> None:
    # val 40 (judged whole), budget 100: the baseline leaves 60, enough for the LM child
    # (4 train + 40 val) but not for two operator children as well (124); the round was
    # cut and APO returned the seed without trying anything
    data = dataset(n_train=20, n_val=40)
    ctx = context(
        reflection_lm([fenced("Reply with the number.\nEnd with: Answer: <number>")]),
        data=data,
        budget=BudgetConfig(metric_calls=100),
    )

    outcome, records = await run(ctx, Apo(settings(operator_children=2, val_batch_size=None)))

    assert ctx.budget.usage.metric_calls <= 100
    assert payloads(records, ApoEdit)
    state = outcome.state
    assert isinstance(state, ApoState)
    assert state.best_val_score == 1.0
