"""Code nodes on the job side: each call of a node's function runs in a pooled node process
process (``node_process``) under a time limit, never in the job's or the server's process.

Whatever the code does (raise, call ``sys.exit`` or ``os._exit``, loop forever, return a
value that is not JSON) ends that one call with a ``CodeFailure``; a process that crashed,
ran out of time or was cancelled with its rollout (a timed-out or cancelled job) is
killed. A call may take ``DEFAULT_TIMEOUT_S``, within 0.9 x the rollout's ``timeout_s``.
At most ``MAX_PROCESSES`` calls run at once per event loop, so a map over a long list does
not start a process per item.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emery.systems.graph.spec import CodeNode
from emery.systems.harness.pool import CodeProcessPool, ProcessGone
from emery.tracing.scope import current_scope

NODE_PROCESS = "emery.systems.graph.node_process"
MAX_PROCESSES = min(8, os.cpu_count() or 2)
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_SHARE = 0.9


class CodeFailure(Exception):
    """A code node's call failed; the message says how, in one line."""


@dataclass(frozen=True)
class TimeLimit:
    """When a call must have answered (``time.monotonic()``), and how to say so."""

    deadline: float
    text: str

    def left(self) -> float:
        return self.deadline - time.monotonic()


def time_limit(own_s: float) -> TimeLimit:
    """A call's limit from now: ``own_s``, or sooner 0.9 × the rollout's ``timeout_s`` of
    its attempt's own time (time waiting on an in-process model does not count, as for the
    rollout: ``core.work_clock``), so that the node's own error, not the rollout's timeout,
    says what ran too long."""
    own = TimeLimit(time.monotonic() + own_s, f"{own_s:g} s")
    scope = current_scope()
    timeout = scope.rollout.config.timeout_seconds if scope is not None else None
    if scope is None or not timeout:
        return own
    used = scope.clock.elapsed()
    share = TIMEOUT_SHARE * timeout
    rollout = TimeLimit(
        time.monotonic() + share - used,
        f"{share:g} s of the rollout ({TIMEOUT_SHARE:g} x its timeout_s)",
    )
    return min(own, rollout, key=lambda limit: limit.deadline)


class NodeCaller:
    """Calls code nodes' functions in the node processes of ``pool``, each call within
    ``timeout_s`` (and the rollout's time limit, ``time_limit``)."""

    def __init__(
        self,
        pool: CodeProcessPool,
        max_processes: int = MAX_PROCESSES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.pool = pool
        self.max_processes = max_processes
        self.timeout_s = timeout_s
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._slots = weakref.WeakKeyDictionary()

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._slots[loop] = asyncio.Semaphore(self.max_processes)
        return slot

    async def call(self, node: CodeNode, arguments: Mapping[str, Any]) -> Any:
        """The value of ``node``'s function on ``arguments`` (``CodeFailure`` when none)."""
        message = {
            "type": "call",
            "node": node.name,
            "source": node.source,
            "function": node.function_name(),
            "arguments": dict(arguments),
        }
        async with self._slot():
            process = await self.pool.acquire()
            limit = time_limit(self.timeout_s)
            healthy = limit.left() <= 0  # out of time before it starts: the process is idle
            try:
                if healthy:
                    raise TimeoutError
                process.send(message)
                reply = await process.receive(limit.left())
                healthy = True
            except TimeoutError:
                raise CodeFailure(f"no value within {limit.text}; the call was stopped") from None
            except ProcessGone:
                ended = process.exit_text()
                raise CodeFailure(f"the code ended its node process ({ended})") from None
            finally:
                self.pool.release(process, healthy)
        if reply.get("type") != "value":
            raise CodeFailure(str(reply.get("message", reply)))
        return reply.get("value")


POOL = CodeProcessPool(keep=MAX_PROCESSES, module=NODE_PROCESS)
atexit.register(POOL.close)
CALLER = NodeCaller(POOL)
