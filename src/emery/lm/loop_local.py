"""Objects bound to an asyncio event loop, created once per loop and closed with it."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


async def _close_at_shutdown(close: Callable[[], Awaitable[object]]) -> AsyncIterator[None]:
    """An async generator the loop finalizes in ``shutdown_asyncgens`` (``asyncio.run`` does)."""
    try:
        yield
    finally:
        await close()


class LoopLocal(Generic[T]):
    """One instance of ``factory()`` per running event loop.

    asyncio primitives and HTTP clients belong to the loop that first used them; the sync
    SDK starts a new loop per call, so shared objects must be made per loop. When the
    loop shuts down, ``close(value)`` is awaited, so no client outlives its loop.
    """

    def __init__(
        self,
        factory: Callable[[], T],
        close: Callable[[T], Awaitable[object]] | None = None,
    ) -> None:
        self._factory = factory
        self._close = close
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[T, AsyncIterator[None] | None]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._by_loop.get(loop)
            if entry is not None:
                return entry[0]
            value = self._factory()
            closer = None
            if self._close is not None:
                close = self._close
                closer = _close_at_shutdown(lambda: close(value))
            self._by_loop[loop] = (value, closer)
        if closer is not None:
            await anext(closer)
        return value
