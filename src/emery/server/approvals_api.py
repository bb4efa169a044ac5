"""Approval requests over HTTP: a job's requests, one request with what a person decides it
on, and the decision (approve, reject with a reason, edit with new text)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from emery.reports import approvals
from emery.store.protocol import Store

ApprovalId = Annotated[str, Path(min_length=1, max_length=40, pattern="^[0-9a-zA-Z_-]+$")]


class Decision(BaseModel):
    """A person's decision on a pending request."""

    action: Literal["approve", "reject", "edit"]
    reason: str | None = Field(
        default=None, max_length=4000, description="Why (the search's reflection reads it)."
    )
    text: str | None = Field(
        default=None, description="An edit's new text (of ``component`` or the only one)."
    )
    component: str | None = None
    edited: dict[str, str] | None = Field(
        default=None, description="An edit as component → new text."
    )


def approvals_router(store: Store) -> APIRouter:
    """``/api/jobs/{job}/approvals`` and ``/api/approvals/{id}``."""
    router = APIRouter(tags=["approvals"])

    @router.get("/api/jobs/{job}/approvals")
    def job_requests(job: str) -> dict[str, Any]:
        """The job's approval requests, oldest first."""
        found = approvals.job_approvals(store, job)
        return {"approvals": [a.model_dump(mode="json") for a in found]}

    @router.get("/api/approvals/{approval_id}")
    def one_request(approval_id: ApprovalId) -> dict[str, Any]:
        """The request with its candidate beside what it would replace: texts, diff, val
        scores with 95% intervals, their paired difference and sample outputs."""
        return approvals.review(store, approval_id).model_dump(mode="json")

    @router.post("/api/approvals/{approval_id}")
    def decide(approval_id: ApprovalId, body: Decision) -> dict[str, Any]:
        """Approve, reject or edit a pending request (409 once it is decided)."""
        decided = approvals.decide(
            store,
            approval_id,
            body.action,
            reason=body.reason,
            text=body.text,
            component=body.component,
            edited=body.edited,
        )
        return decided.model_dump(mode="json")

    return router
