"""Components of function agents: ``PromptTemplate`` and which LM call used which text."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from emery.systems.base import ComponentCall
from emery.systems.templates import render
from emery.tracing.adapters import mentions, text_anchors
from emery.tracing.scope import LMCall

current_texts: ContextVar[Mapping[str, str] | None] = ContextVar(
    "emery_agent_components", default=None
)


class PromptTemplate:
    """A prompt text that is an optimizable component.

    ``str(template)`` / ``template.text`` is the running candidate's text (the seed outside
    a rollout); ``template.format(**fields)`` fills ``{field}`` placeholders.
    """

    def __init__(self, text: str, *, name: str | None = None) -> None:
        self.seed = text
        self.name = name

    @property
    def text(self) -> str:
        current = current_texts.get()
        if current is not None and self.name is not None and self.name in current:
            return current[self.name]
        return self.seed

    def format(self, **fields: Any) -> str:
        return render(self.text, fields)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"PromptTemplate(name={self.name!r}, seed={self.seed[:40]!r})"


def used_globals(fn: Callable[..., Any]) -> list[str]:
    """Global names the function's code (and nested code) refers to, in order."""
    code = getattr(fn, "__code__", None)
    names: list[str] = []
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop(0)
        names.extend(n for n in current.co_names if n not in names)
        stack.extend(c for c in current.co_consts if inspect.iscode(c))
    return names


def attribute_calls(calls: Sequence[LMCall], components: Mapping[str, str]) -> list[ComponentCall]:
    """LM calls as ``ComponentCall``s: a call belongs to the components whose text it
    contains, or to every component when it contains none of them."""
    out: list[ComponentCall] = []
    anchors = {name: text_anchors(text) for name, text in components.items()}
    for call in calls:
        sent = "\n".join(str(m.get("content") or "") for m in call.messages)
        owners = [name for name, pieces in anchors.items() if mentions(sent, pieces)]
        for owner in owners or list(components) or ["agent"]:
            out.append(ComponentCall(component=owner, messages=call.messages, reply=call.reply))
    return out
