"""The workspace of an rlm graph node: a long context held outside the prompt, and the
three tools that reach it.

- ``materialize_context``: load the context into the workspace as numbered lines and say
  how large it is (the other tools do it first when it was not called: a 0.5B model
  searched six times in a row without it, each time told to call it first);
- ``local_grep``: the numbered lines that match a regular expression (case-insensitive);
- ``read_span``: lines ``start`` to ``end`` (1-based, inclusive).

Every answer is an ``Observation`` with a bounded text; a bad argument (an unknown tool, a
bad regex, a span outside the context) is an error observation, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from emery.systems.harness.observation import Observation

MATERIALIZE, GREP, READ = "materialize_context", "local_grep", "read_span"
RLM_TOOLS: list[dict[str, Any]] = [
    {
        "name": MATERIALIZE,
        "description": "Load the long context into the workspace; says its size in lines.",
        "parameters": {},
    },
    {
        "name": GREP,
        "description": "List the numbered lines matching a regex (case-insensitive).",
        "parameters": {"pattern": "a Python regular expression"},
    },
    {
        "name": READ,
        "description": "Show lines start..end of the context (1-based, inclusive).",
        "parameters": {"start": "first line number", "end": "last line number"},
    },
]
LINE_CHARS = 300
"""The most characters of one line an observation shows."""


class ContextWorkspace:
    """One node run's workspace over ``text`` (see the module docstring)."""

    tools = RLM_TOOLS

    def __init__(self, text: str, *, max_matches: int = 20, max_span_lines: int = 40) -> None:
        self.text = text
        self.max_matches = max_matches
        self.max_span_lines = max_span_lines
        self.lines: list[str] | None = None

    def execute(self, action: Mapping[str, Any]) -> Observation:
        """Run ``{"tool": name, "arguments": {...}}``."""
        tool, arguments = str(action.get("tool")), action.get("arguments") or {}
        if tool == MATERIALIZE:
            return self.materialize()
        if tool not in (GREP, READ):
            known = ", ".join(spec["name"] for spec in RLM_TOOLS)
            return Observation(f"unknown tool {tool!r} (tools: {known})", ok=False)
        loaded = self.materialize() if self.lines is None else None
        if tool == GREP:
            result = self.grep(arguments.get("pattern"))
        else:
            result = self.read_span(arguments.get("start"), arguments.get("end"))
        if loaded is None:
            return result
        return Observation(f"{loaded.text}\n{result.text}", ok=result.ok)

    def materialize(self) -> Observation:
        """Split the context into numbered lines; the answer gives its size."""
        self.lines = self.text.splitlines() or [""]
        words = len(self.text.split())
        return Observation(
            f"context materialized: {len(self.lines)} lines, {words} words."
            f" Search it with {GREP} and read lines with {READ}."
        )

    def grep(self, pattern: Any) -> Observation:
        """The lines matching ``pattern``, at most ``max_matches`` of them."""
        assert self.lines is not None
        if not isinstance(pattern, str) or not pattern:
            return Observation(f"{GREP} needs a non-empty 'pattern' string", ok=False)
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            return Observation(f"bad regex {pattern!r}: {exc}", ok=False)
        hits = [(number, line) for number, line in enumerate(self.lines, 1) if regex.search(line)]
        if not hits:
            return Observation(f"no line matches {pattern!r}")
        shown = [f"{number}: {_clip(line)}" for number, line in hits[: self.max_matches]]
        more = len(hits) - len(shown)
        tail = [f"({more} more matching lines not shown)"] if more > 0 else []
        return Observation("\n".join([f"{len(hits)} matching lines:", *shown, *tail]))

    def read_span(self, start: Any, end: Any) -> Observation:
        """Lines ``start`` to ``end`` (``end`` defaults to ``start``; clipped to
        ``max_span_lines``)."""
        assert self.lines is not None
        first, last = _line_number(start), _line_number(start if end is None else end)
        total = len(self.lines)
        if first is None or last is None:
            return Observation(f"{READ} needs whole line numbers 'start' and 'end'", ok=False)
        if not 1 <= first <= total or last < first:
            return Observation(
                f"bad span {start}..{end}: the context has lines 1..{total}", ok=False
            )
        last = min(last, total, first + self.max_span_lines - 1)
        shown = [f"{n}: {_clip(self.lines[n - 1])}" for n in range(first, last + 1)]
        return Observation("\n".join([f"lines {first}-{last} of {total}:", *shown]))


def _line_number(value: Any) -> int | None:
    """``value`` as a whole number (an int or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..."
