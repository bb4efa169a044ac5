"""Components of function agents: ``PromptTemplate``, how an agent declares its components,
and which LM call used which text."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from emery.core.errors import ConfigError
from emery.systems.agent_runtime import ModuleString
from emery.systems.base import ComponentCall
from emery.systems.templates import literal_pieces, render
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


class DeclaredComponents:
    """The components of agent ``agent`` (function ``fn``): ``PromptTemplate``s, module-level
    strings (rebound to a candidate's texts by ``bind``) and plain named texts.

    ``declared`` is what ``@emery.agent(components=...)`` got: None (the module-level
    templates the function uses), a dict of name → seed text, or names and templates.
    """

    def __init__(self, agent: str, fn: Callable[..., Any], declared: Any) -> None:
        self.agent = agent
        self.templates: dict[str, PromptTemplate] = {}
        self.module_strings: dict[str, ModuleString] = {}
        self.plain: dict[str, str] = {}
        module_globals: dict[str, Any] = getattr(fn, "__globals__", {})
        if declared is None:
            for var in used_globals(fn):
                value = module_globals.get(var)
                if isinstance(value, PromptTemplate):
                    self._add_template(var, value)
        elif isinstance(declared, Mapping):
            self.plain = {str(k): str(v) for k, v in declared.items()}
        else:
            for item in declared:
                self._add_declared(item, fn, module_globals)

    def _add_declared(
        self, item: Any, fn: Callable[..., Any], module_globals: dict[str, Any]
    ) -> None:
        if isinstance(item, PromptTemplate):
            found = next((k for k, v in module_globals.items() if v is item), None)
            self._add_template(found, item)
        elif isinstance(item, str) and isinstance(module_globals.get(item), PromptTemplate):
            self._add_template(item, module_globals[item])
        elif isinstance(item, str) and isinstance(module_globals.get(item), str):
            module = inspect.getmodule(fn)
            if module is None:
                raise ConfigError(f"agent {self.agent}: cannot find the module of {item!r}")
            self.module_strings[item] = ModuleString(module, item, module_globals[item])
            self.plain[item] = module_globals[item]
        else:
            raise ConfigError(
                f"agent {self.agent}: component {item!r} is neither a PromptTemplate nor"
                " the name of a module-level string or PromptTemplate"
            )

    def _add_template(self, var: str | None, template: PromptTemplate) -> None:
        if template.name is None:
            if var is None:
                raise ConfigError(f"agent {self.agent}: give the PromptTemplate a name=")
            template.name = var
        self.templates[template.name] = template

    def set_seed(self, component: str, text: str) -> None:
        if component in self.templates:
            self.templates[component].seed = text
        elif component in self.plain:
            self.plain[component] = text
        else:
            raise ConfigError(f"agent {self.agent}: unknown component {component!r}")

    def seed_texts(self) -> dict[str, str]:
        texts = {name: template.seed for name, template in self.templates.items()}
        return {**texts, **self.plain}

    def bind(self, components: Mapping[str, str]) -> None:
        """Set the module-level strings to a candidate's texts."""
        for name, target in self.module_strings.items():
            setattr(target.module, target.attribute, components[name])

    def restore(self) -> None:
        """Set the module-level strings back to their seeds."""
        for target in self.module_strings.values():
            setattr(target.module, target.attribute, target.original)


def text_anchors(text: str, min_length: int = 12) -> list[str]:
    """The literal pieces of a component text (between ``{placeholders}``) worth matching."""
    pieces = [piece.strip() for piece in literal_pieces(text) if piece.strip()]
    return [p for p in pieces if len(p) >= min_length] or pieces


def mentions(sent: str, anchors: Sequence[str]) -> bool:
    """Whether ``sent`` contains every anchor (and there is at least one)."""
    return bool(anchors) and all(anchor in sent for anchor in anchors)


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
