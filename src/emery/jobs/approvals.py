"""The store's approval gate: a running job's requests for a person's decision.

``StoreApprovalGate`` is the ``algorithms.approval.ApprovalGate`` of a job with ``[job]
approve = "best"``: its requests are rows of the store (stored with the step that made
them), a person decides them through the CLI, the API or the dashboard, and the job reads
the row at the control cadence (``poll_s``) while it waits. Nothing waits in memory: a job
stopped or killed while waiting finds its open request again when it resumes, and waits
again. A pause or cancel cuts the wait short like any step (the engine cancels the task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from emery.core.approvals import Approval, new_approval_id
from emery.store.protocol import Store


class StoreApprovalGate:
    """Approval requests of job ``job_id`` kept in ``store``; ``note`` hears, once per
    wait, what the job waits for and how to decide it."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        *,
        poll_s: float = 0.2,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.poll_s = poll_s
        self.note = note

    def open(self) -> Approval | None:
        for approval in self.store.list_approvals(self.job_id):
            if approval.kind == "best" and not approval.applied:
                return approval
        return None

    def request(
        self,
        *,
        candidate_id: str,
        score: float | None,
        current_id: str,
        current_score: float | None,
        iteration: int,
    ) -> Approval:
        return Approval(
            id=new_approval_id(),
            job_id=self.job_id,
            kind="best",
            candidate_id=candidate_id,
            score=score,
            current_id=current_id or None,
            current_score=current_score,
            iteration=iteration,
        )

    async def decision(self, approval: Approval) -> Approval:
        if self.note is not None:
            shown = "?" if approval.score is None else f"{approval.score:.3f}"
            self.note(
                f"waiting for approval {approval.id}: candidate {approval.candidate_id[:8]}"
                f" (val {shown}) would become the best; decide with `emery approvals"
                f" approve|reject|edit {approval.id}` or on the dashboard"
            )
        while True:
            current = self.store.get_approval(approval.id)
            if current.status != "pending":
                return current
            await asyncio.sleep(self.poll_s)

    def declined(self) -> list[Approval]:
        return [
            a
            for a in self.store.list_approvals(self.job_id)
            if a.kind == "best" and a.status in ("rejected", "edited")
        ]
