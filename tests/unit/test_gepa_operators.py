"""GEPA with LM-free edit operators: a reflection model that only answers problems still
gives a lift, found by an operator; operators also run on their schedule; merges keep a
prompt program's layout choices."""

from __future__ import annotations

import random

import pytest
from events_support import payloads
from fake_models import format_last_lm
from test_gepa_support import run_gepa, word_problem_context, word_problems

from emery.algorithms.gepa import GepaState, PoolEntry
from emery.algorithms.gepa.events import GepaMinibatchAccepted
from emery.algorithms.gepa.merge import merged_components, merged_demos
from emery.core.events import ProposalSources
from emery.core.models import Candidate, Dataset, Demo, Lineage
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.systems.formats import format_sentence
from emery.systems.prompt_layout import StageLayout

REMINDER = format_sentence(builtin_task("word_problems").program.stages[0]) or ""
ANSWERS_ONLY = "Answer: Jamal has 46 coins left."

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def gold(dataset: Dataset) -> dict[str, int]:
    return {e.input["question"]: int(e.expected) for e in dataset}


async def test_operators_lift_when_every_reflection_is_an_answer() -> None:
    dataset = word_problems()
    reflection = FakeLM(lambda messages: ANSWERS_ONLY, model="fake/answers-only")
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=reflection,
        task=format_last_lm(gold(dataset), REMINDER),
    )

    outcome, records = await run_gepa(ctx, {"operator_every": 0})

    state = outcome.state
    assert isinstance(state, GepaState)
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    best = ctx.candidates[state.best_candidate_id]
    assert best.lineage.operation == "operator.format_reminder"
    assert StageLayout.of(best.components, "solve").reminder == REMINDER
    # the reflection made no child; the fallback operator's child was accepted
    sources = state.sources
    assert sources["reflection"].proposed == 0
    assert sources["reflection"].invalid == state.counters.reflections > 0
    assert sources["operator.format_reminder"].accepted == 1
    accepted = payloads(records, GepaMinibatchAccepted)
    assert [e.source for e in accepted] == ["operator.format_reminder"]
    reported = payloads(records, ProposalSources)
    assert reported
    assert reported[-1].counts == sources
    assert all(e.algorithm == "gepa" for e in reported)


async def test_operators_run_on_their_schedule_beside_a_valid_reflection() -> None:
    dataset = word_problems()
    useless = "```\nAnswer the question carefully, and show your working.\n```"
    reflection = FakeLM(lambda messages: useless, model="fake/useless")
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=reflection,
        task=format_last_lm(gold(dataset), REMINDER),
    )

    outcome, _ = await run_gepa(
        ctx, {"operator_fallback": False, "operator_every": 2, "operator_turns": "schedule"}
    )

    state = outcome.state
    assert isinstance(state, GepaState)
    assert state.best_val_score == 1.0 > (state.baseline_val_score or 0.0)
    assert ctx.candidates[state.best_candidate_id].lineage.operation.startswith("operator.")
    assert state.sources["reflection"].proposed >= 1
    assert state.sources["reflection"].accepted == 0
    assert state.sources["operator.format_reminder"].accepted == 1
    # operators' turns came on iterations 2 and 4: the answer stage (first in order) cannot
    # help a model that cannot restate; the format reminder can
    assert state.pool[1].iteration == 4


async def test_without_operators_the_same_run_finds_nothing() -> None:
    dataset = word_problems()
    reflection = FakeLM(lambda messages: ANSWERS_ONLY, model="fake/answers-only")
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=reflection,
        task=format_last_lm(gold(dataset), REMINDER),
    )

    outcome, _ = await run_gepa(ctx, {"operator_every": 0, "operator_fallback": False})

    assert outcome.state.best_val_score == 0.0
    assert len(outcome.state.pool) == 1


def entry(
    components: dict[str, str],
    score: float,
    parents: list[str] | None = None,
    demos: dict[str, tuple[Demo, ...]] | None = None,
) -> PoolEntry:
    candidate = Candidate(components=components, demos=demos or {}, lineage=Lineage())
    return PoolEntry(candidate=candidate, parents=parents or [], val_score=score)


def test_a_merge_keeps_layout_choices_one_side_added_or_dropped() -> None:
    ancestor = entry({"solve": "Solve it.", "solve:placement": "user_after"}, 0.0)
    first = entry(
        {"solve": "Solve it.", "solve:reminder": REMINDER}, 0.5, [ancestor.id]
    )  # added a reminder, dropped the placement (back to the default)
    second = entry(
        {"solve": "Solve it. Check.", "solve:placement": "user_after"}, 0.4, [ancestor.id]
    )

    texts, taken, one_sided = merged_components(first, second, ancestor, random.Random(0))

    assert texts == {"solve": "Solve it. Check.", "solve:reminder": REMINDER}
    assert taken == {
        "solve": second.id,
        "solve:placement": first.id,
        "solve:reminder": first.id,
    }
    assert one_sided


def test_a_merge_takes_demo_sets_from_the_side_that_changed_them() -> None:
    demos = (Demo(inputs={"q": "1"}, output="Answer: 1"), Demo(inputs={"q": "2"}, output="2"))
    ancestor = entry({"solve": "Solve it."}, 0.0, demos={"solve": demos})
    first = entry({"solve": "Solve it."}, 0.5, [ancestor.id], demos={"solve": demos[:1]})
    second = entry({"solve": "Solve it. Check."}, 0.4, [ancestor.id], demos={"solve": demos})

    merged, taken, one_sided = merged_demos(first, second, ancestor, random.Random(0))

    assert merged == {"solve": demos[:1]}
    assert taken == {"solve": first.id}
    assert one_sided
