"""Function agents: a plain Python function (sync or async) as an optimizable system.

Parameters are injected by name: ``task`` (the example input), ``example`` (the Example),
``prompts`` / ``candidate`` (the component texts to use), ``lm`` (the rollout's traced LM),
``rollout`` (ids, attempt, mode, proxy URL); any other parameter named like an input field
gets that field. The function returns an output (scored by the verifier), a float reward,
or nothing (the last emitted reward counts).

Components are declared with ``@emery.agent(components=...)``: module-level
``PromptTemplate`` objects (found automatically when the function uses them), names of
module-level strings (rebound to the candidate's text while its rollouts run), or a dict of
name → seed text read through ``prompts``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.imports import import_object
from emery.core.models import Candidate
from emery.core.settings import Settings
from emery.core.user_code import call_user_function
from emery.systems.agent_calls import (
    RESERVED,
    Prompts,
    Returns,
    RolloutInfo,
    agent_arguments,
    check_inputs,
    system_run,
)
from emery.systems.agent_components import (
    DeclaredComponents,
    PromptTemplate,
    attribute_calls,
    current_texts,
)
from emery.systems.agent_runtime import CandidateGate
from emery.systems.base import RunContext, System, SystemRun
from emery.systems.registry import SystemKind
from emery.tracing.scope import current_scope

__all__ = [
    "RESERVED",
    "AgentFunction",
    "FunctionAgent",
    "FunctionAgentConfig",
    "PromptTemplate",
    "Prompts",
    "RolloutInfo",
    "agent",
    "attribute_calls",
]


@dataclass
class AgentFunction:
    """A function marked with ``@emery.agent``: calling it calls the function, and it is a
    system (``emery.optimize(my_agent, ...)``) through a ``FunctionAgent`` built on first use.
    """

    fn: Callable[..., Any]
    name: str
    components: Sequence[str | PromptTemplate] | Mapping[str, str] | None = None
    returns: Returns = "auto"
    _system: FunctionAgent | None = field(default=None, init=False, repr=False, compare=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def system(self) -> FunctionAgent:
        if self._system is None:
            self._system = FunctionAgent(self)
        return self._system

    def seed_candidate(self) -> Candidate:
        return self.system.seed_candidate()

    def version(self) -> str:
        return self.system.version()

    def check_inputs(self, fields: set[str]) -> None:
        self.system.check_inputs(fields)

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        return await self.system.run(candidate, ctx)


Components = Sequence[str | PromptTemplate] | Mapping[str, str]


@overload
def agent(fn: Callable[..., Any], /) -> AgentFunction: ...


@overload
def agent(
    *,
    name: str | None = None,
    components: Components | None = None,
    returns: Returns = "auto",
) -> Callable[[Callable[..., Any]], AgentFunction]: ...


def agent(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    components: Components | None = None,
    returns: Returns = "auto",
) -> AgentFunction | Callable[[Callable[..., Any]], AgentFunction]:
    """Mark a function as an agent: ``@agent`` or ``@agent(components=[...], returns=...)``."""

    def wrap(target: Callable[..., Any]) -> AgentFunction:
        wrapped = AgentFunction(target, name or target.__name__, components, returns)
        functools.update_wrapper(wrapped, target)
        return wrapped

    return wrap(fn) if fn is not None else wrap


class FunctionAgent:
    """A Python function as a system; see the module docstring.

    ``needs_proxy``: each attempt gets an LM proxy URL (``rollout.base_url``) whose calls
    are recorded; ``rewrite_prompts``: the proxy replaces seed component texts in requests
    by the candidate's (for agent code that never reads the candidate).
    """

    reports_rewards = True  # an agent may score itself: a dataset needs no gold outputs

    def __init__(
        self,
        target: Callable[..., Any] | str,
        *,
        name: str | None = None,
        components: Sequence[str | PromptTemplate] | Mapping[str, str] | None = None,
        seeds: Mapping[str, str] | None = None,
        returns: Returns | None = None,
        instrument_openai: bool = True,
        needs_proxy: bool = False,
        rewrite_prompts: bool = False,
    ) -> None:
        self.needs_proxy = needs_proxy
        self.rewrite_prompts = rewrite_prompts
        fn = import_object(target) if isinstance(target, str) else target
        declared: Any = None
        if isinstance(fn, AgentFunction):
            declared, returns, name = fn.components, returns or fn.returns, name or fn.name
            fn = fn.fn
        if not callable(fn):
            raise ConfigError(f"agent {target!r} is not callable")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "agent"))
        self.returns: Returns = returns or "auto"
        self.parameters = inspect.signature(fn).parameters
        self.declared = DeclaredComponents(
            self.name, fn, components if components is not None else declared
        )
        for component, text in (seeds or {}).items():
            self.declared.set_seed(component, text)
        self._gate = CandidateGate()
        if instrument_openai:
            from emery.tracing.openai_instrument import instrument_openai as instrument

            instrument()

    def seed_texts(self) -> dict[str, str]:
        return self.declared.seed_texts()

    # System protocol

    def seed_candidate(self) -> Candidate:
        return Candidate(components=self.seed_texts())

    def version(self) -> str:
        try:
            source = inspect.getsource(self.fn)
        except (OSError, TypeError):
            code = getattr(self.fn, "__code__", None)
            source = code.co_code.hex() if code is not None else repr(self.fn)
        return content_hash(
            {
                "agent": f"{getattr(self.fn, '__module__', '')}:{self.name}",
                "source": source,
                "components": sorted(self.seed_texts()),
                "returns": self.returns,
            }
        )

    def check_inputs(self, fields: set[str]) -> None:
        check_inputs(self.name, self.parameters, fields)

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        components = {**self.seed_texts(), **candidate.components}
        scope = current_scope()
        if scope is not None:
            scope.components = dict(components)
        kwargs = agent_arguments(self.name, self.parameters, candidate, components, ctx, scope)
        token = current_texts.set(components)
        try:
            if self.declared.module_strings:
                async with self._gate.hold(
                    candidate.id,
                    lambda: self.declared.bind(components),
                    self.declared.restore,
                ):
                    result = await self._call(kwargs)
            else:
                result = await self._call(kwargs)
        finally:
            current_texts.reset(token)
        return system_run(result, self.returns, components, scope)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        return await call_user_function("agent", self.fn, **kwargs)


class FunctionAgentConfig(Settings):
    """``[system]`` for ``kind = "function_agent"``: ``agent = "module:function"``."""

    kind: Literal["function_agent"] = "function_agent"
    agent: str
    name: str | None = None
    components: list[str] | None = None
    seeds: dict[str, str] | None = None
    returns: Returns | None = None
    instrument_openai: bool = True
    proxy: bool = False
    rewrite_prompts: bool = False


def build(config: FunctionAgentConfig) -> System:
    return FunctionAgent(
        config.agent,
        name=config.name,
        components=config.components,
        seeds=config.seeds,
        returns=config.returns,
        instrument_openai=config.instrument_openai,
        needs_proxy=config.proxy,
        rewrite_prompts=config.rewrite_prompts,
    )


KIND = SystemKind(name="function_agent", config=FunctionAgentConfig, build=build)
