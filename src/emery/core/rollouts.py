"""Rollouts and their attempts, with the one status machine every layer goes through.

A rollout moves ``queuing → preparing → running → succeeded | failed | cancelled``; an
attempt that fails in a retriable way while attempts remain sends its rollout back to
``queuing`` (requeued). A rollout may also start running without a preparing step, or
fail while still queued. An attempt moves ``preparing → running → succeeded | failed |
timeout | unresponsive``; it may end before it runs. Moving to the current status is
allowed and changes nothing.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from emery.core.errors import IllegalTransition

RolloutStatus = Literal["queuing", "preparing", "running", "succeeded", "failed", "cancelled"]
AttemptStatus = Literal["preparing", "running", "succeeded", "failed", "timeout", "unresponsive"]
RetriableStatus = Literal["failed", "timeout", "unresponsive"]

ROLLOUT_TRANSITIONS: dict[str, frozenset[str]] = {
    "queuing": frozenset({"preparing", "running", "cancelled", "failed"}),
    "preparing": frozenset({"running", "queuing", "failed", "cancelled"}),
    # running → queuing is a requeue after a retriable failed attempt.
    "running": frozenset({"succeeded", "failed", "cancelled", "queuing"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    "preparing": frozenset({"running", "failed", "timeout", "unresponsive"}),
    "running": frozenset({"succeeded", "failed", "timeout", "unresponsive"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "timeout": frozenset(),
    "unresponsive": frozenset(),
}
FINAL_ROLLOUT_STATUSES = frozenset(s for s, nxt in ROLLOUT_TRANSITIONS.items() if not nxt)
FINAL_ATTEMPT_STATUSES = frozenset(s for s, nxt in ATTEMPT_TRANSITIONS.items() if not nxt)


def check_transition(
    what: str, item_id: str, table: dict[str, frozenset[str]], current: str, target: str
) -> None:
    """Raise IllegalTransition unless ``current → target`` is allowed by ``table``."""
    if target != current and target not in table.get(current, frozenset()):
        raise IllegalTransition(f"{what} {item_id} is {current}: it cannot become {target}")


def now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A random id such as ``ro-3f2a…`` (rollouts)."""
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its text."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class RolloutConfig(BaseModel):
    """How a rollout is run: attempts, which attempt outcomes are retried, and time limits.

    ``timeout_seconds``: an attempt that has spent that long of its own time is stopped as
    ``timeout``; time waiting on an in-process model, queued or decoding, is not its own
    (``emery.core.work_clock``). ``unresponsive_seconds``: an attempt with no span,
    heartbeat or LM call in flight for that long is stopped as ``unresponsive``.
    """

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=1, ge=1)
    retry_on: tuple[RetriableStatus, ...] = ("failed", "timeout", "unresponsive")
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


class Attempt(BaseModel):
    """One try at a rollout; its id is ``{rollout_id}:{number}``. Its heartbeat tells
    whether the worker running it is still alive."""

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    rollout_id: str
    number: int = Field(ge=1)
    status: AttemptStatus = "preparing"
    worker_id: str | None = None
    error: str | None = None
    started_at: datetime = Field(default_factory=now)
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None

    @model_validator(mode="after")
    def _default_id(self) -> Attempt:
        expected = f"{self.rollout_id}:{self.number}"
        if not self.id:
            self.id = expected
        elif self.id != expected:  # (rollout_id, number) is unique: one id for it
            raise ValueError(
                f"attempt {self.id!r} of rollout {self.rollout_id!r} must be {expected!r}"
            )
        return self

    def move(self, status: AttemptStatus, error: str | None = None) -> None:
        """Change status, refusing transitions the attempt machine does not allow."""
        check_transition("attempt", self.id, ATTEMPT_TRANSITIONS, self.status, status)
        self.status = status
        if error is not None:
            self.error = error
        if status in FINAL_ATTEMPT_STATUSES and self.finished_at is None:
            self.finished_at = now()


class Rollout(BaseModel):
    """One run of one candidate on one example: its retry policy, attempts and outcome.

    ``components`` (the candidate's texts, for the agent) is not stored.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: new_id("ro"))
    job_id: str | None = None
    candidate_id: str | None = None
    example_id: str | None = None
    split: str | None = None
    mode: str | None = None
    status: RolloutStatus = "queuing"
    input: Any = None
    output: Any = None
    score: float | None = None
    error: str | None = None
    config: RolloutConfig = RolloutConfig()
    attempt_count: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    components: dict[str, str] = Field(default_factory=dict, exclude=True)
    created_at: datetime = Field(default_factory=now)
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def move(self, status: RolloutStatus, error: str | None = None) -> None:
        """Change status, refusing transitions the rollout machine does not allow."""
        check_transition("rollout", self.id, ROLLOUT_TRANSITIONS, self.status, status)
        self.status = status
        if error is not None:
            self.error = error
        if status == "running" and self.started_at is None:
            self.started_at = now()
        if status in FINAL_ROLLOUT_STATUSES and self.finished_at is None:
            self.finished_at = now()
