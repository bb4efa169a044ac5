"""How function agents run: sync agents in their own threads, one candidate's module-level
texts bound at a time."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass
class ModuleString:
    module: ModuleType
    attribute: str
    original: str


class CandidateGate:
    """Lets rollouts of one candidate run together; another candidate waits its turn.

    Needed when components are module-level strings: there is one module, so only one
    candidate's texts can be bound at a time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conditions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Condition
        ] = weakref.WeakKeyDictionary()
        self.active: str | None = None
        self.count = 0

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        with self._lock:
            if loop not in self._conditions:
                self._conditions[loop] = asyncio.Condition()
            return self._conditions[loop]

    @asynccontextmanager
    async def hold(
        self, key: str, bind: Callable[[], None], unbind: Callable[[], None]
    ) -> AsyncIterator[None]:
        """Run the block once ``key`` may run: the first of a group binds, the last unbinds."""
        condition = self._condition()
        async with condition:
            await condition.wait_for(lambda: self.active in (None, key))
            if self.active is None:
                bind()
            self.active = key
            self.count += 1
        try:
            yield
        finally:
            async with condition:
                self.count -= 1
                if self.count == 0:
                    unbind()
                    self.active = None
                    condition.notify_all()


class AgentExited(RuntimeError):
    """The agent called ``sys.exit``: a failed attempt, not the end of the job."""

    def __init__(self, exc: SystemExit) -> None:
        super().__init__(f"the agent exited (SystemExit: {exc.code!r})")


def call_in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a sync agent in its own daemon thread (a hung agent never blocks a shared pool)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        error: BaseException | None = None
        try:
            result = context.run(fn, **kwargs)
        except SystemExit as exc:
            result, error = None, AgentExited(exc)
        except BaseException as exc:
            result, error = None, exc
        # A closed loop means the rollout was abandoned long ago: nobody waits.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, daemon=True, name="emery-agent").start()
    return future
