"""Code nodes on the job side: each call of a node's function runs in a pooled worker
process (``node_worker``) under a time limit, never in the job's or the server's process.

Whatever the code does (raise, call ``sys.exit`` or ``os._exit``, loop forever, return a
value that is not JSON) ends that one call with a ``CodeFailure``; a worker that crashed,
ran out of time or was cancelled with its rollout (a timed-out or cancelled job) is
killed. At most ``MAX_WORKERS`` calls run at once per event loop, so a map over a long
list does not start a process per item.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time
import weakref
from collections.abc import Mapping
from typing import Any

from emery.systems.graph.spec import CodeNode
from emery.systems.harness.pool import WorkerGone, WorkerPool
from emery.tracing.scope import current_scope

NODE_WORKER = "emery.systems.graph.node_worker"
MAX_WORKERS = min(8, os.cpu_count() or 2)
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_SHARE = 0.9


class CodeFailure(Exception):
    """A code node's call failed; the message says how, in one line."""


def time_limit() -> float:
    """A call's time limit: 0.9 × the rollout's ``timeout_s`` (120 s outside a rollout or
    without one), so the node's own error, not the rollout's, says what ran too long."""
    scope = current_scope()
    rollout_limit = scope.rollout.config.timeout_seconds if scope is not None else None
    return TIMEOUT_SHARE * rollout_limit if rollout_limit else DEFAULT_TIMEOUT_S


class CodeRunner:
    """Calls code nodes' functions in the worker processes of ``pool``."""

    def __init__(self, pool: WorkerPool, max_workers: int = MAX_WORKERS) -> None:
        self.pool = pool
        self.max_workers = max_workers
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._slots = weakref.WeakKeyDictionary()

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._slots[loop] = asyncio.Semaphore(self.max_workers)
        return slot

    async def call(
        self, node: CodeNode, arguments: Mapping[str, Any], timeout_s: float | None = None
    ) -> Any:
        """The value of ``node``'s function on ``arguments`` (``CodeFailure`` when none)."""
        limit = time_limit() if timeout_s is None else timeout_s
        message = {
            "type": "call",
            "node": node.name,
            "source": node.source,
            "function": node.function_name(),
            "arguments": dict(arguments),
        }
        async with self._slot():
            worker = await self.pool.acquire()
            healthy = False
            try:
                deadline = time.monotonic() + limit
                worker.send(message)
                reply = await worker.receive(deadline - time.monotonic())
                healthy = True
            except TimeoutError:
                raise CodeFailure(f"no value within {limit:g} s (the call was stopped)") from None
            except WorkerGone:
                ended = worker.exit_text()
                raise CodeFailure(f"the code ended its worker process ({ended})") from None
            finally:
                self.pool.release(worker, healthy)
        if reply.get("type") != "value":
            raise CodeFailure(str(reply.get("message", reply)))
        return reply.get("value")


POOL = WorkerPool(keep=MAX_WORKERS, module=NODE_WORKER)
atexit.register(POOL.close)
RUNNER = CodeRunner(POOL)
