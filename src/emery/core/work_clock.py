"""An attempt's own time: wall time less the time it waits on an in-process model.

An in-process model (``LocalLM``) serves every request of its process from one decoder, so
how long a call takes depends on the queue ahead of it and on how busy the machine is, not
on the agent. Such a call runs inside ``waiting_on_model()``; while any call of an attempt
is inside it, the attempt's ``WorkClock`` (made current with ``keeping_time``) stands
still. A call to an in-process model is bounded anyway: by its ``max_tokens`` and context.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")


class WorkClock:
    """Seconds of work since it was made, not counting time held by model waits."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._started = now()
        self._waits = 0  # waits in flight (concurrent calls of one attempt)
        self._held_since = 0.0
        self._held = 0.0  # total of finished holds

    def hold(self) -> None:
        """A model wait began: the clock stops (until every wait has ended)."""
        with self._lock:
            if self._waits == 0:
                self._held_since = self._now()
            self._waits += 1

    def release(self) -> None:
        """A model wait ended."""
        with self._lock:
            self._waits -= 1
            if self._waits == 0:
                self._held += self._now() - self._held_since

    @property
    def held(self) -> bool:
        """Whether a model wait is in flight now."""
        with self._lock:
            return self._waits > 0

    def elapsed(self) -> float:
        """Seconds of work so far."""
        with self._lock:
            now = self._now()
            held = self._held + (now - self._held_since if self._waits else 0.0)
            return now - self._started - held


_clock: ContextVar[WorkClock | None] = ContextVar("emery_work_clock", default=None)


def current_clock() -> WorkClock:
    """The clock model waits hold here; outside an attempt, a new one (wall time)."""
    return _clock.get() or WorkClock()


@contextmanager
def keeping_time(clock: WorkClock) -> Iterator[WorkClock]:
    """Make ``clock`` the one that model waits in the enclosed code (and the tasks and
    threads it starts, through contextvars) hold."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


@contextmanager
def waiting_on_model() -> Iterator[None]:
    """Mark the enclosed wait for an in-process model: the current clock stands still."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    clock.hold()
    try:
        yield
    finally:
        clock.release()


class WorkTimeExceeded(TimeoutError):
    """A call worked past its limit (``within_work_time``); not a ``TimeoutError`` the
    call itself raised."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no result within {seconds:g} s")
        self.seconds = seconds


async def within_work_time(coro: Coroutine[Any, Any, T], seconds: float) -> T:
    """``coro``'s result, or ``WorkTimeExceeded`` once it has worked ``seconds`` on a clock of
    its own (its in-process model waits not counted); it is cancelled then, and a thread
    it waits on is abandoned. ``coro`` runs as a task: it must not let ``SystemExit`` out
    (``emery.core.user_code``)."""
    clock = WorkClock()
    with keeping_time(clock):
        task = asyncio.ensure_future(coro)  # the task's context holds the clock
    await wait_while(task, lambda: seconds - clock.elapsed())
    if task.done():
        return task.result()
    task.cancel()
    raise WorkTimeExceeded(seconds)


async def wait_while(task: asyncio.Future[Any], left: Callable[[], float]) -> None:
    """Wait until ``task`` is done or ``left()`` (seconds, read on any clock that runs no
    faster than wall time) is no longer positive; cancelled here, it cancels ``task``."""
    try:
        while not task.done() and (seconds := left()) > 0:
            await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
