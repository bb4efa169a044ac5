"""GEPA accepts a child only on paired evidence: a child that wins its first minibatch by
luck but is worse on average is judged on more examples and rejected."""

from __future__ import annotations

import re
from collections.abc import Sequence

from test_gepa_support import word_problem_context, word_problems

from emery.algorithms.gepa import Gepa, GepaSettings
from emery.algorithms.gepa.events import GepaMinibatchAccepted, GepaMinibatchRejected
from emery.core.models import ChatMessage, Dataset
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM

LUCKY = "Trust your luck."

REFLECTION_ONLY = GepaSettings(
    acceptance="evidence",
    minibatch_size=5,
    operator_every=0,
    operator_fallback=False,
    use_merge=False,
    skip_perfect=False,
)
"""The evidence rule, reflection children only, judged on minibatches of 5 (no operators,
merges or skips)."""


def lucky_task_lm(dataset: Dataset) -> FakeLM:
    """The seed is right when the gold answer is even (about half the time). A child whose
    instruction says ``LUCKY`` is right on the first five questions it is asked (its first
    minibatch) and wrong on every later one: better on the batch, worse on average."""
    gold = {e.input["question"]: int(e.expected) for e in dataset}
    lucky_seen: list[str] = []

    def reply(messages: Sequence[ChatMessage]) -> str:
        instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
        question = messages[-1]["content"]
        answer = gold[question]
        if LUCKY in instruction:
            if question not in lucky_seen:
                lucky_seen.append(question)
            right = lucky_seen.index(question) < 5
        else:
            right = answer % 2 == 0
        return f"Answer: {answer if right else answer + 1}"

    return FakeLM(reply, model="fake/lucky-task")


def lucky_reflection_lm() -> FakeLM:
    def reply(messages: Sequence[ChatMessage]) -> str:
        current = re.findall(r"```[a-z]*\n?(.*?)```", messages[0]["content"], re.DOTALL)[0]
        return f"```\n{current.strip()} {LUCKY}\n```"

    return FakeLM(reply, model="fake/lucky-reflection")


async def test_a_child_lucky_on_its_first_five_examples_is_not_accepted() -> None:
    dataset = word_problems(n_train=40, n_val=10)
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=200),
        task=lucky_task_lm(dataset),
        reflection=lucky_reflection_lm(),
    )
    gepa = Gepa(REFLECTION_ONLY)
    state = await gepa.start(ctx)
    state = await gepa.step(ctx, state)

    child = next(c for c in ctx.candidates.values() if LUCKY in str(c.components))
    details = child.lineage.details
    before, after = details["minibatch_before"], details["minibatch_after"]
    assert sum(after[:5]) > sum(before[:5]), "the child wins its first minibatch"
    assert sum(after) < sum(before), "and is worse on all it was judged on"
    assert details["accepted"] is False
    evidence = details["evidence"]
    assert evidence["n"] > 5, "five examples could not decide: more were scored"
    assert evidence["verdict"] != "better"
    assert state.counters.accepted == 0
    assert state.counters.rejected == 1
    assert [entry.id for entry in state.pool] == [state.seed_candidate_id]
    kinds = [event.kind for event in ctx.log.events]
    assert GepaMinibatchAccepted.kind not in kinds
    rejected = next(e for e in ctx.log.events if e.kind == GepaMinibatchRejected.kind)
    verdict = rejected.payload_as(GepaMinibatchRejected)
    assert verdict.evidence is not None
    assert verdict.evidence.n == evidence["n"]
