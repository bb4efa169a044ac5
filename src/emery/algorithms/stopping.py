"""When a search stops: the one place that turns the three kinds of stop into a reason.

A search stops when its algorithm says it is done (``state.done``: nothing left to try,
its own limits such as GEPA's ``max_iterations``), when a budget limit is reached, or when
someone outside asks it to (the job engine's pause and cancel, given as a callable).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from emery.algorithms.base import AlgorithmState
from emery.evaluation.budget import Budget

StopRequest = Callable[[], str | None]


@dataclass
class StopPolicy:
    """Decides, before each step, whether the search goes on."""

    budget: Budget
    requested: StopRequest | None = None

    def reason(self, state: AlgorithmState) -> str | None:
        """Why the search stops now, or None while it may go on."""
        if state.done:
            return state.done_reason or "converged"
        limit = self.budget.exhausted()
        if limit is not None:
            return limit
        return self.requested() if self.requested is not None else None

    def out_of_budget(self) -> str:
        """Why the search stops after a step the budget could not pay for (the step needed
        more than was left, even when no limit reads as reached yet)."""
        return self.budget.exhausted() or "metric_calls"
