"""The stages of a prompt program as configured: ``[system] kind = "prompt_program"``.

Config models only (nothing runs here), shared by the prompt program that runs them
(``prompt_program``), the graph that shows its llm nodes as stages, and the algorithms
that edit stages through the ``StagedPrompts`` capability (``capabilities``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from emery.core.models import Demo
from emery.core.settings import Settings
from emery.systems.parsers import ParserConfig
from emery.systems.templates import placeholders


class MessageTemplate(Settings):
    """One message of a stage; ``template`` may use ``{field}`` placeholders."""

    role: Literal["user", "assistant", "system"] = "user"
    template: str


class StageConfig(Settings):
    """One LM call: instruction (the optimizable component), messages, parser, output field."""

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


class PromptProgramConfig(Settings):
    """``[system]`` for ``kind = "prompt_program"``."""

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
