"""What one reflection produced for one component: the new text, or why there is none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emery.algorithms.gepa.reflection import Style


@dataclass
class Proposal:
    """What the reflection produced for one component: the new text or why there is none."""

    component: str
    text: str | None
    prompt: str
    style: Style
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reply(self) -> str:
        return str(self.attempts[-1]["reply"]) if self.attempts else ""

    def details(self) -> dict[str, Any]:
        """What the candidate's lineage records about its reflection."""
        return {
            "style": self.style,
            "prompt": self.prompt,
            "reply": self.reply,
            "attempts": self.attempts,
        }
