"""Bootstrapped replies with the right answer in the wrong format are normalised, never others."""

from __future__ import annotations

from emery.algorithms.mipro.normalise import (
    final_answers,
    normalise_run,
    normalised_reply,
    reasoning_stages,
)
from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.systems.base import ComponentCall
from emery.verifiers.config import VerifierConfig, build_verifier

STAGE = StageConfig(
    name="solve",
    instruction="Solve.",
    messages=[MessageTemplate(template="{question}")],
    parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
)
PROGRAM = PromptProgram(PromptProgramConfig(stages=[STAGE]))
VERIFIER = build_verifier(VerifierConfig(kind="numeric"))
EXAMPLE = Example(id="e1", input={"question": "20 + 2?"}, expected=22)
BOXED = "20 plus 2 is 22.\n\\(\\boxed{22}\\)"


def test_final_answers_most_specific_first() -> None:
    assert final_answers("x = 3, so \\boxed{22} then 7 apples.") == [
        "22",
        "7",
        "x = 3, so \\boxed{22} then 7 apples.",
    ]
    assert final_answers("") == []


async def test_right_answer_in_the_wrong_format_is_normalised() -> None:
    fixed = await normalised_reply(STAGE, BOXED, EXAMPLE, VERIFIER, 1.0)
    assert fixed == (f"{BOXED}\nAnswer: 22", 1.0)


async def test_wrong_answer_is_not_normalised() -> None:
    assert await normalised_reply(STAGE, "It is \\boxed{21}", EXAMPLE, VERIFIER, 1.0) is None


def result(reply: str, *, error: str | None, score: float) -> ExampleResult:
    return ExampleResult(
        candidate_id="c",
        example_id="e1",
        split="train",
        score=score,
        error=error,
        calls=[
            ComponentCall(component="solve", reply=reply, error=error),
            ComponentCall(component="solve:answer", reply="Answer: 22", output="22"),
        ],
    )


async def test_run_is_normalised_and_restate_call_dropped() -> None:
    fixed = await normalise_run(
        PROGRAM, result(BOXED, error="no match", score=0.0), EXAMPLE, VERIFIER, 1.0
    )
    assert fixed is not None
    assert fixed.error is None
    assert fixed.score == 1.0
    assert [c.component for c in fixed.calls] == ["solve"]
    assert fixed.calls[0].reply.endswith("\nAnswer: 22")


async def test_a_run_that_already_passes_needs_no_normalising() -> None:
    ok = result("20 + 2 = 22\nAnswer: 22", error=None, score=1.0)
    assert await normalise_run(PROGRAM, ok, EXAMPLE, VERIFIER, 1.0) is None


LONG_RIGHT = "Twenty and two more make " + "some words " * 10 + "in all: \\boxed{22}"
LONG_RAMBLE = "I am sorry, " + "I cannot say much about this at all, " * 4


async def reasoning(*replies: str) -> list[str]:
    results = [
        ExampleResult(
            candidate_id="c",
            example_id="e1",
            error="no match",
            calls=[ComponentCall(component="solve", reply=reply)],
        )
        for reply in replies
    ]
    return await reasoning_stages(PROGRAM, results, {"e1": EXAMPLE}, VERIFIER)


async def test_long_replies_that_reach_the_gold_are_reasoning() -> None:
    assert await reasoning(LONG_RIGHT, LONG_RAMBLE, LONG_RIGHT) == ["solve"]


async def test_rambling_or_short_replies_are_not() -> None:
    assert await reasoning(LONG_RAMBLE, LONG_RAMBLE) == []
    assert await reasoning("\\boxed{22}", "It is 22.") == []
