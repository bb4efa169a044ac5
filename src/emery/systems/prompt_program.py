"""The default system: ordered LM stages with templated messages, parsers and few-shot demos."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Candidate, ChatMessage, Demo
from emery.systems.base import ComponentCall, RunContext, SystemRun
from emery.systems.parsers import ParseError, ParserConfig
from emery.systems.registry import SystemKind
from emery.systems.templates import MissingFieldError, placeholders, render


class MessageTemplate(BaseModel):
    """One message of a stage; ``template`` may use ``{field}`` placeholders."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system"] = "user"
    template: str


class StageConfig(BaseModel):
    """One LM call: instruction (the optimizable component), messages, parser, output field."""

    model_config = ConfigDict(extra="forbid")

    name: str
    instruction: str = ""
    messages: list[MessageTemplate] = Field(min_length=1)
    parser: ParserConfig = ParserConfig()
    output: str | None = None
    demos: list[Demo] = Field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"stage name {name!r} must be an identifier (letters, digits, _)")
        return name

    @property
    def output_field(self) -> str:
        return self.output or self.name

    def reads(self, instruction: str) -> set[str]:
        """The fields this stage reads under ``instruction``."""
        fields = placeholders(instruction)
        for message in self.messages:
            fields |= placeholders(message.template)
        return fields


class PromptProgramConfig(BaseModel):
    """``[system]`` for ``kind = "prompt_program"``."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["prompt_program"] = "prompt_program"
    name: str = "program"
    stages: list[StageConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> PromptProgramConfig:
        names = [stage.name for stage in self.stages]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"stage names must be unique; repeated: {', '.join(duplicates)}")
        return self


class PromptProgram:
    """Runs stages in order; each stage's instruction is a component named after the stage."""

    def __init__(self, config: PromptProgramConfig) -> None:
        self.config = config
        self.name = config.name
        self.stages = {stage.name: stage for stage in config.stages}

    def seed_candidate(self) -> Candidate:
        return Candidate(
            components={stage.name: stage.instruction for stage in self.config.stages},
            demos={stage.name: tuple(stage.demos) for stage in self.config.stages if stage.demos},
        )

    def version(self) -> str:
        shape = self.config.model_dump(exclude={"stages": {"__all__": {"instruction", "demos"}}})
        return content_hash(shape)

    def check_inputs(self, fields: set[str]) -> None:
        self.check_candidate(self.seed_candidate(), fields)

    def check_candidate(self, candidate: Candidate, fields: set[str]) -> None:
        """Raise ConfigError naming the first placeholder no input or earlier stage provides."""
        available = set(fields)
        for stage in self.config.stages:
            instruction = candidate.components.get(stage.name, stage.instruction)
            missing = sorted(stage.reads(instruction) - available)
            if missing:
                raise ConfigError(
                    f"stage {stage.name!r}: placeholder {{{missing[0]}}} is not an input field"
                    f" (available: {', '.join(sorted(available)) or 'none'})"
                )
            available.add(stage.output_field)

    def stage_inputs(self, stage: StageConfig, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The fields a stage's message templates read, as a demo would record them."""
        read = set().union(*(placeholders(m.template) for m in stage.messages))
        return {name: fields[name] for name in sorted(read) if name in fields}

    def messages(
        self,
        stage: StageConfig,
        instruction: str,
        demos: tuple[Demo, ...],
        fields: Mapping[str, Any],
    ) -> list[ChatMessage]:
        """The chat a stage sends: instruction, demos as message pairs, then its templates."""
        chat: list[ChatMessage] = []
        if instruction.strip():
            chat.append({"role": "system", "content": render(instruction, fields)})
        for demo in demos:
            chat.extend(self._render_templates(stage, demo.inputs))
            chat.append({"role": "assistant", "content": demo.output})
        chat.extend(self._render_templates(stage, fields))
        return chat

    @staticmethod
    def _render_templates(stage: StageConfig, fields: Mapping[str, Any]) -> list[ChatMessage]:
        return [
            {"role": message.role, "content": render(message.template, fields)}
            for message in stage.messages
        ]

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        fields: dict[str, Any] = dict(ctx.example.input)
        calls: list[ComponentCall] = []
        output: Any = None
        for stage in self.config.stages:
            call = ComponentCall(component=stage.name, inputs=self.stage_inputs(stage, fields))
            calls.append(call)
            try:
                call.messages = self.messages(
                    stage,
                    candidate.components.get(stage.name, stage.instruction),
                    candidate.demos.get(stage.name, ()),
                    fields,
                )
            except MissingFieldError as exc:
                call.error = str(exc)
                return SystemRun(calls=calls, error=f"stage {stage.name!r}: {exc}")
            completion = await ctx.lm.complete(
                call.messages, temperature=stage.temperature, max_tokens=stage.max_tokens
            )
            call.reply = completion.text
            try:
                output = stage.parser.parse(completion.text)
            except ParseError as exc:
                call.error = str(exc)
                return SystemRun(calls=calls, error=f"stage {stage.name!r}: {exc}")
            call.output = output
            fields[stage.output_field] = output
        return SystemRun(output=output, calls=calls)


KIND = SystemKind(name="prompt_program", config=PromptProgramConfig, build=PromptProgram)
