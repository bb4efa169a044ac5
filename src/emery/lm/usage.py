"""Usage and cost accounting per role (task, reflection, proposer, judge)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel

from emery.core.example_result import RoleUsage as RoleUsage
from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion
from emery.lm.wrapper import LMWrapper

ROLES = ("task", "reflection", "proposer", "judge")

# USD per million tokens (input, output), from the providers' public price pages.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}


class Price(BaseModel):
    """USD per million input and output tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    @classmethod
    def for_model(cls, model: str) -> Price:
        """The table price of a model name; free for local and unknown models."""
        name = model.rsplit("/", 1)[-1]
        input_price, output_price = PRICES_PER_MTOK.get(name, (0.0, 0.0))
        return cls(input_per_mtok=input_price, output_per_mtok=output_price)

    def cost(self, completion: Completion) -> float:
        usage = completion.usage
        return (
            usage.prompt_tokens * self.input_per_mtok
            + usage.completion_tokens * self.output_per_mtok
        ) / 1e6


class UsageMeter:
    """Thread-safe running totals of LM usage per role."""

    def __init__(self, initial: dict[str, RoleUsage] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_role: dict[str, RoleUsage] = dict(initial or {})

    def record(self, role: str, completion: Completion, cost_usd: float) -> None:
        """Count one call (a cache hit: its tokens and ``cost_usd`` as cached, not paid);
        the ``usage_scope`` of the calling context hears it too."""
        if completion.cached:
            delta = RoleUsage(
                calls=1,
                cache_hits=1,
                cached_tokens=completion.usage.total_tokens,
                cached_cost_usd=cost_usd,
            )
        else:
            delta = RoleUsage(
                calls=1,
                prompt_tokens=completion.usage.prompt_tokens,
                completion_tokens=completion.usage.completion_tokens,
                cost_usd=cost_usd,
                latency_s=completion.latency_s,
                rate_limited=completion.rate_limited,
                rate_limit_wait_s=completion.rate_limit_wait_s,
            )
        self.add({role: delta})
        scope = _SCOPE.get()
        if scope is not None and scope is not self:
            scope.add({role: delta})

    def add(self, usage: Mapping[str, RoleUsage]) -> None:
        """Add usage by role (e.g. what a run on another process spent)."""
        with self._lock:
            for role, delta in usage.items():
                self._by_role[role] = self._by_role.get(role, RoleUsage()).add(delta)

    def by_role(self) -> dict[str, RoleUsage]:
        with self._lock:
            return dict(self._by_role)

    def total(self) -> RoleUsage:
        total = RoleUsage()
        for usage in self.by_role().values():
            total = total.add(usage)
        return total


_SCOPE: ContextVar[UsageMeter | None] = ContextVar("emery_usage_scope", default=None)


@contextmanager
def usage_scope() -> Iterator[UsageMeter]:
    """A meter that hears every call any meter records in this context (this task and
    the tasks it starts): what one rollout spent, whichever models it called."""
    meter = UsageMeter()
    token = _SCOPE.set(meter)
    try:
        yield meter
    finally:
        _SCOPE.reset(token)


class MeteredLM(LMWrapper):
    """Records every call of ``inner`` under ``role`` in a ``UsageMeter``.

    Calls that leave ``temperature`` or ``max_tokens`` unset get this role's defaults.
    """

    def __init__(
        self,
        inner: LM,
        meter: UsageMeter,
        role: str,
        *,
        price: Price | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__(inner)
        self.meter = meter
        self.role = role
        self.price = price or Price.for_model(inner.model)
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        if params.get("temperature") is None:
            params["temperature"] = self.temperature
        if params.get("max_tokens") is None:
            params["max_tokens"] = self.max_tokens
        completion = await self.inner.complete(messages, **params)
        cost = self.price.cost(completion)  # a stated or table price first
        if not cost and completion.cost_usd is not None:
            cost = completion.cost_usd
        self.meter.record(self.role, completion, cost)
        return completion
