"""The reflection call: the prompt that asks for a new component text, and its follow-up when
a reply cannot be used.

The prompt is the text of one user message with ``{field}`` placeholders GEPA fills
(``{{name}}`` writes a literal ``{name}``):

- ``{instruction}`` (required): the component's current text;
- ``{examples}`` (required): the reflective dataset as markdown;
- ``{task}``: the dataset's description ("" when unknown or ``show_task`` is off);
- ``{component}``: the component's name;
- ``{placeholders}``: a sentence naming the ``{fields}`` the text must keep ("" if none).

Two prompts ship in ``prompts/``. ``standard.md`` shows each example's input, reply, feedback
and expected output and asks for a whole new instruction in a fence, as in the paper.
``compact.md`` is for small models, which tend to answer the examples instead of writing
an instruction: it shows only the problems (numbers masked, quoted replies cut) and asks
for three labelled lines, TASK, METHOD and FORMAT, that GEPA joins into the instruction
(see ``compact.py``).
``reflection_prompt`` names a file that replaces the shipped prompt of either style.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.systems.templates import placeholders, render

Style = Literal["standard", "compact"]
REQUIRED_FIELDS = frozenset({"instruction", "examples"})
KNOWN_FIELDS = frozenset({"instruction", "examples", "task", "component", "placeholders"})


def check_prompt(text: str, source: str) -> None:
    """Raise ConfigError unless ``text`` uses every required field and no unknown one."""
    used = placeholders(text)
    missing = sorted(REQUIRED_FIELDS - used)
    if missing:
        fields = ", ".join("{" + name + "}" for name in missing)
        raise ConfigError(f"reflection prompt {source} must contain {fields}")
    unknown = sorted(used - KNOWN_FIELDS)
    if unknown:
        known = ", ".join("{" + name + "}" for name in sorted(KNOWN_FIELDS))
        raise ConfigError(
            f"reflection prompt {source} uses unknown placeholder {{{unknown[0]}}}"
            f" (known: {known}; write {{{{{unknown[0]}}}}} for a literal brace)"
        )


def load_prompt(path: Path | None = None, style: Style = "standard") -> str:
    """The user's prompt file, or the shipped prompt of ``style`` when ``path`` is None."""
    if path is None:
        name = f"{style}.md"
        text = (resources.files("emery.algorithms.gepa") / "prompts" / name).read_text(
            encoding="utf-8"
        )
        check_prompt(text, name)
        return text
    path = path.expanduser()
    if not path.is_file():
        raise ConfigError(f"reflection prompt file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read reflection prompt file {path}: {exc}") from None
    check_prompt(text, str(path))
    return text


def placeholder_note(text: str) -> str:
    """A sentence naming the placeholders a new text must keep, or "" when there are none."""
    names = sorted(placeholders(text))
    if not names:
        return ""
    listed = ", ".join("{" + name + "}" for name in names)
    return (
        f"The instruction contains the placeholders {listed}: keep each of them exactly as"
        " written, and add no other words in curly braces."
    )


def reflection_messages(
    template: str,
    *,
    component: str,
    instruction: str,
    examples: str,
    task: str,
) -> list[ChatMessage]:
    """The chat asking for a new text of ``component``."""
    content = render(
        template,
        {
            "instruction": instruction,
            "examples": examples,
            "task": task,
            "component": component,
            "placeholders": placeholder_note(instruction),
        },
    )
    return [{"role": "user", "content": content}]


def retry_messages(
    previous: list[ChatMessage],
    reply: str,
    reason: str,
    instruction: str,
    style: Style = "standard",
) -> list[ChatMessage]:
    """The chat for the next attempt after an unusable reply.

    Standard style continues the chat, saying what was wrong. Compact style asks the same
    question again (sampled): small models get more confused by a longer chat than they
    gain from the reason.
    """
    if style == "compact":
        return previous[:1]
    note = placeholder_note(instruction)
    follow_up = (
        f"That reply cannot be used: {reason}. Write a new instruction for the assistant: "
        "general advice on how to do the task and what the reply must look like, not an "
        "answer to any example."
        + (f" {note}" if note else "")
        + " Reply with the new instruction only, inside ``` fences."
    )
    return [
        *previous,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": follow_up},
    ]
