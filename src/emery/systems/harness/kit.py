"""The kit harness code gets: two budgeted primitives that go to the job process, and
side-effect-free helpers.

This is the episode-process side: ``complete`` and ``execute`` are requests over the
process's channel; the job process runs them, enforces the caps and records the
transcript, so the code cannot fake or reorder it. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emery.systems.harness import toolcalls
from emery.systems.harness.observation import BudgetExceeded, Observation

Request = Callable[[dict[str, Any]], dict[str, Any]]
DEFAULT_MAX_TOKENS = 512


class Kit:
    """Everything the code of one episode may touch.

    ``instruction``: the task as the environment states it; ``system_prompt``: the
    candidate's system prompt (tools and skills index filled in); ``tools``: the tool
    specs, ``submit`` included (``submit`` is no environment action: return the answer
    from ``run``).
    """

    def __init__(self, request: Request, setup: Mapping[str, Any]) -> None:
        self._request = request
        self.instruction: str = str(setup.get("instruction", ""))
        self.system_prompt: str = str(setup.get("system_prompt", ""))
        self.tools: list[dict[str, Any]] = list(setup.get("tools", []))
        self._skills: dict[str, str] = dict(setup.get("skills", {}))

    def _call(self, message: dict[str, Any]) -> Any:
        reply = self._request(message)
        if reply.get("ok"):
            return reply.get("value")
        if reply.get("reason") == "budget":
            raise BudgetExceeded(str(reply.get("message", "episode budget exceeded")))
        raise RuntimeError(str(reply.get("message", "the kit request failed")))

    def complete(
        self,
        system: str,
        messages: Sequence[Mapping[str, str]],
        temperature: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """One call of the job's task model: ``system`` then ``messages`` (role, content)."""
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        value = self._call(
            {
                "type": "complete",
                "system": str(system),
                "messages": chat,
                "temperature": temperature,
                "max_tokens": int(max_tokens),
            }
        )
        return str(value)

    def execute(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Observation:
        """One environment action; an unknown tool is an error observation (no cost)."""
        value = self._call(
            {"type": "execute", "tool": str(tool), "arguments": dict(arguments or {})}
        )
        return Observation.from_dict(value)

    @staticmethod
    def parse_tool_call(text: str) -> dict[str, Any] | None:
        """``{"tool": ..., "arguments": {...}}`` from a model reply, or None."""
        return toolcalls.parse_tool_call(text)

    def tools_text(self) -> str:
        """The tools as prompt lines."""
        return toolcalls.tools_text(self.tools)

    def skills_index(self) -> str:
        """One line per skill: name and first line."""
        return toolcalls.skills_index(self._skills)

    def read_skill(self, name: str) -> str:
        """A skill's markdown body, or a line saying there is no such skill."""
        if name in self._skills:
            return self._skills[name]
        known = ", ".join(sorted(self._skills)) or "none"
        return f"no skill named {name!r} (known: {known})"
