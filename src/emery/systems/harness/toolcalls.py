"""Side-effect-free helpers for harness code: reading a JSON tool call out of a model
reply and rendering tool specs and skills into prompt text.

Standard library only: the episode process imports this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
SUBMIT_TOOL: dict[str, Any] = {
    "name": "submit",
    "description": "End the episode with your final answer.",
    "parameters": {"answer": "the final answer, as text"},
}


def _objects(text: str) -> list[str]:
    """Balanced ``{...}`` substrings of ``text``, outermost first, in order."""
    found: list[str] = []
    depth, start, quoted, escaped = 0, -1, False, False
    for index, char in enumerate(text):
        if quoted:
            escaped, quoted = (False, quoted) if escaped else (char == "\\", char != '"')
            continue
        if char == '"' and depth:
            quoted = True
        elif char == "{":
            start = index if depth == 0 else start
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                found.append(text[start : index + 1])
    return found


def parse_tool_call(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` naming a tool: ``{"tool": NAME, "arguments": {...}}``
    (``name``/``args`` are accepted too), normalised to ``tool`` and ``arguments``; None
    when the reply holds no such object."""
    candidates = [m.group(1) for m in FENCE.finditer(text)] + _objects(text)
    for raw in candidates:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        tool = value.get("tool", value.get("name"))
        arguments = value.get("arguments", value.get("args", {}))
        if isinstance(tool, str) and tool and isinstance(arguments, dict):
            return {"tool": tool, "arguments": arguments}
    return None


def tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """Tool specs as prompt text: one line per tool with its parameters."""
    lines = []
    for tool in tools:
        params = tool.get("parameters") or {}
        listed = ", ".join(f"{name}: {about}" for name, about in params.items())
        lines.append(f"- {tool['name']}({listed}): {tool.get('description', '')}".rstrip())
    return "\n".join(lines)


def skills_index(skills: Mapping[str, str]) -> str:
    """One line per skill: its name and the first line of its body."""
    lines = []
    for name in sorted(skills):
        lines_of = (line.strip("# ").strip() for line in skills[name].splitlines())
        first = next((line for line in lines_of if line), "")
        lines.append(f"- {name}: {first}")
    return "\n".join(lines)
