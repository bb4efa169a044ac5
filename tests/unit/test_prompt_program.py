"""The default system: staged prompts, demos, parsers, and input checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from emery.core.errors import ConfigError
from emery.core.models import Candidate, ChatMessage, Demo, Example
from emery.lm import FakeLM
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    RunContext,
    StageConfig,
    System,
)


def two_stage_config(**solve_overrides: Any) -> PromptProgramConfig:
    solve: dict[str, Any] = {
        "name": "solve",
        "instruction": "Solve using the plan.",
        "messages": [MessageTemplate(template="Question: {question}\nPlan: {plan}")],
        "parser": ParserConfig(kind="regex", pattern=r"Answer:\s*(\d+)"),
        "output": "answer",
        **solve_overrides,
    }
    return PromptProgramConfig(
        name="plan-solve",
        stages=[
            StageConfig(
                name="plan",
                instruction="Write a one-line plan.",
                messages=[MessageTemplate(template="Question: {question}")],
            ),
            StageConfig(**solve),
        ],
    )


def responder(messages: Sequence[ChatMessage]) -> str:
    last = messages[-1]["content"]
    if last.startswith("Question: ") and "Plan:" not in last:
        return "  add the numbers  "
    return "Reasoning.\nAnswer: 5"


def ctx(lm: FakeLM, **inputs: Any) -> RunContext:
    return RunContext(lm=lm, example=Example(id="e1", input=inputs or {"question": "2+3?"}))


async def test_two_stages_feed_each_other() -> None:
    program = PromptProgram(two_stage_config())
    lm = FakeLM(responder)
    run = await program.run(program.seed_candidate(), ctx(lm))

    assert run.error is None
    assert run.output == "5"
    assert [call.component for call in run.calls] == ["plan", "solve"]
    plan, solve = run.calls
    assert plan.output == "add the numbers"
    assert plan.reply == "  add the numbers  "
    assert plan.inputs == {"question": "2+3?"}
    assert solve.inputs == {"plan": "add the numbers", "question": "2+3?"}
    assert len(lm.calls) == 2
    assert lm.calls[1] == [
        {"role": "system", "content": "Solve using the plan."},
        {"role": "user", "content": "Question: 2+3?\nPlan: add the numbers"},
    ]
    assert solve.messages == lm.calls[1]


async def test_candidate_instructions_replace_the_configured_ones() -> None:
    program = PromptProgram(two_stage_config())
    candidate = Candidate(components={"plan": "Plan carefully for {question}.", "solve": ""})
    lm = FakeLM(responder)
    await program.run(candidate, ctx(lm))
    assert lm.calls[0][0] == {"role": "system", "content": "Plan carefully for 2+3?."}
    # An empty instruction sends no system message.
    assert [m["role"] for m in lm.calls[1]] == ["user"]


async def test_demos_come_as_message_pairs_before_the_real_input() -> None:
    program = PromptProgram(two_stage_config())
    demos = (
        Demo(inputs={"question": "1+1?"}, output="count up"),
        Demo(inputs={"question": "4-2?"}, output="subtract"),
    )
    candidate = program.seed_candidate().derive(
        demos={"plan": demos}, lineage=program.seed_candidate().lineage
    )
    lm = FakeLM(responder)
    await program.run(candidate, ctx(lm))
    assert lm.calls[0] == [
        {"role": "system", "content": "Write a one-line plan."},
        {"role": "user", "content": "Question: 1+1?"},
        {"role": "assistant", "content": "count up"},
        {"role": "user", "content": "Question: 4-2?"},
        {"role": "assistant", "content": "subtract"},
        {"role": "user", "content": "Question: 2+3?"},
    ]
    assert len(lm.calls[1]) == 2


async def test_stage_sampling_parameters_are_passed() -> None:
    seen: list[dict[str, Any]] = []

    class Recorder(FakeLM):
        async def complete(self, messages: Any, **kw: Any) -> Any:
            seen.append(kw)
            return await super().complete(messages, **kw)

    program = PromptProgram(two_stage_config(temperature=0.4, max_tokens=30))
    await program.run(program.seed_candidate(), ctx(Recorder(responder)))
    assert seen[0] == {"temperature": None, "max_tokens": None}
    assert seen[1] == {"temperature": 0.4, "max_tokens": 30}


async def test_parse_error_becomes_the_run_error() -> None:
    program = PromptProgram(two_stage_config())
    lm = FakeLM(lambda _: "no answer here")
    run = await program.run(program.seed_candidate(), ctx(lm))
    assert run.output is None
    assert run.error is not None
    assert run.error.startswith("stage 'solve': the reply must match")
    assert run.calls[-1].error is not None
    assert run.calls[-1].reply == "no answer here"


async def test_missing_placeholder_becomes_the_run_error_without_a_call() -> None:
    program = PromptProgram(two_stage_config())
    lm = FakeLM(responder)
    run = await program.run(program.seed_candidate(), ctx(lm, query="2+3?"))
    assert run.error == (
        "stage 'plan': placeholder {question} is not an input field (available: query)"
    )
    assert lm.calls == []
    assert run.calls[0].error is not None


def test_check_inputs_names_the_missing_placeholder() -> None:
    program = PromptProgram(two_stage_config())
    program.check_inputs({"question"})
    with pytest.raises(ConfigError, match=r"stage 'plan': placeholder \{question\}") as info:
        program.check_inputs({"query"})
    assert "available: query" in str(info.value)


def test_check_candidate_sees_earlier_stage_outputs_and_instructions() -> None:
    program = PromptProgram(two_stage_config())
    # "answer" is only produced by the last stage, so the first one cannot read it.
    bad = Candidate(components={"plan": "Use {answer}.", "solve": "x"})
    with pytest.raises(ConfigError, match=r"placeholder \{answer\}"):
        program.check_candidate(bad, {"question"})
    ok = Candidate(components={"plan": "p", "solve": "Revise {plan} for {question}."})
    program.check_candidate(ok, {"question"})
    reads_later = PromptProgram(two_stage_config(messages=[MessageTemplate(template="{nope}")]))
    with pytest.raises(ConfigError, match=r"stage 'solve': placeholder \{nope\}"):
        reads_later.check_inputs({"question"})


def test_version_ignores_instructions_and_demos_but_not_templates() -> None:
    base = PromptProgram(two_stage_config())
    other_instruction = PromptProgram(two_stage_config(instruction="Something else."))
    with_demos = PromptProgram(
        two_stage_config(demos=[Demo(inputs={"question": "q", "plan": "p"}, output="Answer: 1")])
    )
    other_template = PromptProgram(
        two_stage_config(messages=[MessageTemplate(template="Q: {question} / {plan}")])
    )
    other_parser = PromptProgram(two_stage_config(parser=ParserConfig(kind="last_line")))
    assert base.version() == other_instruction.version() == with_demos.version()
    assert base.version() != other_template.version()
    assert base.version() != other_parser.version()


def test_seed_candidate_is_the_stage_instructions_and_demos() -> None:
    demo = Demo(inputs={"question": "q", "plan": "p"}, output="Answer: 1")
    program = PromptProgram(two_stage_config(demos=[demo]))
    seed = program.seed_candidate()
    assert seed.components == {"plan": "Write a one-line plan.", "solve": "Solve using the plan."}
    assert seed.demos == {"solve": (demo,)}
    assert seed.lineage.operation == "seed"
    assert isinstance(program, System)


def test_config_validation() -> None:
    with pytest.raises(ValidationError, match="must be an identifier"):
        StageConfig(name="bad name", messages=[MessageTemplate(template="x")])
    with pytest.raises(ValidationError):
        StageConfig(name="empty", messages=[])
    stage = StageConfig(name="s", messages=[MessageTemplate(template="{x}")])
    with pytest.raises(ValidationError, match="repeated: s"):
        PromptProgramConfig(stages=[stage, stage])
    with pytest.raises(ValidationError, match="extra"):
        MessageTemplate.model_validate({"template": "x", "rol": "user"})
