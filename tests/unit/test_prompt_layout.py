"""Stage layouts: where the instruction, demos and a format reminder sit, and the answer stage."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from emery.core.models import Candidate, ChatMessage, Demo, Example
from emery.lm import FakeLM
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    RunContext,
    StageConfig,
)
from emery.systems.prompt_layout import StageLayout, is_choice_component, with_layout

REMINDER = "End your reply with a final line of the form 'Answer: <number>'."


def program() -> PromptProgram:
    return PromptProgram(
        PromptProgramConfig(
            stages=[
                StageConfig(
                    name="solve",
                    instruction="Solve the problem.",
                    messages=[MessageTemplate(template="{question}")],
                    parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
                )
            ]
        )
    )


DEMO = Demo(inputs={"question": "1+1?"}, output="1+1=2\nAnswer: 2")


def render(layout: StageLayout, demos: tuple[Demo, ...] = (DEMO,)) -> list[ChatMessage]:
    p = program()
    return p.messages(p.stages["solve"], "Solve the problem.", demos, {"question": "2+3?"}, layout)


def test_default_layout_is_the_classic_chat() -> None:
    assert render(StageLayout()) == [
        {"role": "system", "content": "Solve the problem."},
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "1+1=2\nAnswer: 2"},
        {"role": "user", "content": "2+3?"},
    ]


def test_instruction_after_input_and_reminder_last() -> None:
    chat = render(StageLayout(placement="user_after", reminder=REMINDER), demos=())
    assert chat == [{"role": "user", "content": f"2+3?\n\nSolve the problem.\n\n{REMINDER}"}]


def test_instruction_before_input_with_inline_demos() -> None:
    chat = render(StageLayout(placement="user_before", demos="inline"))
    assert len(chat) == 1
    content = chat[0]["content"]
    assert content.startswith("Solve the problem.\n\nExample 1:\n1+1?\nReply:\n1+1=2\nAnswer: 2")
    assert content.endswith("Now the real one:\n\n2+3?")


def test_layout_round_trips_through_choice_components() -> None:
    layout = StageLayout(placement="user_after", reminder=REMINDER, answer="restate")
    components = with_layout({"solve": "x"}, "solve", layout)
    assert set(components) == {"solve", "solve:placement", "solve:reminder", "solve:answer"}
    assert all(is_choice_component(n) for n in components if n != "solve")
    assert StageLayout.of(components, "solve") == layout
    assert with_layout(components, "solve", StageLayout()) == {"solve": "x"}


def responder(messages: Sequence[ChatMessage]) -> str:
    if messages[0]["content"].startswith("Below is a worked reply"):
        return "Answer: 5"
    return "2 plus 3 is \\(\\boxed{5}\\)"


async def run(components: dict[str, str]) -> tuple[object, int, str | None]:
    lm = FakeLM(responder)
    ctx = RunContext(lm=lm, example=Example(id="e", input={"question": "2+3?"}))
    result = await program().run(Candidate(components=components), ctx)
    return result.output, len(result.calls), result.error


async def test_answer_stage_restates_an_unreadable_reply() -> None:
    output, calls, error = await run({"solve": "Solve.", "solve:answer": "restate"})
    assert (output, calls, error) == ("5", 2, None)


async def test_without_answer_stage_the_same_reply_fails() -> None:
    output, calls, error = await run({"solve": "Solve."})
    assert output is None
    assert calls == 1
    assert error is not None
    assert "must match the pattern" in error


async def test_a_restatement_that_cannot_be_read_fails_on_the_restating_call() -> None:
    lm = FakeLM(lambda messages: "no number here")
    ctx = RunContext(lm=lm, example=Example(id="e", input={"question": "2+3?"}))
    candidate = Candidate(components={"solve": "Solve.", "solve:answer": "restate"})
    result = await program().run(candidate, ctx)
    assert result.error is not None
    assert "restated answer" in result.error
    first, restated = result.calls
    assert first.error is None
    assert restated.error is not None


def test_unknown_layout_value_is_refused() -> None:
    with pytest.raises(ValueError, match="placement"):
        StageLayout.of({"solve:placement": "sideways"}, "solve")


def test_reminder_placeholders_are_filled_and_checked() -> None:
    p = program()
    chat = p.messages(
        p.stages["solve"], "", (), {"question": "2+3?"}, StageLayout(reminder="Re: {question}")
    )
    assert chat[-1]["content"] == "2+3?\n\nRe: 2+3?"
    from emery.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"placeholder \{labels\}"):
        p.check_candidate(
            Candidate(components={"solve": "x", "solve:reminder": "One of {labels}."}),
            {"question"},
        )
