"""How one call of a hosted model is sent, waited for and sent again.

``send_call`` admits the call through the model's ``Throttle`` and reads a failure as its
provider means it (``provider_errors.classify``): a rate limit is waited out for as long as
the provider asks (backoff when it does not say), up to ``max_wait_s`` for the call, and
never uses up an attempt; a passing fault is retried with exponential backoff and full
jitter, up to ``max_attempts``; a refusal of the job's settings raises ``ProviderRefused``
at once; a rejected request fails at once. The waits are model waits
(``waiting_on_model``): a rollout's time limit does not count them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from emery.core.work_clock import waiting_on_model
from emery.lm.base import Completion, LMError
from emery.lm.provider_errors import ProviderRefused, ProviderUnavailable, classify
from emery.lm.throttle import Throttle, Ticket

log = logging.getLogger(__name__)


class RetryPolicy(BaseModel):
    """How often and how patiently to send a call again."""

    max_attempts: int = 5
    """Attempts for passing faults (5xx, timeouts, dropped connections)."""
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_wait_s: float = 600.0
    """How long one call may wait on its provider's rate limit in all."""
    rate_limit_base_s: float = 1.0
    """The first wait after a rate-limit answer that does not say how long; doubled each
    time, up to ``rate_limit_max_s``."""
    rate_limit_max_s: float = 60.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)))

    def rate_limit_wait(self, answers: int, rng: random.Random) -> float:
        """Seconds to wait after the ``answers``-th rate-limit answer that named no wait."""
        ceiling = min(self.rate_limit_max_s, self.rate_limit_base_s * 2 ** (answers - 1))
        return rng.uniform(ceiling / 2, ceiling)


async def send_call(
    send: Callable[[], Awaitable[Completion]],
    *,
    name: str,
    throttle: Throttle,
    policy: RetryPolicy,
    tokens: float,
    rng: random.Random,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Completion:
    """``send()``'s completion, sent through ``throttle`` under ``policy``; ``name`` (the
    model as configured, e.g. ``openai/gpt-4.1-mini``) names it in errors."""
    attempt, limited, waited = 1, 0, 0.0
    ticket: Ticket | None = None
    while True:
        with waiting_on_model():
            start = throttle.clock()
            if ticket is None:
                ticket = await throttle.admit(tokens)
            else:
                ticket = await throttle.admit_again(ticket)
            waited += max(0.0, throttle.clock() - start) if limited else 0.0
        try:
            completion = await send()
        except asyncio.CancelledError:
            throttle.failed(ticket)
            raise
        except Exception as exc:
            fault = classify(exc)
            if fault.kind == "rate_limited":
                limited += 1
                wait = fault.wait_s
                if wait is None:
                    wait = policy.rate_limit_wait(limited, rng)
                if waited + wait > policy.max_wait_s:
                    throttle.failed(ticket)
                    raise ProviderUnavailable(
                        f"{name} kept a call waiting on its rate limit for {waited:.0f} s"
                        f" and asks for {wait:.0f} s more ({fault.reason}); the model's"
                        f" max_wait_s is {policy.max_wait_s:g}: resume the job when its"
                        " limit allows"
                    ) from exc
                log.info("%s rate-limited (%s): waiting %.1f s", name, fault.reason, wait)
                throttle.limited(wait)
                continue
            throttle.failed(ticket)
            if fault.kind == "refused":
                raise ProviderRefused(f"{name}: {fault.reason}") from exc
            if fault.kind == "transient" and attempt < policy.max_attempts:
                delay = max(fault.wait_s or 0.0, policy.delay(attempt, rng))
                log.warning("%s: %s, retry %d in %.2f s", name, fault.reason, attempt, delay)
                with waiting_on_model():
                    await sleep(delay)
                attempt += 1
                continue
            raise LMError(f"{name}: {fault.reason}") from exc
        throttle.done(ticket, used_tokens=completion.usage.total_tokens)
        if limited:
            waits = {"rate_limited": limited, "rate_limit_wait_s": waited}
            completion = completion.model_copy(update=waits)
        return completion
