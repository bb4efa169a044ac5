"""The job state machine (which state may follow which) and the store's errors.

Rollouts and attempts have theirs in ``emery.core.rollouts``."""

from __future__ import annotations

from typing import Literal

from emery.core.errors import ConfigError, EmeryError
from emery.core.errors import IllegalTransition as IllegalTransition

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


class NotFound(EmeryError):
    """A job, candidate, rollout or resource id that the store does not hold."""


def require_id(value: str, what: str) -> str:
    """``value``, an id or id prefix; ConfigError when it is empty or blank (as a prefix it
    would match every ``what``)."""
    if not value.strip():
        raise ConfigError(f"the {what} id is empty: give an id, a unique id prefix or a name")
    return value


class OwnershipLost(IllegalTransition):
    """Another process took the job over; this engine must stop writing to it."""


def check_job_transition(job_id: str, current: str, target: str) -> None:
    """Raise IllegalTransition unless ``current → target`` is allowed."""
    if target not in JOB_TRANSITIONS.get(current, frozenset()):
        allowed = sorted(JOB_TRANSITIONS.get(current, frozenset()))
        hint = f"; from {current} it can go to {', '.join(allowed)}" if allowed else ""
        raise IllegalTransition(f"job {job_id} is {current}: it cannot become {target}{hint}")
