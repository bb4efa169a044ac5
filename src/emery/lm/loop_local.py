"""Objects bound to an asyncio event loop, created once per loop."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LoopLocal(Generic[T]):
    """One instance of ``factory()`` per running event loop.

    asyncio primitives and HTTP clients belong to the loop that first used them; the sync
    SDK starts a new loop per call, so shared objects must be made per loop.
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            value = self._by_loop.get(loop)
            if value is None:
                value = self._factory()
                self._by_loop[loop] = value
            return value
