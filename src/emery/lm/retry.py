"""Exponential backoff with full jitter for transient model-call failures."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel

T = TypeVar("T")
log = logging.getLogger(__name__)


class RetryPolicy(BaseModel):
    """How often and how patiently to retry a failed call."""

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    is_transient: Callable[[BaseException], bool],
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await ``call()``; on a transient error wait and try again, up to the policy's attempts."""
    rng = rng or random.Random()
    attempt = 1
    while True:
        try:
            return await call()
        except Exception as exc:
            if attempt >= policy.max_attempts or not is_transient(exc):
                raise
            wait = policy.delay(attempt, rng)
            log.warning("transient LM error (%s), retry %d in %.2fs", exc, attempt, wait)
            await sleep(wait)
            attempt += 1
