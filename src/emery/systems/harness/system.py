"""The code-harness system: ``[system] kind = "code_harness"``.

Components: ``code:runtime`` (a Python module defining ``run(kit) -> str``; the baseline
loop when none is given), ``prompt:system`` (the system prompt; ``{tools}`` and
``{skills}`` are filled in) and one ``skill:<name>`` per skill (a markdown body).
Each example is one episode: a fresh environment is reset with the example's input, the
code runs in a process forked for it by a pooled episode process (``episode_process``),
and the answer is checked by the environment (when it has ``check``) or by the job's
verifier against the gold output.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Candidate
from emery.core.settings import Settings
from emery.systems.base import ComponentCall, RunContext, System, SystemRun
from emery.systems.harness.code import (
    CODE_BRIEF,
    CODE_COMPONENT,
    CODE_PREFIX,
    PROMPT_COMPONENT,
    SEED_CODE,
    SEED_PROMPT,
    SKILL_PREFIX,
    code_problem,
)
from emery.systems.harness.environment import (
    EnvironmentFactory,
    load_environment,
    maybe_await,
    tool_names,
)
from emery.systems.harness.episode import Episode, EpisodeResult, Limits, run_in_process
from emery.systems.harness.pool import POOL, CodeProcessPool
from emery.systems.harness.skills import READ_SKILL_TOOL, render_system_prompt
from emery.systems.harness.toolcalls import SUBMIT_TOOL
from emery.systems.registry import SystemKind
from emery.tracing.scope import current_scope

CRASHES = frozenset({"exception", "exit", "crash", "invalid", "timeout", "protocol"})
"""Stop reasons that say the code is broken (a smoke run ending so rejects a proposal)."""
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_SHARE = 0.9


class CodeHarnessConfig(Settings):
    """``[system]`` for ``kind = "code_harness"``."""

    kind: Literal["code_harness"] = "code_harness"
    environment: str
    """A built-in environment (calculator, kv_store, files) or ``module:attr``."""
    name: str = "harness"
    code: str | None = None
    code_path: str | None = None
    system_prompt: str | None = None
    skills: dict[str, str] = Field(default_factory=dict)
    max_llm_calls: int = Field(default=40, ge=1)
    max_env_actions: int = Field(default=60, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    """The episode's time limit; default 0.9 × the rollout's ``timeout_s``."""


class CodeHarness:
    """An agent loop written as code, run in episode processes (isolation, not a sandbox).

    It offers ``ProposesCode`` (``systems.capabilities``): its ``code:*`` component is a
    whole module an algorithm may rewrite, checked by ``code_problem`` and ``smoke_test``.
    """

    code_brief = CODE_BRIEF

    def __init__(self, config: CodeHarnessConfig, pool: CodeProcessPool | None = None) -> None:
        self.config = config
        self.name = config.name
        self.factory: EnvironmentFactory = load_environment(config.environment)
        self.pool = pool or POOL
        sample = self.factory()
        self.env_tools = [dict(spec) for spec in sample.tools]
        self.tool_names = tool_names(self.env_tools)
        self.reports_rewards = callable(getattr(sample, "check", None))
        _close(sample)
        self.seed = self._seed_components()

    def _seed_components(self) -> dict[str, str]:
        code = self.config.code
        if self.config.code_path is not None:
            try:
                code = Path(self.config.code_path).expanduser().read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"system.code_path: cannot read it: {exc}") from None
        components = {
            CODE_COMPONENT: SEED_CODE if code is None else code,
            PROMPT_COMPONENT: self.config.system_prompt or SEED_PROMPT,
        }
        components.update({SKILL_PREFIX + k: v for k, v in self.config.skills.items()})
        problem = code_problem(components[CODE_COMPONENT])
        if problem is not None:
            raise ConfigError(f"system.code: {problem}")
        return components

    # System protocol

    def seed_candidate(self) -> Candidate:
        return Candidate(components=dict(self.seed))

    def version(self) -> str:
        limits = self.config.model_dump(include={"max_llm_calls", "max_env_actions", "timeout_s"})
        return content_hash(
            {"harness": self.config.environment, "limits": limits, "components": sorted(self.seed)}
        )

    def check_inputs(self, fields: set[str]) -> None:
        """Nothing to check: the environment reads the example's input itself."""

    def candidate_problem(self, candidate: Candidate) -> str | None:
        """Why the candidate's code cannot run (checked before any budget is spent), or None."""
        return code_problem(self.components(candidate)[CODE_COMPONENT])

    def components(self, candidate: Candidate) -> dict[str, str]:
        return {**self.seed, **candidate.components}

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        components = self.components(candidate)
        code = components[CODE_COMPONENT]
        problem = code_problem(code)
        if problem is not None:
            return SystemRun(error=f"episode stopped (invalid): {problem}")
        env = self.factory()
        try:
            instruction = str(await maybe_await(env.reset(dict(ctx.example.input))))
            setup = self._setup(instruction, components)
            episode = Episode(env, ctx.lm, self._limits(), self.tool_names)
            result = await run_in_process(self.pool, code, setup, episode)
            return await self._outcome(env, instruction, result)
        finally:
            _close(env)

    # ProposesCode

    def is_code_component(self, name: str) -> bool:
        return name.startswith(CODE_PREFIX)

    def code_problem(self, source: str) -> str | None:
        return code_problem(source)

    async def smoke_test(self, candidate: Candidate, ctx: RunContext) -> str | None:
        """Run one episode unscored: why the code is broken (it crashed, raised, exited or
        hung), or None."""
        run = await self.run(candidate, ctx)
        if run.error is None:
            return None
        reason = run.error.split("(", 1)[-1].split(")", 1)[0]
        return run.error if reason in CRASHES else None

    def _setup(self, instruction: str, components: Mapping[str, str]) -> dict[str, Any]:
        skills = {
            name[len(SKILL_PREFIX) :]: text
            for name, text in components.items()
            if name.startswith(SKILL_PREFIX)
        }
        tools = [*self.env_tools, SUBMIT_TOOL, *([READ_SKILL_TOOL] if skills else [])]
        return {
            "instruction": instruction,
            "system_prompt": render_system_prompt(components[PROMPT_COMPONENT], tools, skills),
            "tools": tools,
            "skills": skills,
        }

    def _limits(self) -> Limits:
        timeout = self.config.timeout_s
        if timeout is None:
            scope = current_scope()
            rollout_limit = scope.rollout.config.timeout_seconds if scope is not None else None
            timeout = TIMEOUT_SHARE * rollout_limit if rollout_limit else DEFAULT_TIMEOUT_S
        return Limits(self.config.max_llm_calls, self.config.max_env_actions, timeout)

    async def _outcome(self, env: Any, instruction: str, result: EpisodeResult) -> SystemRun:
        call = ComponentCall(
            component=CODE_COMPONENT,
            inputs={"instruction": instruction},
            reply=result.answer or "",
            output=result.answer,
        )
        if result.stop_reason != "answer":
            error = f"episode stopped ({result.stop_reason}): {result.message}".strip()
            call.error = error
            return SystemRun(calls=[call], error=error)
        check = getattr(env, "check", None)
        if not callable(check):
            return SystemRun(output=result.answer, calls=[call])
        verdict = await maybe_await(check(result.answer))
        if verdict is None:
            return SystemRun(output=result.answer, calls=[call])
        score, feedback = verdict if isinstance(verdict, tuple) else (verdict, None)
        return SystemRun(output=result.answer, calls=[call], reward=float(score), feedback=feedback)


def _close(env: Any) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        close()


def build(config: CodeHarnessConfig) -> System:
    return CodeHarness(config)


KIND = SystemKind(name="code_harness", config=CodeHarnessConfig, build=build)
