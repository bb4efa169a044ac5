"""Budgets: limits on metric calls, LM tokens and cost, wall time, proposals and stagnation.

The LM token and cost limits cover every role together (task, reflection, proposer,
judge). Between steps ``exhausted`` ends the search; within a step, ``gate`` is checked
before each search-role call (``BudgetedLM``) and before each rollout of a batch, so a
step stops within one call (one rollout per lane) of the LM limits or the wall time, not
at its end: the gate raises ``BudgetExhausted`` and the search loop abandons the step
whole, as it does one the metric calls cannot pay for. ``within_wall_time`` also cuts the
calls in flight when the wall time runs out. Wall time is read from ``clock`` (tests pass
a fake one); only the search's steps and start count, not the test scoring after it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from emery.core.models import ChatMessage
from emery.core.plan_events import BudgetPlanned
from emery.core.settings import Settings
from emery.core.work_clock import wait_while
from emery.lm.base import LM, Completion
from emery.lm.usage import UsageMeter
from emery.lm.wrapper import LMWrapper

T = TypeVar("T")


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
        self.gated = False
        """Whether ``gate`` refuses work past the LM limits and the wall time (only while a
        step runs)."""
        self.cut: str | None = None
        """The limit the gate refused work for in the running step (None: it did not)."""
        self.step_started: float | None = None
        """``clock`` when the running step began (None between steps)."""

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
        """Tokens of every role's calls, those the LM cache answered included (at what
        they took when first made: a repeated step spends as the first try did)."""
        by_role = self.meter.by_role()
        return sum(by_role[r].budget_tokens for r in self.search_roles if r in by_role)

    def lm_cost(self) -> float:
        """Cost of every role's calls, cache hits at their first cost (see ``lm_tokens``)."""
        by_role = self.meter.by_role()
        return sum(by_role[r].budget_cost_usd for r in self.search_roles if r in by_role)

    def lm_limit_reached(self) -> str | None:
        """``lm_tokens: 1200 of 1000 used`` when the LM token or cost limit is reached."""
        c = self.config
        for name, limit, used in (
            ("lm_tokens", c.lm_tokens, self.lm_tokens),
            ("lm_cost_usd", c.lm_cost_usd, self.lm_cost),
        ):
            if limit is not None and (spent := used()) >= limit:
                return f"{name}: {spent:g} of {limit:g} used"
        return None

    def wall_time_used(self) -> float:
        """Seconds of search: the committed steps' and the running step's so far."""
        running = 0.0 if self.step_started is None else self.clock() - self.step_started
        return self.usage.wall_time_s + running

    def wall_time_left(self) -> float:
        """Seconds left before the wall-time limit (``inf`` without one)."""
        limit = self.config.wall_time_s
        return float("inf") if limit is None else limit - self.wall_time_used()

    def wall_time_reached(self) -> str | None:
        """``wall_time_s: 312 of 300 used`` once the search has used its wall time."""
        limit = self.config.wall_time_s
        if limit is None or (used := self.wall_time_used()) < limit:
            return None
        return f"wall_time_s: {used:g} of {limit:g} used"

    def gate(self) -> None:
        """Before an LM call or a rollout: raise ``BudgetExhausted`` when a step is running
        and the LM token or cost limit or the wall time is reached (remembering the cut in
        ``cut``)."""
        if not self.gated:
            return
        reached = self.cut or self.lm_limit_reached() or self.wall_time_reached()
        if reached is not None:
            self.cut = reached
            raise BudgetExhausted(reached)

    @contextmanager
    def step_gate(self) -> Iterator[None]:
        """Arm ``gate`` for one step and time it (the seed's baseline is scored in full: a
        limit it spends stops the search after it, see ``algorithms.pace``)."""
        self.gated, self.cut, self.step_started = True, None, self.clock()
        try:
            yield
        finally:
            self.gated, self.cut, self.step_started = False, None, None

    async def within_wall_time(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``'s result; when the wall time runs out first, ``work`` (its calls and
        rollouts in flight) is cancelled, waited for and ``BudgetExhausted`` raised. Either
        way, and when the caller is cancelled (a pause), ``work`` has unwound on return."""
        if self.config.wall_time_s is None:
            return await work
        task = asyncio.ensure_future(work)
        try:
            await wait_while(task, self.wall_time_left)
        except asyncio.CancelledError:
            await asyncio.wait({task})  # unwound before the caller rolls the step back
            raise
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        if not task.cancelled() and task.exception() is None:
            return task.result()  # it finished as it was cancelled
        self.cut = self.cut or self.wall_time_reached() or "wall_time_s"
        raise BudgetExhausted(self.cut)

    def guard(self, lm: LM) -> LM:
        """``lm`` with ``gate`` checked before each call."""
        return BudgetedLM(lm, self)

    def plan(self) -> BudgetPlanned:
        """The limits as the line printed before the search (event ``budget_planned``)."""
        c = self.config
        return BudgetPlanned(
            summary=describe_limits(c, self.search_roles),
            metric_calls=c.metric_calls,
            lm_tokens=c.lm_tokens,
            lm_cost_usd=c.lm_cost_usd,
            wall_time_s=c.wall_time_s,
            max_proposals=c.max_proposals,
            no_improvement_iterations=c.no_improvement_iterations,
            stop_file=c.stop_file,
            roles=list(self.search_roles),
        )

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


def describe_limits(config: BudgetConfig, roles: Sequence[str]) -> str:
    """``budget: 200 metric calls; 50000 LM tokens and $0.5 over task, reflection, proposer
    and judge calls together, checked before each call and rollout; 600 s search time
    (...)``."""
    c = config
    parts = []
    if c.metric_calls is not None:
        parts.append(f"{c.metric_calls} metric calls")
    lm = [f"{c.lm_tokens} LM tokens"] if c.lm_tokens is not None else []
    if c.lm_cost_usd is not None:
        lm.append(f"${c.lm_cost_usd:g} of LM cost")
    if lm:
        named = ", ".join(roles[:-1]) + f" and {roles[-1]}" if len(roles) > 1 else "".join(roles)
        parts.append(
            f"{' and '.join(lm)} over {named} calls together, checked before each call and"
            " rollout (cache hits count)"
        )
    if c.wall_time_s is not None:
        parts.append(
            f"{c.wall_time_s:g} s search time (a step is cut when it runs out; the test"
            " scoring after the search not counted)"
        )
    if c.max_proposals is not None:
        parts.append(f"{c.max_proposals} proposals")
    if c.no_improvement_iterations is not None:
        parts.append(f"stop after {c.no_improvement_iterations} iterations without a better score")
    if c.stop_file is not None:
        parts.append(f"stop when {c.stop_file} exists")
    if not parts:
        return "budget: no limits (the algorithm's own settings end the search)"
    return "budget: " + "; ".join(parts)


class BudgetedLM(LMWrapper):
    """``inner`` asking its budget's ``gate`` before each call: a search role's model
    (reflection, proposer, judge, or the task model called outside a rollout)."""

    def __init__(self, inner: LM, budget: Budget) -> None:
        super().__init__(inner)
        self.budget = budget

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        self.budget.gate()
        return await self.inner.complete(messages, **params)
