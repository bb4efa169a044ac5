"""Budgets: limits on metric calls, LM tokens and cost, wall time, proposals and stagnation."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from emery.core.settings import Settings
from emery.lm.usage import UsageMeter


class BudgetExhausted(Exception):
    """Raised before work that the budget cannot pay for; ``reason`` says which limit."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BudgetConfig(Settings):
    """``[job.budget]``: whichever limit is reached first ends the search."""

    metric_calls: int | None = Field(default=None, ge=0)
    lm_tokens: int | None = Field(default=None, ge=0)
    lm_cost_usd: float | None = Field(default=None, ge=0)
    wall_time_s: float | None = Field(default=None, gt=0)
    max_proposals: int | None = Field(default=None, ge=0)
    no_improvement_iterations: int | None = Field(default=None, ge=1)
    stop_file: str | None = None
    warn_at: float = Field(default=0.8, gt=0, le=1)


class BudgetUsage(BaseModel):
    """What the search has spent; checkpointed with the algorithm state."""

    metric_calls: int = 0
    proposals: int = 0
    wall_time_s: float = 0.0
    iterations: int = 0
    iterations_since_improvement: int = 0
    warned: list[str] = Field(default_factory=list)


Clock = Callable[[], float]
"""Seconds from an arbitrary start (``time.perf_counter``; tests pass a fake one)."""


class Budget:
    """Tracks spending against a ``BudgetConfig``; LM tokens and cost come from the meter,
    wall time from ``clock``."""

    def __init__(
        self,
        config: BudgetConfig,
        meter: UsageMeter,
        usage: BudgetUsage | None = None,
        search_roles: tuple[str, ...] = ("task", "reflection", "proposer", "judge"),
        clock: Clock = time.perf_counter,
    ) -> None:
        self.config = config
        self.meter = meter
        self.usage = usage or BudgetUsage()
        self.search_roles = search_roles
        self.clock = clock

    def remaining_metric_calls(self) -> int | None:
        if self.config.metric_calls is None:
            return None
        return max(0, self.config.metric_calls - self.usage.metric_calls)

    def can_afford(self, metric_calls: int) -> bool:
        remaining = self.remaining_metric_calls()
        return remaining is None or metric_calls <= remaining

    def charge_metric_calls(self, count: int) -> None:
        """Pay for ``count`` new scored rollouts, or raise BudgetExhausted and pay nothing."""
        if not self.can_afford(count):
            raise BudgetExhausted(
                f"metric_calls: {count} more would exceed the limit of {self.config.metric_calls}"
                f" ({self.usage.metric_calls} used)"
            )
        self.usage.metric_calls += count

    def count_proposal(self) -> None:
        self.usage.proposals += 1

    def lm_tokens(self) -> int:
        by_role = self.meter.by_role()
        return sum(by_role[r].total_tokens for r in self.search_roles if r in by_role)

    def lm_cost(self) -> float:
        by_role = self.meter.by_role()
        return sum(by_role[r].cost_usd for r in self.search_roles if r in by_role)

    def exhausted(self) -> str | None:
        """The first limit reached, as a reason string; None while the search may go on."""
        c, u = self.config, self.usage
        checks: list[tuple[str, float, float | None]] = [
            ("metric_calls", u.metric_calls, c.metric_calls),
            ("lm_tokens", self.lm_tokens(), c.lm_tokens),
            ("lm_cost_usd", self.lm_cost(), c.lm_cost_usd),
            ("wall_time_s", u.wall_time_s, c.wall_time_s),
            ("max_proposals", u.proposals, c.max_proposals),
        ]
        for name, used, limit in checks:
            if limit is not None and used >= limit:
                return f"{name}: {used:g} of {limit:g} used"
        stagnant = c.no_improvement_iterations
        if stagnant is not None and u.iterations_since_improvement >= stagnant:
            return (
                f"no_improvement: {u.iterations_since_improvement} iterations"
                " without a better score"
            )
        if c.stop_file is not None and Path(c.stop_file).exists():
            return f"stop_file: {c.stop_file} exists"
        return None

    def warnings(self) -> list[tuple[str, float, float]]:
        """Limits newly past ``warn_at`` of their value (each reported once)."""
        c, u = self.config, self.usage
        out = []
        for name, used, limit in (
            ("metric_calls", u.metric_calls, c.metric_calls),
            ("lm_tokens", self.lm_tokens(), c.lm_tokens),
            ("lm_cost_usd", self.lm_cost(), c.lm_cost_usd),
            ("wall_time_s", u.wall_time_s, c.wall_time_s),
        ):
            if limit and name not in u.warned and used >= c.warn_at * limit:
                u.warned.append(name)
                out.append((name, float(used), float(limit)))
        return out

    def record_iteration(self, improved: bool) -> None:
        self.usage.iterations += 1
        self.usage.iterations_since_improvement = (
            0 if improved else self.usage.iterations_since_improvement + 1
        )
