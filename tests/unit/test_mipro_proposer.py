"""Grounded proposals: what the proposer is shown, which replies are kept, deduplication."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from events_support import payloads
from test_mipro_support import (
    PROPOSALS,
    SUMMARY,
    dataset,
    format_and_demos_lm,
    make_ctx,
    proposer_lm,
    run_recorded,
    tip_of,
)

from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.events import MiproInstructionsProposed
from emery.algorithms.mipro.proposer import (
    TIPS,
    StageGrounding,
    near_duplicate,
    proposal_problem,
    propose_stage,
)
from emery.algorithms.mipro.state import DemoSet, InstructionChoice
from emery.algorithms.proposal_checks import extract_proposal
from emery.core.models import ChatMessage, Demo
from emery.lm import FakeLM

SETTINGS = MiproSettings(num_instructions=6, num_trials=2, minibatch_size=5)


async def test_proposer_prompts_carry_summary_program_demos_history_and_tip() -> None:
    data = dataset()
    proposer = proposer_lm()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer)

    outcome, records = await run_recorded(SETTINGS, ctx, stop_after=4)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.phase == "search"
    assert state.dataset_summary == SUMMARY
    assert "Stage 1 'solve': reads question" in state.program_description
    assert "'Answer the question.'" in state.program_description
    assert "Answer:" in state.program_description  # the required format
    summary_calls = [c for c in proposer.calls if "List up to four" in c[-1]["content"]]
    assert summary_calls  # the summary was written from train examples
    assert any(e.input["question"] in summary_calls[0][-1]["content"] for e in data.train)
    proposal_prompts = [
        c[-1]["content"] for c in proposer.calls if "Write a new instruction" in c[-1]["content"]
    ]
    assert proposal_prompts
    for prompt in proposal_prompts:
        assert SUMMARY in prompt
        assert state.program_description in prompt
        assert "- 'Answer the question.' (validation score 0.00)" in prompt
        assert "Examples of this stage replying correctly:" in prompt
        tip = tip_of(prompt)
        if tip != "none":
            assert f"Tip: {TIPS[tip]}" in prompt
    choices = state.instructions["solve"]
    assert choices[0].text == "Answer the question."
    assert choices[0].source == "original"
    assert choices[1].source == "format_hint"
    assert "Answer: <number>" in choices[1].text
    proposed = [c for c in choices if c.source == "proposed"]
    assert proposed
    for choice in proposed:
        assert choice.text == PROPOSALS[choice.tip or "none"]
    assert payloads(records, MiproInstructionsProposed)[0].stage == "solve"


def grounding() -> StageGrounding:
    return StageGrounding(
        stage="solve",
        reads=["question"],
        format="the reply must end with 'Answer: <number>'",
        dataset_summary="Word problems.",
        program_description="One stage.",
        baseline_score=0.1,
    )


async def test_answers_copies_and_near_duplicates_are_rejected() -> None:
    question = "Ava has 12 apples and gets 5 more. How many apples does Ava have now?"
    replies = [
        "17",
        f"Sure, here is the new instruction: {question} The answer is 17.",
        "Answer the question.",
        "Answer the question!",
        "3. 'Answer the question!!' (not scored yet)",
        "Solve the problem step by step and end with 'Answer: <number>'.",
        "Solve the problem step by step and end with 'Answer: <number>'!!",
        "Answer using the {context} field.",
        "Dataset summary: Word problems. Program description: One stage.",
        "Think about each quantity, then give the total on the last line.",
    ]
    proposer = FakeLM(replies)
    demos = [Demo(inputs={"question": question}, output="Answer: 17")]

    outcome = await propose_stage(
        proposer,
        grounding(),
        [InstructionChoice(text="Answer the question.", source="original")],
        [DemoSet(kind="empty"), DemoSet(kind="labeled", demos=demos)],
        [question],
        random.Random(0),
        wanted=3,
        attempts=10,
        use_tips=True,
        max_tokens=100,
        temperature=None,
    )

    assert [c.text for c in outcome.choices] == [
        "Answer the question.",
        "Solve the problem step by step and end with 'Answer: <number>'.",
        "Think about each quantity, then give the total on the last line.",
    ]
    reasons = [r.reason for r in outcome.rejected]
    assert reasons == [
        "too short (2 characters)",
        "copies a training example",
        "unchanged",
        "near-duplicate of choice 1",
        "near-duplicate of choice 1",
        "near-duplicate of choice 2",
        "invented placeholder {context}",
        "echoes the proposer prompt",
    ]
    assert outcome.calls == 10


async def test_attempts_bound_the_proposer_calls() -> None:
    proposer = FakeLM(lambda messages: "42")

    outcome = await propose_stage(
        proposer,
        grounding(),
        [InstructionChoice(text="Answer the question.", source="original")],
        [],
        [],
        random.Random(1),
        wanted=5,
        attempts=3,
        use_tips=False,
        max_tokens=100,
        temperature=None,
    )

    # three calls, all rejected, then the retry round: a call per missing choice, at most 3
    assert len(proposer.calls) == outcome.calls == 6
    assert outcome.retry_calls == 3
    assert len(outcome.choices) == 1
    assert {r.reason for r in outcome.rejected} == {"too short (2 characters)"}
    assert outcome.reasons() == {"too short": 6}
    prompts: Sequence[list[ChatMessage]] = proposer.calls
    assert all("Tip:" not in p[-1]["content"] for p in prompts)


def test_near_duplicate_and_problem_checks() -> None:
    assert near_duplicate("Solve it step by step.", ["solve it, step by step"]) == 0
    assert near_duplicate("Classify the message.", ["Solve it step by step."]) is None
    assert proposal_problem("Explain and then solve.", "Solve.", ["Solve."], []) is None


def test_a_proposal_that_echoes_the_request_or_a_tip_is_rejected() -> None:
    echo = (
        "Write a new instruction for stage 'solve' that will score higher than the ones tried"
        " so far. Do not repeat them and do not solve an example."
    )
    assert proposal_problem(echo, "Answer.", ["Answer."], [], "", "solve") == (
        "echoes the proposer prompt"
    )
    assert proposal_problem(TIPS["describe"], "Answer.", ["Answer."], [], "", "solve") == (
        "echoes the proposer prompt"
    )
    persona = "You are a careful tutor. Solve the problem, then end with 'Answer: <number>'."
    assert proposal_problem(persona, "Answer.", ["Answer."], [], "", "solve") is None


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("New instruction: 'Solve it, then give the number.'", "Solve it, then give the number."),
        ("Instruction: Solve it carefully.", "Solve it carefully."),
        ("Here is the improved prompt:\nSolve it.", "Solve it."),
        ("Prompt engineering matters: solve it.", "Prompt engineering matters: solve it."),
    ],
)
def test_labels_and_quotes_around_a_proposal_are_removed(reply: str, text: str) -> None:
    assert extract_proposal(reply) == text


class SeedRecorder(FakeLM):
    """A FakeLM that also records the ``seed`` each call carried."""

    def __init__(self) -> None:
        super().__init__(lambda messages: "42")
        self.seeds: list[Any] = []

    async def complete(self, messages: Any, **params: Any) -> Any:
        self.seeds.append(params.get("seed"))
        return await super().complete(messages, **params)


async def test_seeded_proposer_calls_repeat_from_run_to_run_and_differ_between_calls() -> None:
    async def seeds(seed_calls: bool) -> list[Any]:
        proposer = SeedRecorder()
        await propose_stage(
            proposer,
            grounding(),
            [InstructionChoice(text="Answer the question.", source="original")],
            [],
            [],
            random.Random(1),
            wanted=5,
            attempts=3,
            use_tips=True,
            max_tokens=100,
            temperature=0.7,
            seed_calls=seed_calls,
        )
        return proposer.seeds

    first, again = await seeds(True), await seeds(True)
    assert first == again
    assert len(set(first)) == 6  # three calls and the retry round's three
    assert all(isinstance(seed, int) and 0 <= seed < 2**31 for seed in first)
    assert await seeds(False) == [None] * 6


async def test_a_reviewers_rejection_reasons_reach_the_proposal_prompt() -> None:
    data = dataset()
    proposer = proposer_lm()
    ctx = make_ctx(data, format_and_demos_lm(data), proposer)
    reason = "too long: keep the instruction to one sentence"
    ctx.reviewer_notes.append(reason)

    await run_recorded(SETTINGS, ctx, stop_after=4)

    proposal_prompts = [
        c[-1]["content"] for c in proposer.calls if "Write a new instruction" in c[-1]["content"]
    ]
    assert proposal_prompts
    for prompt in proposal_prompts:
        assert f"rejected earlier proposals, saying:\n- {reason}" in prompt
        # before the request, which stays last: a weak proposer continues the last list
        assert prompt.index(reason) < prompt.index("Write a new instruction")
