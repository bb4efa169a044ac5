"""The default system: ordered LM stages with templated messages, parsers and few-shot demos."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Candidate, ChatMessage, Demo
from emery.lm.json_mode import json_mode_params
from emery.systems.base import ComponentCall, RunContext, RunFailure, SystemRun
from emery.systems.demo_retrieval import nearest_demos
from emery.systems.formats import format_sentence
from emery.systems.parsers import ParseError
from emery.systems.prompt_layout import StageLayout, arrange, choice_name, restate_messages
from emery.systems.registry import SystemKind
from emery.systems.stages import MessageTemplate as MessageTemplate
from emery.systems.stages import PromptProgramConfig as PromptProgramConfig
from emery.systems.stages import StageConfig as StageConfig
from emery.systems.templates import MissingFieldError, placeholders, render


def stage_chat(
    templates: Sequence[MessageTemplate],
    instruction: str,
    demos: Sequence[Demo],
    fields: Mapping[str, Any],
    layout: StageLayout | None = None,
    turn: Sequence[ChatMessage] | None = None,
) -> list[ChatMessage]:
    """The chat of one stage call: ``instruction`` (its ``{field}`` placeholders filled from
    ``fields``), the demos rendered through the stage's message ``templates``, and ``turn``
    (default: the templates rendered with ``fields``), arranged by ``layout``."""
    layout = layout or StageLayout()
    if layout.reminder:
        layout = layout.model_copy(update={"reminder": render(layout.reminder, fields)})
    rendered = render(instruction, fields) if instruction.strip() else ""
    if layout.select == "nearest":
        demos = nearest_demos(demos, template_inputs(templates, fields), layout.shown)
    demo_turns = [(render_templates(templates, demo.inputs), demo) for demo in demos]
    own = render_templates(templates, fields) if turn is None else list(turn)
    return arrange(layout, rendered, demo_turns, own)


def template_inputs(
    templates: Sequence[MessageTemplate], fields: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields the stage's message ``templates`` read, as a demo would record them."""
    read = set().union(*(placeholders(message.template) for message in templates))
    return {name: fields[name] for name in sorted(read) if name in fields}


def render_templates(
    templates: Sequence[MessageTemplate], fields: Mapping[str, Any]
) -> list[ChatMessage]:
    """The stage's messages for ``fields``."""
    return [
        {"role": message.role, "content": render(message.template, fields)} for message in templates
    ]


class StageError(Exception):
    """A stage that could not produce an output (a missing field, an unreadable reply);
    ``failure`` says which (``unreadable``: the parser refused the reply)."""

    def __init__(self, message: str, failure: RunFailure = "output") -> None:
        super().__init__(message)
        self.failure: RunFailure = failure


class PromptProgram:
    """Runs stages in order; each stage's instruction is a component named after the stage.

    It offers ``StagedPrompts`` (``systems.capabilities``): algorithms edit its stages.
    """

    def __init__(self, config: PromptProgramConfig) -> None:
        self.config = config
        self.name = config.name
        self.stages = {stage.name: stage for stage in config.stages}

    def seed_candidate(self) -> Candidate:
        return Candidate(
            components={stage.name: stage.instruction for stage in self.config.stages},
            demos={stage.name: tuple(stage.demos) for stage in self.config.stages if stage.demos},
        )

    def for_candidate(self, candidate: Candidate) -> PromptProgram:
        """The program ``candidate`` runs as (this one; a graph candidate may carry its own)."""
        return self

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
            reminder = StageLayout.of(candidate.components, stage.name).reminder
            missing = sorted(stage.reads(f"{instruction}\n{reminder}") - available)
            if missing:
                raise ConfigError(
                    f"stage {stage.name!r}: placeholder {{{missing[0]}}} is not an input field"
                    f" (available: {', '.join(sorted(available)) or 'none'})"
                )
            available.add(stage.output_field)

    def stage_inputs(self, stage: StageConfig, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The fields a stage's message templates read, as a demo would record them."""
        return template_inputs(stage.messages, fields)

    def messages(
        self,
        stage: StageConfig,
        instruction: str,
        demos: tuple[Demo, ...],
        fields: Mapping[str, Any],
        layout: StageLayout | None = None,
    ) -> list[ChatMessage]:
        """The chat a stage sends: instruction, demos and its templates, arranged by ``layout``
        (by default: instruction as the system message, demos as message pairs)."""
        return stage_chat(stage.messages, instruction, demos, fields, layout)

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        fields: dict[str, Any] = dict(ctx.example.input)
        calls: list[ComponentCall] = []
        output: Any = None
        for stage in self.config.stages:
            try:
                output = await self.run_stage(candidate, ctx, stage, fields, calls)
            except StageError as exc:
                return SystemRun(
                    calls=calls, error=f"stage {stage.name!r}: {exc}", failure=exc.failure
                )
            fields[stage.output_field] = output
        return SystemRun(output=output, calls=calls)

    async def run_stage(
        self,
        candidate: Candidate,
        ctx: RunContext,
        stage: StageConfig,
        fields: Mapping[str, Any],
        calls: list[ComponentCall],
    ) -> Any:
        """One stage: render, call the model, parse (restating an unreadable reply when the
        layout says so); its calls are appended to ``calls``, a failure raises StageError."""
        layout = StageLayout.of(candidate.components, stage.name)
        call = ComponentCall(component=stage.name, inputs=self.stage_inputs(stage, fields))
        calls.append(call)
        try:
            call.messages = self.messages(
                stage,
                candidate.components.get(stage.name, stage.instruction),
                candidate.demos.get(stage.name, ()),
                fields,
                layout,
            )
        except MissingFieldError as exc:
            call.error = str(exc)
            raise StageError(call.error) from None
        call.reply = await self._complete(ctx, stage, call.messages)
        try:
            call.output = await self.answer_of(ctx, stage, layout, call.reply, calls)
        except ParseError as exc:
            if calls[-1] is call:  # not restated: the error is the reply's own
                call.error = str(exc)
            raise StageError(str(exc), "unreadable") from None
        return call.output

    async def answer_of(
        self,
        ctx: RunContext,
        stage: StageConfig,
        layout: StageLayout,
        reply: str,
        calls: list[ComponentCall] | None = None,
    ) -> Any:
        """What ``stage`` outputs for ``reply`` (its own, or one made elsewhere, as an RL
        completion): the parsed reply, or, when ``layout`` restates, the answer ``ctx.lm``
        restates from it (that call appended to ``calls``). Raises ``ParseError`` when
        neither reads."""
        try:
            return stage.parser.parse(reply)
        except ParseError:
            if layout.answer != "restate":
                raise
        restated = await self._restate(ctx, stage, reply)
        if calls is not None:
            calls.append(restated)
        if restated.error is not None:
            raise ParseError(restated.error)
        return restated.output

    @staticmethod
    async def _complete(ctx: RunContext, stage: StageConfig, messages: list[ChatMessage]) -> str:
        json_mode = json_mode_params(ctx.lm, messages) if stage.parser.kind == "json_object" else {}
        completion = await ctx.lm.complete(
            messages, temperature=stage.temperature, max_tokens=stage.max_tokens, **json_mode
        )
        return completion.text

    async def _restate(self, ctx: RunContext, stage: StageConfig, reply: str) -> ComponentCall:
        """The answer stage: the model restates ``reply``'s final answer in the stage's format."""
        call = ComponentCall(
            component=choice_name(stage.name, "answer"),
            inputs={"reply": reply},
            messages=restate_messages(reply, format_sentence(stage)),
        )
        call.reply = await self._complete(ctx, stage, call.messages)
        try:
            call.output = stage.parser.parse(call.reply)
        except ParseError as exc:
            call.error = f"restated answer: {exc}"
        return call


KIND = SystemKind(name="prompt_program", config=PromptProgramConfig, build=PromptProgram)
