"""An rlm node's run: its stage's chat plus a tool protocol, then a loop of LM calls and
workspace tools until the model answers.

Each reply is read with the code harness's tool-call parser
(``{"tool": NAME, "arguments": {...}}``): a tool call is run against the node's
``ContextWorkspace`` (recorded as a tool span, like a harness action) and its observation
is the next user message; ``submit`` or a reply with no tool call is the answer, which the
node's parser reads. When the model asks for a tool past ``max_tool_calls``, it answers in
one last call from its own chat without the tool protocol, the tools' results added as
notes (small models keep calling tools while the protocol is in view, even when told to
stop); a tool call there fails the node. The node's instruction stays its component: the
optimizers edit it as any llm node's. The node's one recorded call holds the last chat the
model saw and its reply; each tool is a span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emery.core.errors import ConfigError
from emery.core.example_result import ComponentCall
from emery.core.models import Candidate, ChatMessage
from emery.systems.base import RunContext
from emery.systems.graph.rlm_options import RLMOptions, check_context, check_rlm
from emery.systems.graph.spec import Components, GraphConfig
from emery.systems.graph.workspace import ContextWorkspace
from emery.systems.harness.observation import Observation
from emery.systems.harness.toolcalls import SUBMIT_TOOL, parse_tool_call, tools_text
from emery.systems.parsers import ParseError
from emery.systems.prompt_layout import StageLayout
from emery.systems.prompt_program import PromptProgram, StageConfig, StageError
from emery.systems.templates import MissingFieldError
from emery.tracing.emitters import tool_call

PROTOCOL = """The input {context} is too long to show here: reach it with these tools.
{tools}
To call a tool, reply with only a JSON object such as \
{{"tool": "local_grep", "arguments": {{"pattern": "some words"}}}}.
Each result comes back as the next message. Once you know the answer, reply with the \
answer itself and no tool call."""
BUDGET_SPENT = """The tool budget is spent (max_tool_calls={n}). What the tools returned:

{notes}

Reply now with the final answer only."""

Complete = Callable[[list[ChatMessage]], Awaitable[str]]


class ToolLoopError(Exception):
    """The model kept calling tools past its budget."""


def protocol_text(context: str) -> str:
    """The tool instructions an rlm node's system message ends with."""
    tools = tools_text([*ContextWorkspace.tools, SUBMIT_TOOL])
    return PROTOCOL.format(context=context, tools=tools)


def with_protocol(chat: list[ChatMessage], context: str) -> list[ChatMessage]:
    """``chat`` with the tool protocol appended to its system message (one added first
    when the layout left none)."""
    text = protocol_text(context)
    if chat and chat[0]["role"] == "system":
        first: ChatMessage = {"role": "system", "content": f"{chat[0]['content']}\n\n{text}"}
        return [first, *chat[1:]]
    return [{"role": "system", "content": text}, *chat]


@dataclass
class ToolLoop:
    """The calls of one rlm node (see the module docstring)."""

    complete: Complete
    workspace: ContextWorkspace
    max_tool_calls: int
    context: str

    async def run(self, chat: list[ChatMessage], call: ComponentCall) -> str:
        """The model's answer to ``chat`` (the node's own messages); ``call`` holds the last
        chat it saw and its reply (also when the loop fails)."""
        talk = with_protocol(chat, self.context)
        notes: list[str] = []
        while True:
            call.messages = list(talk)
            call.reply = await self.complete(talk)
            action = parse_tool_call(call.reply)
            if action is None:
                return call.reply
            if action["tool"] == SUBMIT_TOOL["name"]:
                return str(action["arguments"].get("answer", ""))
            if len(notes) >= self.max_tool_calls:
                return await self.answer_from_notes(chat, notes, call)
            notes.append(f"{action['tool']} result:\n{self.execute(action)}")
            talk = [
                *talk,
                {"role": "assistant", "content": call.reply},
                {"role": "user", "content": notes[-1]},
            ]

    async def answer_from_notes(
        self, chat: list[ChatMessage], notes: list[str], call: ComponentCall
    ) -> str:
        """The last call: ``chat`` without the tool protocol, the results as notes."""
        summary = BUDGET_SPENT.format(n=self.max_tool_calls, notes="\n\n".join(notes))
        last = chat[-1]
        final: list[ChatMessage] = [
            *chat[:-1],
            {"role": last["role"], "content": f"{last['content']}\n\n{summary}"},
        ]
        call.messages = final
        call.reply = await self.complete(final)
        if parse_tool_call(call.reply) is not None:
            raise ToolLoopError(f"no answer within max_tool_calls={self.max_tool_calls}")
        return call.reply

    def execute(self, action: Mapping[str, Any]) -> Observation:
        """One tool on the workspace, recorded as a tool span."""
        with tool_call(action["tool"], action["arguments"]) as span:
            try:
                observation = self.workspace.execute(action)
            except Exception as exc:  # a workspace bug is an observation, not a crash
                observation = Observation(f"{type(exc).__name__}: {exc}", ok=False)
            if span is not None:
                span.result(observation.to_dict())
        return observation


async def run_rlm_stage(
    program: PromptProgram,
    options: RLMOptions,
    candidate: Candidate,
    ctx: RunContext,
    stage: StageConfig,
    fields: Mapping[str, Any],
    calls: list[ComponentCall],
) -> Any:
    """One rlm node as a stage: its chat (instruction, demos, templates, the protocol), the
    tool loop over the example's context, the answer parsed; StageError when it fails."""
    call = ComponentCall(component=stage.name, inputs=program.stage_inputs(stage, fields))
    calls.append(call)
    context = ctx.example.input.get(options.context)
    if not isinstance(context, str):
        call.error = f"the rlm context {options.context!r} is not a text input"
        raise StageError(call.error)
    try:
        chat = program.messages(
            stage,
            candidate.components.get(stage.name, stage.instruction),
            candidate.demos.get(stage.name, ()),
            fields,
            StageLayout.of(candidate.components, stage.name),
        )
    except MissingFieldError as exc:
        call.error = str(exc)
        raise StageError(call.error) from None

    async def complete(messages: list[ChatMessage]) -> str:
        completion = await ctx.lm.complete(
            messages, temperature=stage.temperature, max_tokens=stage.max_tokens
        )
        return completion.text

    workspace = ContextWorkspace(
        context, max_matches=options.max_matches, max_span_lines=options.max_span_lines
    )
    loop = ToolLoop(complete, workspace, options.max_tool_calls, options.context)
    try:
        answer = await loop.run(chat, call)
        call.output = stage.parser.parse(answer)
    except ToolLoopError as exc:
        call.error = str(exc)
        raise StageError(call.error) from None
    except ParseError as exc:
        call.error = str(exc)
        raise StageError(call.error, "unreadable") from None
    return call.output


def tool_options(graph: GraphConfig, node: str) -> RLMOptions | None:
    """The rlm options when ``node`` runs as a tool loop in ``graph``, else None."""
    options = graph.rlm if graph.graph_type == "rlm" else None
    names = [n.name for n in graph.llm_nodes()]
    return options if options is not None and node in options.tool_nodes(names) else None


def loop_calls(graph: GraphConfig, node: str) -> int:
    """The most LM calls one run of ``node`` makes: ``max_tool_calls + 2`` for a tool node
    (the tools, one more asked past the budget, the answer from notes), else 1."""
    options = tool_options(graph, node)
    return 1 if options is None else options.max_tool_calls + 2


def check_rlm_candidate(graph: GraphConfig, fields: set[str], components: Components) -> None:
    """ConfigError when the rlm context is no input field, or when the candidate's texts put
    it in a tool node's prompt."""
    if graph.graph_type != "rlm":
        return
    check_context(graph.rlm, fields)
    try:
        check_rlm(graph.graph_type, graph.rlm, graph.prompt_reads(components))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
