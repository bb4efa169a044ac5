"""Recovering a recorded call's input fields by matching its prompt against a template.

A ``TraceTemplate`` is a list of messages (role and ``{field}`` template). It matches a
recorded request whose last messages have the template's roles and whose texts the
templates produce for some field values; the messages before them (the system
instruction, demos: what an optimizer changes) are not compared. A ``{field}`` text is a
one-message template for the last user message; a prompt program's stage gives its
message templates.

Each result is ``matched`` (with the fields), ``unmatched`` (the prompt is not one the
template produces) or ``ambiguous`` (it is, but for more than one set of field values,
e.g. ``"{a} {b}"`` against ``"x y z"``): nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from emery.core.errors import ConfigError
from emery.systems.stages import StageConfig
from emery.systems.templates import placeholders, render

MatchStatus = Literal["matched", "unmatched", "ambiguous"]
_SENTINEL = "\x00{}\x00"
_SPLIT = re.compile("\x00(\\d+)\x00")


@dataclass(frozen=True)
class TemplateMatch:
    """The outcome of matching one prompt: its status, the fields when matched, and why not
    otherwise."""

    status: MatchStatus
    fields: dict[str, str] | None = None
    reason: str = ""


@dataclass(frozen=True)
class _Message:
    role: str
    lazy: re.Pattern[str]
    greedy: re.Pattern[str]


def _compile(template: str, greedy: bool, index: Mapping[str, int]) -> re.Pattern[str]:
    """A regex for the texts ``template`` renders to: each field the named group
    ``f{index[field]}`` (a field repeated in the template must repeat its text)."""
    marked = render(template, {name: _SENTINEL.format(index[name]) for name in index})
    pattern, seen = [], set()
    for position, part in enumerate(_SPLIT.split(marked)):
        if position % 2 == 0:
            pattern.append(re.escape(part))
        elif part in seen:
            pattern.append(f"(?P=f{part})")
        else:
            seen.add(part)
            pattern.append(f"(?P<f{part}>.*)" if greedy else f"(?P<f{part}>.*?)")
    return re.compile("".join(pattern), re.DOTALL)


class TraceTemplate:
    """The prompt a call's input fields are read back from (see the module docstring)."""

    def __init__(self, messages: Sequence[tuple[str, str]]) -> None:
        if not messages:
            raise ConfigError("a template needs at least one message")
        fields: set[str] = set()
        for _, text in messages:
            fields |= placeholders(text)
        if not fields:
            raise ConfigError(
                "the template has no {field} placeholder: it cannot recover any input field"
            )
        self.fields = sorted(fields)
        self._names = {f"f{i}": name for i, name in enumerate(self.fields)}
        index = {name: i for i, name in enumerate(self.fields)}
        self._messages = [
            _Message(role, _compile(text, False, index), _compile(text, True, index))
            for role, text in messages
        ]

    @classmethod
    def from_text(cls, text: str) -> TraceTemplate:
        """A ``{field}`` template for the last user message."""
        return cls([("user", text)])

    @classmethod
    def from_stage(cls, stage: StageConfig) -> TraceTemplate:
        """The message templates of a prompt program's stage."""
        return cls([(m.role, m.template) for m in stage.messages])

    def match(self, messages: Sequence[Mapping[str, Any]]) -> TemplateMatch:
        """Match the last messages of a recorded request against the template."""
        if len(messages) < len(self._messages):
            return TemplateMatch(
                "unmatched",
                reason=f"{len(messages)} messages, the template has {len(self._messages)}",
            )
        tail = messages[len(messages) - len(self._messages) :]
        lazy: dict[str, str] = {}
        greedy: dict[str, str] = {}
        for position, (message, template) in enumerate(zip(tail, self._messages, strict=True)):
            role, content = message.get("role"), message.get("content")
            where = (
                f"the {template.role} message"
                if len(self._messages) == 1
                else f"template message {position + 1}"
            )
            if role != template.role:
                return TemplateMatch("unmatched", reason=f"{where} is a {role} message")
            if not isinstance(content, str):
                return TemplateMatch("unmatched", reason=f"{where} is not text")
            for found, pattern in ((lazy, template.lazy), (greedy, template.greedy)):
                hit = pattern.fullmatch(content)
                if hit is None:
                    return TemplateMatch("unmatched", reason=f"{where} does not fit the template")
                for group, value in hit.groupdict().items():
                    name = self._names[group]
                    if found.setdefault(name, value) != value:
                        return TemplateMatch(
                            "unmatched", reason=f"{{{name}}} differs between messages"
                        )
        if lazy != greedy:
            return TemplateMatch(
                "ambiguous", reason="the prompt fits the template for more than one split"
            )
        return TemplateMatch("matched", fields=lazy)
