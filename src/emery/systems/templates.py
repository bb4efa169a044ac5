"""``{field}`` placeholders in instructions and message templates.

Only identifiers in single braces are placeholders, so JSON examples inside an
instruction (``{"name": ...}``) stay literal; ``{{field}}`` renders as ``{field}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from emery.verifiers.base import as_text

_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_]\w*)\}\}|\{([A-Za-z_]\w*)\}")


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
    return {m.group(2) for m in _PLACEHOLDER.finditer(template) if m.group(2)}


def render(template: str, fields: Mapping[str, Any]) -> str:
    """Fill the placeholders of ``template`` from ``fields``."""

    def fill(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return "{" + escaped + "}"
        if name not in fields:
            raise MissingFieldError(name, sorted(fields))
        return as_text(fields[name])

    return _PLACEHOLDER.sub(fill, template)
