"""JSON mode: a stage whose parser reads a JSON object sends ``response_format`` to a
model that takes it, and to no other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from emery.core.models import ChatMessage, Example
from emery.lm.base import Completion
from emery.lm.json_mode import JSON_OBJECT, json_mode_params
from emery.lm.wrapper import LMWrapper
from emery.systems import ParserConfig
from emery.systems.base import RunContext
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)


class RecordingLM:
    """Answers a JSON object; records each call's keyword arguments."""

    def __init__(self, *, json_mode: bool | None) -> None:
        if json_mode is not None:
            self.json_mode = json_mode
        self.model = "recording"
        self.params: list[dict[str, Any]] = []

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.params.append(params)
        return Completion(text='{"people": "3"}')


def program(instruction: str, parser: str = "json_object") -> PromptProgram:
    stage = StageConfig(
        name="extract",
        instruction=instruction,
        messages=[MessageTemplate(template="{text}")],
        parser=ParserConfig(kind=parser),
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


async def sent(system: PromptProgram, lm: RecordingLM) -> dict[str, Any]:
    """The keyword arguments of the one call a run makes (through a wrapper, as in a job)."""
    example = Example(id="e", input={"text": "a table for 3"})
    run = await system.run(system.seed_candidate(), RunContext(lm=LMWrapper(lm), example=example))
    assert run.error is None
    (params,) = lm.params
    return params


@pytest.mark.parametrize(
    ("json_mode", "instruction", "parser", "expected"),
    [
        (True, "Extract the slots as a JSON object.", "json_object", JSON_OBJECT),
        (False, "Extract the slots as a JSON object.", "json_object", None),  # rejected it
        (None, "Extract the slots as a JSON object.", "json_object", None),  # a local model
        (True, "Extract the slots.", "json_object", None),  # OpenAI would refuse it
        (True, "Extract the slots as a JSON object.", "raw", None),
    ],
)
async def test_a_json_object_stage_asks_a_model_that_takes_it(
    json_mode: bool | None, instruction: str, parser: str, expected: dict[str, Any] | None
) -> None:
    lm = RecordingLM(json_mode=json_mode)
    params = await sent(program(instruction, parser), lm)
    assert params.get("response_format") == expected


def test_any_message_that_says_json_is_enough() -> None:
    lm = LMWrapper(RecordingLM(json_mode=True))
    assert json_mode_params(lm, [{"role": "user", "content": "Extract the slots."}]) == {}
    said: list[ChatMessage] = [
        {"role": "system", "content": "Reply in json."},
        {"role": "user", "content": "a table for 3"},
    ]
    assert json_mode_params(lm, said) == {"response_format": JSON_OBJECT}
