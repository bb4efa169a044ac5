"""The job and rollout state machines: which state may follow which."""

from __future__ import annotations

from typing import Literal

from emery.core.errors import EmeryError

JobState = Literal["created", "queued", "running", "paused", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[JobState, ...] = (
    "created",
    "queued",
    "running",
    "paused",
    "succeeded",
    "failed",
    "cancelled",
)
TERMINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})

JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    "created": frozenset({"queued", "cancelled", "failed"}),
    "queued": frozenset({"running", "paused", "cancelled", "failed"}),
    "running": frozenset({"paused", "succeeded", "failed", "cancelled"}),
    "paused": frozenset({"queued", "running", "cancelled", "failed"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

JobAction = Literal["pause", "cancel"]

RolloutStatus = Literal["queuing", "preparing", "running", "succeeded", "failed", "cancelled"]
ROLLOUT_TRANSITIONS: dict[str, frozenset[str]] = {
    "queuing": frozenset({"preparing", "running", "cancelled", "failed"}),
    "preparing": frozenset({"running", "queuing", "failed", "cancelled"}),
    # running → queuing is a requeue after a retriable failed attempt.
    "running": frozenset({"succeeded", "failed", "cancelled", "queuing"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

AttemptStatus = Literal["preparing", "running", "succeeded", "failed", "timeout", "unresponsive"]
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    "preparing": frozenset({"running", "failed", "timeout", "unresponsive"}),
    "running": frozenset({"succeeded", "failed", "timeout", "unresponsive"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "timeout": frozenset(),
    "unresponsive": frozenset(),
}


class IllegalTransition(EmeryError):
    """A state change the state machine does not allow (e.g. resuming a finished job)."""


class NotFound(EmeryError):
    """A job, candidate, rollout or resource id that the store does not hold."""


def check_job_transition(job_id: str, current: str, target: str) -> None:
    """Raise IllegalTransition unless ``current → target`` is allowed."""
    if target not in JOB_TRANSITIONS.get(current, frozenset()):
        allowed = sorted(JOB_TRANSITIONS.get(current, frozenset()))
        hint = f"; from {current} it can go to {', '.join(allowed)}" if allowed else ""
        raise IllegalTransition(f"job {job_id} is {current}: it cannot become {target}{hint}")


def check_transition(
    what: str, item_id: str, table: dict[str, frozenset[str]], current: str, target: str
) -> None:
    """Raise IllegalTransition unless ``current → target`` is allowed by ``table``."""
    if target != current and target not in table.get(current, frozenset()):
        raise IllegalTransition(f"{what} {item_id} is {current}: it cannot become {target}")
