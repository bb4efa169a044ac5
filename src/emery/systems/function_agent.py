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

import asyncio
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.imports import import_object
from emery.core.models import Candidate, Example, Split
from emery.systems.agent_components import (
    PromptTemplate,
    attribute_calls,
    current_texts,
    used_globals,
)
from emery.systems.agent_runtime import AgentExited, CandidateGate, ModuleString, call_in_thread
from emery.systems.base import RunContext, System, SystemRun
from emery.systems.registry import SystemKind
from emery.tracing.agent_lm import AgentLM
from emery.tracing.scope import AttemptScope, current_scope

__all__ = [
    "RESERVED",
    "AgentExited",
    "AgentFunction",
    "FunctionAgent",
    "FunctionAgentConfig",
    "PromptTemplate",
    "Prompts",
    "RolloutInfo",
    "agent",
    "attribute_calls",
]

Returns = Literal["auto", "output", "reward"]
RESERVED = frozenset({"task", "example", "prompts", "candidate", "lm", "rollout"})


class Prompts(dict[str, str]):
    """The component texts of the running candidate (a dict), with its ``id`` and ``demos``."""

    def __init__(self, candidate: Candidate, components: Mapping[str, str]) -> None:
        super().__init__(components)
        self.id = candidate.id
        self.demos = candidate.demos

    @property
    def components(self) -> dict[str, str]:
        return dict(self)


@dataclass(frozen=True)
class RolloutInfo:
    """What an agent may know about the rollout it runs in."""

    rollout_id: str | None
    attempt_id: str | None
    attempt: int
    mode: Split | None
    candidate_id: str
    example_id: str
    base_url: str | None = None
    """The LM proxy URL for this attempt (OpenAI-compatible), when the job has one."""


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
        self.is_async = inspect.iscoroutinefunction(fn)
        self.parameters = inspect.signature(fn).parameters
        self.templates: dict[str, PromptTemplate] = {}
        self.module_strings: dict[str, ModuleString] = {}
        self.plain: dict[str, str] = {}
        self._discover(components if components is not None else declared)
        for component, text in (seeds or {}).items():
            self._set_seed(component, text)
        self._gate = CandidateGate()
        if instrument_openai:
            from emery.tracing.openai_instrument import instrument_openai as instrument

            instrument()

    # components

    def _discover(self, declared: Any) -> None:
        module_globals: dict[str, Any] = getattr(self.fn, "__globals__", {})
        if declared is None:
            for var in used_globals(self.fn):
                value = module_globals.get(var)
                if isinstance(value, PromptTemplate):
                    self._add_template(var, value)
            return
        if isinstance(declared, Mapping):
            self.plain = {str(k): str(v) for k, v in declared.items()}
            return
        for item in declared:
            if isinstance(item, PromptTemplate):
                found = next((k for k, v in module_globals.items() if v is item), None)
                self._add_template(found, item)
            elif isinstance(item, str) and isinstance(module_globals.get(item), PromptTemplate):
                self._add_template(item, module_globals[item])
            elif isinstance(item, str) and isinstance(module_globals.get(item), str):
                module = inspect.getmodule(self.fn)
                if module is None:
                    raise ConfigError(f"agent {self.name}: cannot find the module of {item!r}")
                self.module_strings[item] = ModuleString(module, item, module_globals[item])
                self.plain[item] = module_globals[item]
            else:
                raise ConfigError(
                    f"agent {self.name}: component {item!r} is neither a PromptTemplate nor"
                    " the name of a module-level string or PromptTemplate"
                )

    def _add_template(self, var: str | None, template: PromptTemplate) -> None:
        if template.name is None:
            if var is None:
                raise ConfigError(f"agent {self.name}: give the PromptTemplate a name=")
            template.name = var
        self.templates[template.name] = template

    def _set_seed(self, component: str, text: str) -> None:
        if component in self.templates:
            self.templates[component].seed = text
        elif component in self.plain:
            self.plain[component] = text
        else:
            raise ConfigError(f"agent {self.name}: unknown component {component!r}")

    def seed_texts(self) -> dict[str, str]:
        texts = {name: template.seed for name, template in self.templates.items()}
        return {**texts, **self.plain}

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
        for name, parameter in self.parameters.items():
            if name in RESERVED or parameter.kind in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                continue
            if parameter.default is parameter.empty and name not in fields:
                raise ConfigError(
                    f"agent {self.name}: parameter {name!r} is not an input field"
                    f" (available: {', '.join(sorted(fields)) or 'none'}; or use `task`)"
                )

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        components = {**self.seed_texts(), **candidate.components}
        scope = current_scope()
        if scope is not None:
            scope.components = dict(components)
        kwargs = self._arguments(candidate, components, ctx, scope)
        token = current_texts.set(components)
        try:
            if self.module_strings:
                async with self._gate.hold(
                    candidate.id,
                    lambda: self._bind(components),
                    self._restore,
                ):
                    result = await self._call(kwargs)
            else:
                result = await self._call(kwargs)
        finally:
            current_texts.reset(token)
        return self._to_run(result, components, scope)

    # running

    def _bind(self, components: Mapping[str, str]) -> None:
        for name, target in self.module_strings.items():
            setattr(target.module, target.attribute, components[name])

    def _restore(self) -> None:
        for target in self.module_strings.values():
            setattr(target.module, target.attribute, target.original)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        if self.is_async:
            try:
                return await self.fn(**kwargs)
            except SystemExit as exc:
                raise AgentExited(exc) from None
        result = await call_in_thread(self.fn, kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    def _arguments(
        self,
        candidate: Candidate,
        components: dict[str, str],
        ctx: RunContext,
        scope: AttemptScope | None,
    ) -> dict[str, Any]:
        example: Example = ctx.example
        values: dict[str, Any] = {
            "task": example.input,
            "example": example,
            "prompts": Prompts(candidate, components),
            "candidate": Prompts(candidate, components),
            "rollout": RolloutInfo(
                rollout_id=scope.rollout_id if scope else ctx.rollout_id,
                attempt_id=scope.attempt_id if scope else None,
                attempt=scope.attempt.number if scope else 1,
                mode=ctx.split,
                candidate_id=candidate.id,
                example_id=example.id,
                base_url=scope.proxy_url if scope else None,
            ),
        }
        kwargs: dict[str, Any] = {}
        for name, parameter in self.parameters.items():
            if name == "lm":
                kwargs[name] = AgentLM(ctx.lm, asyncio.get_running_loop())
            elif name in values:
                kwargs[name] = values[name]
            elif name in example.input:
                kwargs[name] = example.input[name]
            elif parameter.default is parameter.empty and parameter.kind not in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                raise ConfigError(f"agent {self.name}: no value for parameter {name!r}")
        return kwargs

    def _to_run(
        self, result: Any, components: dict[str, str], scope: AttemptScope | None
    ) -> SystemRun:
        calls = attribute_calls(scope.lm_calls if scope else [], components)
        returns = self.returns
        is_number = isinstance(result, float | int) and not isinstance(result, bool)
        if returns == "reward" or (returns == "auto" and isinstance(result, float)):
            if not is_number:
                return SystemRun(output=result, calls=calls, error="the agent returned no reward")
            return SystemRun(output=result, calls=calls, reward=float(result))
        if result is None and returns == "auto" and scope is not None:
            reward = scope.last_reward
            if reward is not None:
                return SystemRun(calls=calls, reward=reward.value)
        return SystemRun(output=result, calls=calls)


class FunctionAgentConfig(BaseModel):
    """``[system]`` for ``kind = "function_agent"``: ``agent = "module:function"``."""

    model_config = ConfigDict(extra="forbid")

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
