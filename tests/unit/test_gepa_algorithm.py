"""GEPA end to end with scripted models: it improves val and test, accepts only real
improvements, records every proposal, and survives unusable reflection replies."""

from __future__ import annotations

import math
from typing import Any

import pytest
from events_support import payloads
from test_gepa_support import (
    FORMAT_RULE,
    RULES,
    events,
    reflection_lm,
    run_gepa,
    task_lm,
    word_problem_context,
    word_problems,
)

from emery.algorithms.gepa import GepaState
from emery.algorithms.gepa.events import (
    GepaMinibatchAccepted,
    GepaMinibatchRejected,
    GepaMinibatchSkipped,
    GepaProposal,
    GepaProposalInvalid,
    GepaReflectiveDataset,
    GepaValEvaluated,
)
from emery.core.errors import ConfigError
from emery.core.events import BestUpdated
from emery.core.models import Candidate
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.evaluator import Evaluator
from emery.lm import FakeLM
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.config import VerifierConfig, build_verifier

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


async def score_on_test(candidate: Candidate) -> float:
    """What the engine does at the end: score a candidate once on test."""
    dataset = word_problems()
    evaluator = Evaluator(
        PromptProgram(builtin_task("word_problems").program),
        build_verifier(VerifierConfig(kind="numeric")),
        task_lm(dataset),
    )
    return (await evaluator.evaluate(candidate, dataset.test, "test")).mean


async def test_gepa_raises_val_and_test_scores() -> None:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    outcome, records = await run_gepa(ctx)
    state = outcome.state
    assert isinstance(state, GepaState)
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    assert outcome.reason == "the best candidate is perfect on val"
    best = ctx.candidates[state.best_candidate_id]
    instruction = best.components["solve"]
    assert FORMAT_RULE in instruction
    assert all(rule in instruction for rule in (RULES["subtract"], RULES["multiply"]))
    seed_test = await score_on_test(ctx.seed_candidate)
    best_test = await score_on_test(best)
    assert seed_test == 0.0
    assert best_test >= 0.6  # test has kinds of problems val lacks
    # Every accepted child improved on its minibatch and was then scored on all of val.
    accepted = payloads(records, GepaMinibatchAccepted)
    assert accepted
    assert all(_after(e) > _before(e) for e in accepted)
    val_scored = {e.candidate_id for e in payloads(records, GepaValEvaluated)}
    assert {e.candidate_id for e in accepted} <= val_scored
    assert [item.id for item in state.pool][1:] == [e.candidate_id for e in accepted]


async def test_rejected_children_never_reach_val() -> None:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    _, records = await run_gepa(ctx, {"acceptance": "evidence"})
    rejected = payloads(records, GepaMinibatchRejected)
    assert rejected, "the scripted run rejects some proposals"
    # rejected: the paired evidence did not show the child better (ahead but undecided,
    # or behind); accepted: it did
    assert all(e.evidence is not None and e.evidence.verdict != "better" for e in rejected)
    accepted = payloads(records, GepaMinibatchAccepted)
    assert accepted
    assert all(e.evidence is not None and e.evidence.verdict == "better" for e in accepted)
    val_ids = {r.candidate_id for rec in records for r in rec.results if r.split == "val"}
    pool_ids = {e.candidate_id for e in payloads(records, GepaValEvaluated)}
    assert val_ids == pool_ids
    for record in records:
        rejected_here = {e.candidate_id for e in payloads([record], GepaMinibatchRejected)}
        val_here = {r.candidate_id for r in record.results if r.split == "val"}
        assert not rejected_here & val_here


async def test_equal_minibatch_scores_are_accepted_only_when_asked() -> None:
    dataset = word_problems()
    strict_ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    _, strict = await run_gepa(strict_ctx)
    ties = [e for e in payloads(strict, GepaMinibatchRejected) if _before(e) == _after(e)]
    assert ties, "the scripted run has a child that ties its parent"
    loose_ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    _, loose = await run_gepa(loose_ctx, {"accept": "improvement_or_equal"})
    assert all(_after(e) < _before(e) for e in payloads(loose, GepaMinibatchRejected))
    assert any(_after(e) == _before(e) for e in payloads(loose, GepaMinibatchAccepted))


def _before(verdict: GepaMinibatchAccepted) -> float:
    assert verdict.before is not None, "a verdict after scoring has the parent's sum"
    return verdict.before


def _after(verdict: GepaMinibatchAccepted) -> float:
    assert verdict.after is not None, "a verdict after scoring has the child's sum"
    return verdict.after


async def test_every_proposal_is_a_candidate_with_its_reflection_recorded() -> None:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    outcome, records = await run_gepa(ctx)
    proposals = payloads(records, GepaProposal)
    stored = {c.id: c for record in records for c in record.candidates}
    # operator children (operator.*) may share a reflected text, with another layout
    reflected = [c for c in stored.values() if not c.lineage.operation.startswith("operator.")]
    texts = {c.components["solve"]: c for c in reflected}
    assert proposals
    for proposal in proposals:
        assert proposal.text is not None
        candidate = texts[proposal.text]
        details = candidate.lineage.details
        assert candidate.lineage.operation == "reflect"
        assert len(candidate.lineage.parents) == 1
        assert details["minibatch_before"]
        assert details["minibatch_after"]
        reflection = details["reflection"]["solve"]
        assert "Answer the question." in reflection["prompt"] or "Answer:" in reflection["prompt"]
        assert proposal.text in reflection["reply"]
    # The state is one JSON-serialisable object.
    state = outcome.state
    again = GepaState.model_validate_json(state.model_dump_json())
    assert again == state
    assert all(not item.candidate.lineage.details for item in state.pool)


async def test_events_describe_each_iteration() -> None:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    _, records = await run_gepa(ctx)
    kinds = {e.kind for e in events(records)}
    assert {
        "baseline_evaluated",
        "gepa.candidate_selected",
        "gepa.minibatch_sampled",
        "gepa.reflective_dataset",
        "gepa.proposal",
        "gepa.minibatch_accepted",
        "gepa.minibatch_rejected",
        "gepa.val_evaluated",
        "frontier_updated",
        "best_updated",
        "candidate_proposed",
        "iteration_completed",
    } <= kinds
    dataset_event = payloads(records, GepaReflectiveDataset)[0]
    assert dataset_event.size == 3
    assert dataset_event.tokens > 0
    best = payloads(records, BestUpdated)
    assert [e.score for e in best] == sorted(e.score for e in best)
    assert best[0].previous_score is None  # the seed is the first best
    assert len({e.score for e in best}) == len(best)  # each update is a strict improvement


async def test_unusable_reflection_replies_are_retried_then_rejected() -> None:
    dataset = word_problems()
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=reflection_lm(broken_every=2),
    )
    outcome, records = await run_gepa(ctx)
    invalid = payloads(records, GepaProposalInvalid)
    assert invalid
    assert all(e.reason == "an answer to an example, not an instruction" for e in invalid)
    assert all(e.attempt == 1 for e in invalid)  # the retry always succeeds here
    assert outcome.state.best_val_score == 1.0
    reflections = [c for r in records for c in r.candidates if c.lineage.operation == "reflect"]
    retried = [
        c for c in reflections if len(c.lineage.details["reflection"]["solve"]["attempts"]) == 2
    ]
    assert retried


@pytest.mark.parametrize("reply", ["", "42", "```\n```", "Answer: 7", "Answer the question."])
async def test_a_reflection_model_that_never_helps_ends_the_search_cleanly(reply: str) -> None:
    dataset = word_problems()
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=FakeLM(lambda messages: reply, model="fake/useless"),
    )
    # the reflection alone: no LM-free operator stands in (test_gepa_operators has that)
    no_operators = {"operator_fallback": False, "operator_every": 0}
    outcome, records = await run_gepa(ctx, {"proposal_attempts": 2, **no_operators})
    state = outcome.state
    assert isinstance(state, GepaState)
    assert state.done
    assert "no new rollout" in str(state.done_reason)
    assert state.counters.proposals == 0
    assert state.counters.invalid_proposals == state.counters.reflections > 0
    assert len(state.pool) == 1
    assert len(payloads(records, GepaProposalInvalid)) == 2 * state.counters.reflections


async def test_perfect_minibatches_are_skipped_without_reflection() -> None:
    dataset = word_problems()
    train_questions = {e.input["question"] for e in dataset.train}
    gold = {e.input["question"]: int(e.expected) for e in dataset}

    def knows_train(messages: Any) -> str:
        question = messages[-1]["content"]
        answer = gold[question] if question in train_questions else gold[question] + 1
        return f"Answer: {answer}"

    reflection = reflection_lm()
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        task=FakeLM(knows_train, model="fake/train-only"),
        reflection=reflection,
    )
    outcome, records = await run_gepa(ctx, {"max_stale_iterations": 4})
    state = outcome.state
    assert isinstance(state, GepaState)
    assert reflection.calls == []
    assert state.counters.skipped_perfect == state.iteration
    assert state.counters.reflections == 0
    skipped = payloads(records, GepaMinibatchSkipped)
    assert len(skipped) == state.iteration
    assert all(e.scores for e in skipped)
    # The first epoch pays for the parent's train runs; then four free iterations end it.
    assert state.iteration == math.ceil(len(dataset.train) / 3) + 4
    assert ctx.budget.usage.metric_calls == len(dataset.val) + len(dataset.train)


async def test_max_iterations_and_component_checks() -> None:
    dataset = word_problems()
    ctx = word_problem_context(dataset, budget=BudgetConfig(metric_calls=300))
    outcome, _ = await run_gepa(ctx, {"max_iterations": 2})
    assert outcome.state.iteration == 2
    assert outcome.reason == "max_iterations: 2 done"
    with pytest.raises(ConfigError, match="unknown component 'nope'"):
        await run_gepa(word_problem_context(dataset), {"components": ["nope"]})
    with pytest.raises(ConfigError, match="train is empty"):
        await run_gepa(word_problem_context(word_problems(n_train=0)))
