"""A prompt-program stage's structure: where its texts sit, searched like the texts themselves.

A layout is stored in a candidate as *choice components* named ``{stage}:{choice}``
(stage names are identifiers, so they never contain ``:``). A candidate without them has
the default layout, which is exactly how a stage was rendered before layouts existed:

- ``placement``: the instruction as the ``system`` message (default), in the user turn
  before the input (``user_before``), or after it (``user_after``);
- ``reminder``: a line appended as the last line of the user turn (an output-format
  reminder, say); empty means none;
- ``demos``: demos as ``chat`` turns (default) or ``inline`` worked examples in the user turn;
- ``select``: show ``all`` of the stage's demos (default), or only the ``nearest`` few to
  the current input (``demo_retrieval``): the stage's demos are then a pool to draw from;
- ``shown``: how many of the pool a ``nearest`` stage shows per input (default
  ``NEAREST_SHOWN``, 4; fewer cost fewer tokens per call);
- ``answer``: ``restate`` sends a reply the stage's parser cannot read back to the model
  once more, asking only for the final answer in the required format (solve → answer);
  ``off`` (default) does not.

Because choices are components, they are hashed into the candidate id, stored, diffed
and shown in reports like any text; algorithms that rewrite texts leave them alone
(``is_choice_component``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from emery.core.models import ChatMessage, Demo
from emery.systems.demo_retrieval import NEAREST_SHOWN

CHOICE_SEPARATOR = ":"
Placement = Literal["system", "user_before", "user_after"]
DemoStyle = Literal["chat", "inline"]
AnswerStage = Literal["off", "restate"]
DemoSelection = Literal["all", "nearest"]


def is_choice_component(name: str) -> bool:
    """Whether ``name`` is a structural choice (``stage:choice``), not a text to rewrite."""
    return CHOICE_SEPARATOR in name


def choice_name(stage: str, choice: str) -> str:
    return f"{stage}{CHOICE_SEPARATOR}{choice}"


class StageLayout(BaseModel):
    """The structural choices of one stage (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    placement: Placement = "system"
    reminder: str = ""
    demos: DemoStyle = "chat"
    answer: AnswerStage = "off"
    select: DemoSelection = "all"
    shown: int = Field(default=NEAREST_SHOWN, ge=1)

    @classmethod
    def of(cls, components: Mapping[str, str], stage: str) -> StageLayout:
        """The layout a candidate's components give ``stage`` (defaults where unset)."""
        values = {
            field: components[choice_name(stage, field)]
            for field in cls.model_fields
            if choice_name(stage, field) in components
        }
        return cls.model_validate(values)

    def components(self, stage: str) -> dict[str, str]:
        """The choice components that store this layout (default values are left out)."""
        default = StageLayout()
        return {
            choice_name(stage, field): str(getattr(self, field))
            for field in type(self).model_fields
            if getattr(self, field) != getattr(default, field)
        }


def with_layout(components: Mapping[str, str], stage: str, layout: StageLayout) -> dict[str, str]:
    """``components`` with ``stage``'s choice components replaced by ``layout``'s."""
    kept = {
        name: text
        for name, text in components.items()
        if not name.startswith(choice_name(stage, ""))
    }
    return kept | layout.components(stage)


def arrange(
    layout: StageLayout,
    instruction: str,
    demo_turns: list[tuple[list[ChatMessage], Demo]],
    turn: list[ChatMessage],
) -> list[ChatMessage]:
    """The chat of one stage call: instruction, demos and the rendered turn, as ``layout`` says.

    ``demo_turns`` holds each demo's rendered user messages with the demo; ``turn`` is
    the stage's rendered messages for the current input.
    """
    chat: list[ChatMessage] = []
    if instruction.strip() and layout.placement == "system":
        chat.append({"role": "system", "content": instruction})
    before: list[str] = []
    if instruction.strip() and layout.placement == "user_before":
        before.append(instruction)
    if layout.demos == "chat":
        for messages, demo in demo_turns:
            chat.extend(messages)
            chat.append({"role": "assistant", "content": demo.output})
    elif demo_turns:
        before.append(_inline_demos(demo_turns))
    after: list[str] = []
    if instruction.strip() and layout.placement == "user_after":
        after.append(instruction)
    if layout.reminder.strip():
        after.append(layout.reminder.strip())
    return chat + _wrap_last_user(turn, before, after)


def _inline_demos(demo_turns: list[tuple[list[ChatMessage], Demo]]) -> str:
    blocks = []
    for number, (messages, demo) in enumerate(demo_turns, start=1):
        asked = "\n".join(m["content"] for m in messages if m["role"] == "user")
        blocks.append(f"Example {number}:\n{asked}\nReply:\n{demo.output}")
    return "\n\n".join(blocks) + "\n\nNow the real one:"


def _wrap_last_user(
    turn: list[ChatMessage], before: list[str], after: list[str]
) -> list[ChatMessage]:
    """``turn`` with ``before`` and ``after`` joined around its last user message."""
    if not before and not after:
        return list(turn)
    out = list(turn)
    index = max((i for i, m in enumerate(out) if m["role"] == "user"), default=None)
    if index is None:
        out.append({"role": "user", "content": "\n\n".join(before + after)})
        return out
    content = "\n\n".join([*before, out[index]["content"], *after])
    out[index] = {**out[index], "content": content}
    return out


ANSWER_INSTRUCTION = (
    "Below is a worked reply to a task. Do not solve anything again: copy its final answer."
)


def restate_messages(reply: str, format_sentence: str | None) -> list[ChatMessage]:
    """The answer stage's call: the worked reply, and the format its answer must take."""
    ask = format_sentence or "Reply with the final answer only."
    return [
        {"role": "system", "content": f"{ANSWER_INSTRUCTION} {ask}"},
        {"role": "user", "content": f"Worked reply:\n{reply.strip()}\n\n{ask}"},
    ]
