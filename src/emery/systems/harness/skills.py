"""Skills: named markdown bodies (``skill:<name>`` text components). Their index goes into
the system prompt; ``kit.read_skill(name)`` returns a body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from emery.systems.harness.toolcalls import skills_index, tools_text

READ_SKILL_TOOL: dict[str, Any] = {
    "name": "read_skill",
    "description": "The full text of a skill from the skills list.",
    "parameters": {"name": "a skill name"},
}


def render_system_prompt(
    template: str, tools: Sequence[Mapping[str, Any]], skills: Mapping[str, str]
) -> str:
    """``template`` with ``{tools}`` and ``{skills}`` filled in (other braces stay as
    written); the skills part is empty without skills."""
    index = skills_index(skills)
    skills_part = f"Skills (read one with read_skill):\n{index}" if index else ""
    text = template.replace("{tools}", tools_text(tools)).replace("{skills}", skills_part)
    return text.rstrip() + "\n"
