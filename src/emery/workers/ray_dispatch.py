"""How a ``ray`` job hands rollouts to Ray: one task per rollout (``TaskDispatch``, for
stateless systems) or a pool of long-lived actors (``ActorPool``, for systems with setup
cost: each actor builds the job's system once and runs rollouts in turn).

Both run one rollout per ``run`` call, and cancelling the call cancels its Ray work; Ray's
own retries are off, since a lost worker's attempt is retried by the job (``RayExecutor``)
as its rollout's ``max_attempts`` allow.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from emery.workers.ray_worker import Build, RolloutActor, run_rollout


class Dispatch(Protocol):
    """Runs one rollout on Ray (a cancelled call cancels it there); ``close`` releases
    what the dispatch holds."""

    async def run(self, *args: Any) -> dict[str, Any]: ...

    def close(self) -> None: ...


class TaskDispatch:
    """Each rollout is a Ray task of one CPU (worker processes keep their evaluator)."""

    def __init__(self, ray: Any, key: str, build: Build) -> None:
        self.ray = ray
        self.key = key
        self.build = build
        self.task = ray.remote(max_retries=0, num_cpus=1)(run_rollout)

    async def run(self, *args: Any) -> dict[str, Any]:
        ref = self.task.remote(self.key, self.build, *args)
        try:
            result: dict[str, Any] = await ref
        except asyncio.CancelledError:
            self.ray.cancel(ref, force=True)  # the worker process is killed
            raise
        return result

    def close(self) -> None:
        """Nothing to release: Ray keeps or recycles its worker processes."""


class ActorPool:
    """``size`` actors of one CPU each, started on first use and kept until ``close``; a
    rollout waits for an idle actor. An actor that dies is replaced by a new one."""

    def __init__(self, ray: Any, build: Build, size: int) -> None:
        self.ray = ray
        self.build = build
        self.size = size
        self.actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(RolloutActor)
        self.actors: list[Any] = []
        self._idle: asyncio.Queue[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _idle_actors(self) -> asyncio.Queue[Any]:
        """The idle actors, as a queue of this event loop (the first call starts them)."""
        if not self.actors:
            self.actors = [self.actor_class.remote(self.build) for _ in range(self.size)]
        loop = asyncio.get_running_loop()
        if self._idle is None or self._loop is not loop:
            self._idle, self._loop = asyncio.Queue(), loop
            for actor in self.actors:
                self._idle.put_nowait(actor)
        return self._idle

    async def run(self, *args: Any) -> dict[str, Any]:
        idle = self._idle_actors()
        actor = await idle.get()
        ref = actor.run.remote(*args)
        try:
            result: dict[str, Any] = await ref
        except asyncio.CancelledError:
            self.ray.cancel(ref)  # an async actor's call: its asyncio task is cancelled
            raise
        except self.ray.exceptions.RayActorError:
            actor = self._replace(actor)
            raise
        finally:
            idle.put_nowait(actor)
        return result

    def _replace(self, dead: Any) -> Any:
        fresh = self.actor_class.remote(self.build)
        self.actors = [fresh if actor is dead else actor for actor in self.actors]
        return fresh

    def close(self) -> None:
        """Stop the actors (they hold their CPUs while they live)."""
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors, self._idle, self._loop = [], None, None
