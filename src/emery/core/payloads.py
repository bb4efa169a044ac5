"""Typed payloads of the job's own event kinds (state changes, evaluations, best, budget).

The algorithms' own kinds are in ``search_events``; ``events`` maps every kind to its model.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    """Base of event payloads; ``kind`` is the event kind a model is the payload of."""

    model_config = ConfigDict(extra="forbid")
    kind: ClassVar[str] = ""


class StateChanged(Payload):
    """created, queued, started, paused, resumed, succeeded, failed, cancelled."""

    state: str
    reason: str | None = None


class BaselineEvaluated(Payload):
    kind: ClassVar[str] = "baseline_evaluated"
    candidate_id: str
    split: str
    score: float
    n: int


class WarmStartScored(Payload):
    """A candidate of an earlier job (``[job] warm_start``) rescored on this job's val:
    ``earlier_score`` is what it scored on the earlier job's val (None if unknown)."""

    kind: ClassVar[str] = "warm_start.scored"
    job_id: str
    candidate_id: str
    earlier_score: float | None
    score: float
    n: int


class CandidateProposed(Payload):
    kind: ClassVar[str] = "candidate_proposed"
    candidate_id: str
    parents: list[str]
    operation: str
    components: list[str] = Field(default_factory=list)


class CandidateEvaluated(Payload):
    kind: ClassVar[str] = "candidate_evaluated"
    candidate_id: str
    split: str
    score: float
    n: int
    new_rollouts: int = 0
    failed: int = 0
    """Of the ``n`` results, runs that failed (scored 0 for an error, not an answer)."""
    timeouts: int = 0
    """Of the failed runs, those that ran out of time or fell silent."""
    unreadable: int = 0
    """Of the ``n`` results, replies the parser could not read (scored 0 as wrong answers,
    not failed)."""


class RolloutsFailed(Payload):
    """A warning: some of the seed's rollouts failed (so its baseline is understated)."""

    kind: ClassVar[str] = "rollouts_failed"
    candidate_id: str
    split: str
    n: int
    failed: int
    timeouts: int = 0
    example_id: str
    error: str


class BestUpdated(Payload):
    """The best candidate by val changed (the seed becoming the first best included)."""

    kind: ClassVar[str] = "best_updated"
    candidate_id: str
    score: float
    previous_score: float | None = None


class FrontierUpdated(Payload):
    kind: ClassVar[str] = "frontier_updated"
    size: int
    best_candidate_id: str
    best_score: float


class IterationCompleted(Payload):
    kind: ClassVar[str] = "iteration_completed"
    iteration: int
    metric_calls: int
    best_score: float | None = None


class CheckpointSaved(Payload):
    kind: ClassVar[str] = "checkpoint_saved"
    iteration: int


class BudgetWarning(Payload):
    kind: ClassVar[str] = "budget_warning"
    resource: str
    used: float
    limit: float


SPENDING_LIMITS = {
    "wall_time_s": "wall-time",
    "metric_calls": "metric-call",
    "lm_tokens": "LM-token",
    "lm_cost_usd": "LM-cost",
}
"""The budget limits the seed's evaluation spends, by the words a message names them in."""


class SearchNotRun(Payload):
    """A warning: the seed's evaluation spent a budget limit (``limit``, such as
    ``wall_time_s``), so the search stops before its first step with the seed as best; or,
    with ``first_step``, the limit cut the first step short, so no step was kept."""

    kind: ClassVar[str] = "search_not_run"
    limit: str
    reason: str
    """The stop reason the limit gave (``wall_time_s: 12.3 of 10 used``)."""
    first_step: bool = False

    def message(self) -> str:
        name = SPENDING_LIMITS.get(self.limit, self.limit)
        if self.first_step:
            return (
                f"the search completed no step: the {name} budget ran out in its first step"
                f" ({self.reason}), so the best is the seed; raise job.budget.{self.limit}"
                " to search"
            )
        return (
            f"the search never ran: the {name} budget was spent on the seed's evaluation"
            f" ({self.reason}); raise job.budget.{self.limit} to search"
        )


class PlanPayload(Payload):
    """The shape every ``*.plan`` event shares (``mipro.plan``, ``gepa.plan``,
    ``apo.plan``, ``baseline.plan``): what the algorithm will run given the budget,
    recorded at its start.

    ``summary``: the one line the CLI prints; ``metric_calls``: the planned metric calls
    of each phase and their ``total`` (upper bounds); ``notes``: what the budget changed
    or cuts short. ``planned_trials`` and ``setup_calls`` say how the calls after the
    seed's split into the algorithm's trials (``trial_unit``), for the wall-time estimate.
    """

    trial_unit: ClassVar[str] = "trials"

    summary: str
    metric_calls: dict[str, int]
    budget_metric_calls: int | None = None
    notes: list[str] = Field(default_factory=list)

    def planned_trials(self) -> int | None:
        """How many trials the plan runs; None when another limit decides (no count)."""
        return None

    def setup_calls(self) -> int:
        """Metric calls the plan spends after the seed's evaluation, before its first trial."""
        return 0
