"""Stored shapes: OpenTelemetry-shaped spans, rollouts and attempts with their status machines.

A rollout moves ``queuing → preparing → running → succeeded | failed | cancelled``; an
attempt that fails in a retriable way while attempts remain sends its rollout back to
``queuing`` (requeued). An attempt moves ``preparing → running → succeeded | failed |
timeout | unresponsive``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RolloutStatus = Literal["queuing", "preparing", "running", "succeeded", "failed", "cancelled"]
AttemptStatus = Literal["preparing", "running", "succeeded", "failed", "timeout", "unresponsive"]
SpanStatus = Literal["unset", "ok", "error"]

ROLLOUT_TRANSITIONS: dict[str, frozenset[str]] = {
    "queuing": frozenset({"preparing", "cancelled"}),
    "preparing": frozenset({"running", "queuing", "failed", "cancelled"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "queuing"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    "preparing": frozenset({"running", "failed"}),
    "running": frozenset({"succeeded", "failed", "timeout", "unresponsive"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "timeout": frozenset(),
    "unresponsive": frozenset(),
}
FINAL_ROLLOUT_STATUSES = frozenset({"succeeded", "failed", "cancelled"})


class IllegalTransition(RuntimeError):
    """A status change the state machine does not allow (a bug, not a user mistake)."""


def now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A random id such as ``ro-3f2a…`` (rollouts) or ``at-…`` (attempts)."""
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


class RolloutConfig(BaseModel):
    """How a rollout is run: attempts, which attempt outcomes are retried, and time limits.

    ``unresponsive_seconds``: an attempt with no span, heartbeat or LM call in flight for
    that long is stopped as ``unresponsive``.
    """

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=1, ge=1)
    retry_on: tuple[Literal["failed", "timeout", "unresponsive"], ...] = (
        "failed",
        "timeout",
        "unresponsive",
    )
    timeout_seconds: float | None = Field(default=None, gt=0)
    unresponsive_seconds: float | None = Field(default=None, gt=0)

    @classmethod
    def from_runtime(cls, runtime: Any) -> RolloutConfig:
        """From a ``[runtime]`` section."""
        return cls(
            max_attempts=runtime.max_attempts,
            timeout_seconds=runtime.timeout_s,
            unresponsive_seconds=runtime.unresponsive_s,
            retry_on=tuple(runtime.retry_on),
        )


class SpanEvent(BaseModel):
    """A timestamped event inside a span (for example an exception)."""

    name: str
    time: datetime
    attributes: dict[str, Any] = Field(default_factory=dict)


class SpanRecord(BaseModel):
    """One finished span as stored: OpenTelemetry fields plus rollout, attempt and sequence."""

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str
    kind: str = "internal"
    start_time: datetime
    end_time: datetime
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    status: SpanStatus = "unset"
    status_message: str | None = None
    rollout_id: str | None = None
    attempt_id: str | None = None
    sequence: int = 0

    @property
    def duration_s(self) -> float:
        return (self.end_time - self.start_time).total_seconds()


class Attempt(BaseModel):
    """One try at a rollout; its id is ``{rollout_id}:{number}``."""

    rollout_id: str
    number: int = Field(ge=1)
    attempt_id: str = ""
    status: AttemptStatus = "preparing"
    started_at: datetime = Field(default_factory=now)
    ended_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _default_id(self) -> Attempt:
        if not self.attempt_id:
            self.attempt_id = f"{self.rollout_id}:{self.number}"
        return self

    def move(self, status: AttemptStatus, error: str | None = None) -> None:
        """Change status, refusing transitions the attempt machine does not allow."""
        if status not in ATTEMPT_TRANSITIONS[self.status]:
            raise IllegalTransition(f"attempt {self.attempt_id}: {self.status} -> {status}")
        self.status = status
        if error is not None:
            self.error = error
        if not ATTEMPT_TRANSITIONS[status]:
            self.ended_at = now()


class Rollout(BaseModel):
    """One run of one candidate on one example, with its attempts' outcome."""

    rollout_id: str = Field(default_factory=lambda: new_id("ro"))
    job_id: str | None = None
    candidate_id: str
    example_id: str
    split: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    status: RolloutStatus = "queuing"
    config: RolloutConfig = RolloutConfig()
    attempts: int = 0
    created_at: datetime = Field(default_factory=now)
    ended_at: datetime | None = None
    output: Any = None
    score: float | None = None
    error: str | None = None
    components: dict[str, str] = Field(default_factory=dict)

    def move(self, status: RolloutStatus, error: str | None = None) -> None:
        """Change status, refusing transitions the rollout machine does not allow."""
        if status not in ROLLOUT_TRANSITIONS[self.status]:
            raise IllegalTransition(f"rollout {self.rollout_id}: {self.status} -> {status}")
        self.status = status
        if error is not None:
            self.error = error
        if status in FINAL_ROLLOUT_STATUSES:
            self.ended_at = now()
