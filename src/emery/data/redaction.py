"""Redaction of personal data: regexes and a callable applied to every text of an example
before it is stored (``emery dataset from-traces --redact``).

A pattern is a regex, or one of the named presets (``email``, ``phone``, ``card``,
``ipv4``); each match becomes ``[REDACTED]`` (a preset's match ``[EMAIL]``, ``[PHONE]``,
...). The callable, if any, runs after the patterns on each string and returns the
redacted string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from emery.core.errors import ConfigError

REDACTED = "[REDACTED]"

PRESETS: dict[str, tuple[str, str]] = {
    "email": (r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "[EMAIL]"),
    "phone": (
        r"(?<![\w+])\+?(?:\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|\d{2,4})[ .-]?\d{3,4}[ .-]?\d{3,4}(?!\w)",
        "[PHONE]",
    ),
    "card": (r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)", "[CARD]"),
    "ipv4": (r"(?<!\d)(?:\d{1,3}\.){3}\d{1,3}(?!\d)", "[IP]"),
}
"""Named patterns and their replacements (deliberately broad: redaction errs towards
removing text)."""


def compile_pattern(pattern: str) -> tuple[re.Pattern[str], str]:
    """A preset or a regex, compiled with its replacement; ConfigError for a bad regex."""
    if pattern in PRESETS:
        regex, replacement = PRESETS[pattern]
        return re.compile(regex), replacement
    if not pattern:
        raise ConfigError("a redaction pattern must not be empty")
    try:
        return re.compile(pattern), REDACTED
    except re.error as exc:
        raise ConfigError(f"redaction pattern {pattern!r} is not a valid regex: {exc}") from None


@dataclass
class Redactor:
    """Replaces personal data in every string of a value (nested lists and dicts too)."""

    patterns: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    function: Callable[[str], str] | None = None

    @classmethod
    def of(
        cls, patterns: Sequence[str] = (), function: Callable[[str], str] | None = None
    ) -> Redactor:
        """A redactor from pattern texts (regexes or preset names) and an optional callable."""
        return cls([compile_pattern(p) for p in patterns], function)

    @property
    def active(self) -> bool:
        return bool(self.patterns) or self.function is not None

    def text(self, value: str) -> str:
        for regex, replacement in self.patterns:
            value = regex.sub(replacement, value)
        if self.function is not None:
            redacted = self.function(value)
            if not isinstance(redacted, str):
                raise ConfigError(
                    f"the redaction function returned {type(redacted).__name__}, not a string"
                )
            value = redacted
        return value

    def __call__(self, value: Any) -> Any:
        """``value`` with every string in it redacted (dict keys are left as they are)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        return value
