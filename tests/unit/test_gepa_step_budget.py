"""A GEPA step whose children leave less than val for the first one shown better keeps its
verdicts: that child is rejected for the budget instead of the step failing whole (which
dropped every verdict the step had paid for and ended the search early)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from test_gepa_support import events, run_gepa, word_problem_context, word_problems

from emery.algorithms.gepa import GepaState
from emery.core.models import ChatMessage, Dataset
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM

UNPAID = "shown better, but the budget cannot also score it on val"


def better_child_lm(dataset: Dataset) -> FakeLM:
    """Wrong under the seed's instruction, right under any other: every child is shown
    better than its parent on its minibatch."""
    gold = {e.input["question"]: int(e.expected) for e in dataset}
    seed: list[str] = []

    def reply(messages: Sequence[ChatMessage]) -> str:
        instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
        seed[:] = seed or [instruction]  # the seed is the first candidate scored
        answer = gold[messages[-1]["content"]]
        return f"Answer: {answer + 1 if instruction == seed[0] else answer}"

    return FakeLM(reply, model="fake/better-child")


def numbered_reflection_lm() -> FakeLM:
    """A new rule each call, so the children of one step differ."""
    calls = {"n": 0}

    def reply(messages: Sequence[ChatMessage]) -> str:
        calls["n"] += 1
        return f"```\nAnswer the question. Rule {calls['n']}.\n```"

    return FakeLM(reply, model="fake/numbered")


@pytest.mark.parametrize(
    "settings",
    [
        {"acceptance": "two_stage"},  # pipelined by default; this step cannot overlap
        {"acceptance": "two_stage", "pipelined_steps": False},
        {"acceptance": "evidence"},
    ],
)
async def test_a_step_that_cannot_pay_val_for_its_first_accepted_child_keeps_its_verdicts(
    settings: dict[str, Any],
) -> None:
    dataset = word_problems(n_train=30, n_val=10)
    # 10 for the seed on val; 30 left: four children (6 each: parent and child on a
    # minibatch of 3) leave 6, less than the 10 val examples the first child shown better
    # needs. Before, scoring it on val cut the step short: no verdict, 10 calls, the end.
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=40),
        task=better_child_lm(dataset),
        reflection=numbered_reflection_lm(),
    )
    base = {
        "proposals_per_step": 4,
        "minibatch_size": 3,
        "operator_every": 0,
        "operator_fallback": False,
        "use_merge": False,
    }
    outcome, records = await run_gepa(ctx, base | settings)
    state = outcome.state
    assert isinstance(state, GepaState)
    rejected = events(records, "gepa.minibatch_rejected")
    assert [e.data["reason"] for e in rejected] == [UNPAID] * 4
    assert not events(records, "gepa.minibatch_accepted")
    assert state.counters.proposals == state.counters.rejected == 4
    assert state.pending is None
    assert [entry.id for entry in state.pool] == [state.seed_candidate_id]
    assert ctx.budget.usage.metric_calls == records[-1].budget.metric_calls == 10 + 4 * 6
    assert outcome.reason.startswith("metric_calls: the 6 left cannot score a new candidate")
