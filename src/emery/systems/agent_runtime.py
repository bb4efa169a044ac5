"""How function agents run: one candidate's module-level texts bound at a time (sync agents
run in their own threads: ``emery.core.user_code``)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType


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
