"""One episode on the job side: serve the episode process's kit requests against the task model
and the environment, enforce the caps and the time limit, and record the transcript.

Every environment action is a tool span written here (the episode process never writes spans), so
harness code cannot fake or reorder its transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emery.core.models import ChatMessage
from emery.core.work_clock import current_clock
from emery.lm.base import LM
from emery.systems.harness.environment import Environment, as_observation, maybe_await
from emery.systems.harness.episode_process import KIT_REQUESTS
from emery.systems.harness.observation import Observation
from emery.systems.harness.pool import CodeProcessPool, ProcessGone
from emery.tracing.emitters import emit_annotation, emit_message, tool_call


@dataclass(frozen=True)
class Limits:
    """Per-episode caps and time limit."""

    max_llm_calls: int
    max_env_actions: int
    timeout_s: float


@dataclass
class EpisodeResult:
    """How an episode ended: the answer (when ``run`` returned one) and the stop reason."""

    stop_reason: str
    answer: str | None = None
    message: str = ""
    llm_calls: int = 0
    env_actions: int = 0


def _budget(message: str) -> dict[str, Any]:
    return {"ok": False, "reason": "budget", "message": message}


class Episode:
    """The job side of one episode's kit requests."""

    def __init__(self, env: Environment, lm: LM, limits: Limits, tools: Sequence[str]) -> None:
        self.env, self.lm, self.limits = env, lm, limits
        self.tools = frozenset(tools)
        self.llm_calls = 0
        self.env_actions = 0
        self.over_budget: str | None = None

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to one kit request."""
        if request.get("type") == "complete":
            return await self._complete(request)
        if request.get("type") == "execute":
            return await self._execute(str(request.get("tool")), request.get("arguments"))
        return {"ok": False, "message": f"unknown kit request {request.get('type')!r}"}

    async def _complete(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self.llm_calls >= self.limits.max_llm_calls:
            self.over_budget = f"max_llm_calls={self.limits.max_llm_calls} exceeded"
            return _budget(self.over_budget)
        self.llm_calls += 1
        messages: list[ChatMessage] = []
        if request.get("system"):
            messages.append({"role": "system", "content": str(request["system"])})
        messages += [
            {"role": str(m["role"]), "content": str(m["content"])}
            for m in request.get("messages") or []
        ]
        completion = await self.lm.complete(
            messages, temperature=request.get("temperature"), max_tokens=request.get("max_tokens")
        )
        return {"ok": True, "value": completion.text}

    async def _execute(self, tool: str, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            arguments = {}
        if tool not in self.tools:
            known = ", ".join(sorted(self.tools))
            observation = Observation(f"unknown tool {tool!r} (tools: {known})", ok=False)
        elif self.env_actions >= self.limits.max_env_actions:
            self.over_budget = f"max_env_actions={self.limits.max_env_actions} exceeded"
            return _budget(self.over_budget)
        else:
            self.env_actions += 1
            try:
                action = {"tool": tool, "arguments": dict(arguments)}
                observation = as_observation(await maybe_await(self.env.execute(action)))
            except Exception as exc:  # an environment bug is an observation, not a crash
                observation = Observation(f"{type(exc).__name__}: {exc}", ok=False)
        with tool_call(tool, dict(arguments)) as span:
            if span is not None:
                span.result(observation.to_dict())
        return {"ok": True, "value": observation.to_dict()}


async def run_in_process(
    pool: CodeProcessPool, code: str, setup: dict[str, Any], episode: Episode
) -> EpisodeResult:
    """Run ``code`` in a pooled episode process until it answers, stops, crashes or runs out
    of time (its own time: waiting on an in-process model does not count, ``work_clock``)."""
    clock = current_clock()
    end = clock.elapsed() + episode.limits.timeout_s

    def left() -> float:
        return end - clock.elapsed()

    result = EpisodeResult("crash")
    healthy = False
    process = await pool.acquire()
    try:
        process.send({"type": "episode", "code": code, "setup": setup})
        while True:
            message = await process.receive(left())
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "done":
                healthy = True
                result = EpisodeResult("answer", answer=str(message.get("answer", "")))
                break
            if kind == "stopped":
                healthy = True
                reason, text = message.get("reason"), message.get("message")
                result = EpisodeResult(str(reason), message=str(text))
                break
            if kind not in KIT_REQUESTS:  # not the protocol: the episode process is replaced
                result = EpisodeResult(
                    "protocol", message=f"the episode process sent {message!r:.120}"
                )
                break
            reply = await _bounded(episode.handle(message), left)
            process.send(reply)
    except TimeoutError:
        limit = episode.limits.timeout_s
        result = EpisodeResult("timeout", message=f"no answer within {limit:g} s")
    except ProcessGone as exc:
        result = EpisodeResult("crash", message=str(exc))
    finally:
        pool.release(process, healthy)
    if episode.over_budget is not None:
        result = EpisodeResult("budget", message=episode.over_budget)
    result.llm_calls, result.env_actions = episode.llm_calls, episode.env_actions
    record_stop(result)
    return result


async def _bounded(awaitable: Any, left: Callable[[], float]) -> dict[str, Any]:
    """The reply, or ``TimeoutError`` once ``left()`` (which a model wait stops) is spent."""
    task = asyncio.ensure_future(awaitable)
    try:
        while (wait := left()) > 0:
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                reply: dict[str, Any] = task.result()
                return reply
    finally:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    raise TimeoutError


def record_stop(result: EpisodeResult) -> None:
    """The transcript's last steps: the stop reason, and an error step when it is not an
    answer."""
    emit_annotation(
        {
            "harness.stop_reason": result.stop_reason,
            "harness.llm_calls": result.llm_calls,
            "harness.env_actions": result.env_actions,
        }
    )
    if result.stop_reason != "answer":
        emit_message(f"episode stopped ({result.stop_reason}): {result.message}")
