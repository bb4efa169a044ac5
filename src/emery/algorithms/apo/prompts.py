"""The critique and edit prompts: files shipped in ``apo/prompts/`` or given by the user.

A prompt file is the text of one user message with ``{field}`` placeholders that APO fills
(``{{name}}`` writes a literal ``{name}``). A file that starts with a ``[system]`` line holds
a system message first and the user message after a ``[user]`` line. An edit prompt whose
first line is ``[append]`` asks for text to add at the end of the prompt instead of a whole
new prompt (small models manage one sentence far better than a rewrite). Each kind has
fields it must use and fields it may use; a file that misses a required field or names an
unknown one is a ConfigError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.systems.templates import placeholders, render

PromptKind = Literal["critique", "edit"]

REQUIRED_FIELDS: dict[PromptKind, frozenset[str]] = {
    "critique": frozenset({"prompt", "experiments"}),
    "edit": frozenset({"prompt", "critique"}),
}
OPTIONAL_FIELDS: frozenset[str] = frozenset(
    {"prompt", "experiments", "critique", "component", "task", "placeholders"}
)
DEFAULT_FILES: dict[PromptKind, tuple[str, ...]] = {
    "critique": ("critique_bullets.md", "critique_spans.md", "critique_audit.md"),
    "edit": ("edit_rewrite.md", "edit_conservative.md"),
}


@dataclass(frozen=True)
class MetaPrompt:
    """One critique or edit prompt: a variant name (the file's stem), an optional system
    message and the user message."""

    kind: PromptKind
    name: str
    text: str
    system: str = ""
    append: bool = False

    def messages(self, **fields: str) -> list[ChatMessage]:
        """The chat to send, every placeholder filled."""
        chat: list[ChatMessage] = []
        if self.system:
            chat.append({"role": "system", "content": render(self.system, fields)})
        chat.append({"role": "user", "content": render(self.text, fields)})
        return chat


def parse_template(kind: PromptKind, name: str, raw: str, source: str) -> MetaPrompt:
    """A template from a file's text, split into system and user parts when marked."""
    lines = raw.strip().splitlines()
    append = bool(lines) and lines[0].strip().lower() == "[append]"
    if append:
        if kind != "edit":
            raise ConfigError(f"{kind} prompt {source}: only edit prompts may be [append]")
        lines = lines[1:]
        raw = "\n".join(lines)
    system = ""
    if lines and lines[0].strip().lower() == "[system]":
        marks = [i for i, line in enumerate(lines) if line.strip().lower() == "[user]"]
        if not marks:
            raise ConfigError(f"{kind} prompt {source} has a [system] part but no [user] line")
        system = "\n".join(lines[1 : marks[0]]).strip()
        user = "\n".join(lines[marks[0] + 1 :]).strip()
    else:
        user = raw.strip()
    if not user:
        raise ConfigError(f"{kind} prompt {source} has no user message")
    check_template(kind, f"{system}\n{user}", source)
    return MetaPrompt(kind=kind, name=name, text=user, system=system, append=append)


def check_template(kind: PromptKind, text: str, source: str) -> None:
    """Raise ConfigError unless ``text`` uses every required field and no unknown one."""
    used = placeholders(text)
    missing = sorted(REQUIRED_FIELDS[kind] - used)
    if missing:
        fields = ", ".join("{" + name + "}" for name in missing)
        raise ConfigError(f"{kind} prompt {source} must contain {fields}")
    unknown = sorted(used - OPTIONAL_FIELDS)
    if unknown:
        known = ", ".join("{" + name + "}" for name in sorted(OPTIONAL_FIELDS))
        raise ConfigError(
            f"{kind} prompt {source} uses unknown placeholder {{{unknown[0]}}}"
            f" (known: {known}; write {{{{{unknown[0]}}}}} for a literal brace)"
        )


def load_prompts(kind: PromptKind, paths: Sequence[str | Path] | None = None) -> list[MetaPrompt]:
    """The user's prompt files for ``kind``, or the shipped ones when ``paths`` is None."""
    if paths is None:
        folder = resources.files("emery.algorithms.apo") / "prompts"
        shipped = []
        for filename in DEFAULT_FILES[kind]:
            text = (folder / filename).read_text(encoding="utf-8")
            shipped.append(parse_template(kind, Path(filename).stem, text, filename))
        return shipped
    if not paths:
        raise ConfigError(f"{kind}_prompts is empty: give at least one file or leave it unset")
    loaded = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_file():
            raise ConfigError(f"{kind} prompt file not found: {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {kind} prompt file {path}: {exc}") from None
        loaded.append(parse_template(kind, path.stem, text, str(path)))
    names = [prompt.name for prompt in loaded]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{kind} prompt files share the name {repeated[0]!r}: rename one")
    return loaded
