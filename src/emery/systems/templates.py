"""``{field}`` placeholders in instructions and message templates.

Only identifiers in single braces are placeholders (any name Python accepts as an
identifier, ``{問題}`` included), so JSON examples inside an instruction
(``{"name": ...}``) stay literal; ``{{field}}`` renders as ``{field}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from emery.verifiers.base import as_text

# Candidates: brace-free, space-free words in braces; only identifiers among them count.
_CANDIDATE = re.compile(r"\{\{([^{}\s]+)\}\}|\{([^{}\s]+)\}")


def _fields(template: str) -> Iterator[re.Match[str]]:
    """The placeholders of ``template``, escaped (group 1) or not (group 2)."""
    for match in _CANDIDATE.finditer(template):
        if (match.group(1) or match.group(2)).isidentifier():
            yield match


class MissingFieldError(KeyError):
    """A template names a field the inputs do not have."""

    def __init__(self, field: str, available: list[str]) -> None:
        super().__init__(field)
        self.field = field
        self.available = available

    def __str__(self) -> str:
        fields = ", ".join(self.available) or "none"
        return f"placeholder {{{self.field}}} is not an input field (available: {fields})"


def placeholders(template: str) -> set[str]:
    """The field names a template reads."""
    return {m.group(2) for m in _fields(template) if m.group(2)}


def literal_pieces(template: str) -> list[str]:
    """The text of ``template`` between its placeholders (escaped ones stay in the text)."""
    pieces, start = [], 0
    for match in _fields(template):
        if match.group(2):
            pieces.append(template[start : match.start()])
            start = match.end()
    return [*pieces, template[start:]]


def render(template: str, fields: Mapping[str, Any]) -> str:
    """Fill the placeholders of ``template`` from ``fields``."""
    out, start = [], 0
    for match in _fields(template):
        escaped, name = match.group(1), match.group(2)
        if escaped:
            value = "{" + escaped + "}"
        elif name in fields:
            value = as_text(fields[name])
        else:
            raise MissingFieldError(name, sorted(fields))
        out += [template[start : match.start()], value]
        start = match.end()
    return "".join([*out, template[start:]])
