"""User code called in the job's own process (python verifiers, ``python/`` models,
function agents): its ``sys.exit`` is an error of that call, never the end of the job, and
a sync function runs in a daemon thread of its own, so a hung one can be abandoned.

``KeyboardInterrupt`` and cancellation pass through unchanged (Ctrl-C still pauses a job).
An async function runs on the job's event loop: one that never awaits cannot be stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class UserCodeExited(RuntimeError):
    """User code called ``sys.exit``: an error of that call, not the end of the job."""

    def __init__(self, who: str, exc: SystemExit) -> None:
        super().__init__(f"the {who} called sys.exit({exc.code!r})")
        self.who = who
        self.code = exc.code


async def awaiting(who: str, awaitable: Awaitable[T]) -> T:
    """The result of user code's ``awaitable``; its ``sys.exit`` raises ``UserCodeExited``.

    Await user code through this, not in a task of its own: ``SystemExit`` leaving a task
    stops the event loop."""
    try:
        return await awaitable
    except SystemExit as exc:
        raise UserCodeExited(who, exc) from None


def call_in_thread(
    who: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> asyncio.Future[Any]:
    """``fn(*args, **kwargs)`` in a daemon thread of its own, with the caller's context
    variables: a hung call never blocks the loop or a shared pool, and is abandoned when
    its waiter gives up. ``sys.exit`` there raises ``UserCodeExited`` naming ``who``."""
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
            result = context.run(fn, *args, **kwargs)
        except SystemExit as exc:
            result, error = None, UserCodeExited(who, exc)
        except BaseException as exc:
            result, error = None, exc
        # A closed loop means the call was abandoned long ago: nobody waits.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, daemon=True, name=f"emery-{who}").start()
    return future


async def call_user_function(who: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for user code ``fn`` (``who`` names it in messages): an async
    one awaited on this loop, a sync one in its own thread (``call_in_thread``; an awaitable
    it returns is awaited here). ``sys.exit`` in either raises ``UserCodeExited``."""
    if inspect.iscoroutinefunction(fn):
        return await awaiting(who, fn(*args, **kwargs))
    result = await call_in_thread(who, fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await awaiting(who, result)
    return result
