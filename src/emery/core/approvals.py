"""Approval requests: a person decides before a candidate becomes a job's best or is published.

A job with ``[job] approve = "best"`` stores a ``best`` request instead of promoting a
candidate and waits; ``emery publish --request`` stores a ``publish`` request instead of
publishing. A person approves, rejects (with a reason the search's reflection reads) or
edits (the edited text becomes a child candidate, scored like any other) a pending request;
``applied`` turns true once the job (or, for a publish request, the deciding process) has
acted on the decision.
"""

from __future__ import annotations

import uuid
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from emery.core.payloads import Payload, register_payload

ApprovalKind = Literal["best", "publish"]
ApprovalStatus = Literal["pending", "approved", "rejected", "edited"]
ACTIONS: dict[str, ApprovalStatus] = {"approve": "approved", "reject": "rejected", "edit": "edited"}
"""What each action a person takes makes of a pending request."""


class Approval(BaseModel):
    """One request for a person's decision, and that decision."""

    id: str
    job_id: str
    kind: ApprovalKind
    candidate_id: str
    score: float | None = None
    """The candidate's mean val score (a ``best`` request) or the job's best val score."""
    current_id: str | None = None
    """What it would replace: the job's best so far, or the prompt's latest candidate."""
    current_score: float | None = None
    iteration: int | None = None
    target: str | None = None
    """A publish request: the prompt name to publish under."""
    status: ApprovalStatus = "pending"
    reason: str | None = None
    edited: dict[str, str] = Field(default_factory=dict)
    """An edit: component name → the person's text (other components keep the candidate's)."""
    result: str | None = None
    """What applying the decision made: the edited child's id, or the published version."""
    applied: bool = False
    created_at: float = 0.0
    decided_at: float | None = None


@register_payload
class ApprovalRequested(Payload):
    """A job holds ``candidate_id`` back from becoming its best until a person decides."""

    kind: ClassVar[str] = "approval_requested"
    approval_id: str
    candidate_id: str
    score: float | None = None
    current_id: str | None = None
    current_score: float | None = None


@register_payload
class ApprovalApplied(Payload):
    """The job acted on a person's decision (``result``: an edit's child candidate)."""

    kind: ClassVar[str] = "approval_applied"
    approval_id: str
    candidate_id: str
    status: str
    reason: str | None = None
    result: str | None = None


def new_approval_id() -> str:
    """A fresh request id (12 hex digits)."""
    return uuid.uuid4().hex[:12]


__all__ = [
    "ACTIONS",
    "Approval",
    "ApprovalApplied",
    "ApprovalKind",
    "ApprovalRequested",
    "ApprovalStatus",
    "new_approval_id",
]
