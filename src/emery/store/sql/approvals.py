"""Approval requests: stored by a job's step (or by ``emery publish --request``), decided once
by a person, marked applied by whoever acts on the decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from emery.core.approvals import ACTIONS, Approval
from emery.core.errors import ConfigError, IllegalTransition
from emery.store import schema as t
from emery.store.sql.base import SqlBase, now
from emery.store.states import NotFound, require_id


def _row(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "job_id": approval.job_id,
        "kind": approval.kind,
        "status": approval.status,
        "candidate_id": approval.candidate_id,
        "record": approval.model_dump(mode="json"),
        "created_at": approval.created_at,
        "decided_at": approval.decided_at,
    }


class ApprovalsMixin(SqlBase):
    """Requests for a person's decision: add, list, decide (once), save applied."""

    def add_approval(self, approval: Approval) -> Approval:
        """Store a new request (its ``created_at`` set now when unset)."""
        with self._tx(write=True) as conn:
            return self._save_approvals(conn, [approval])[0]

    def save_approvals(self, approvals: Sequence[Approval]) -> None:
        """Insert requests, or replace stored ones (the engine marking one applied)."""
        with self._tx(write=True) as conn:
            self._save_approvals(conn, approvals)

    def _save_approvals(self, conn: Connection, approvals: Sequence[Approval]) -> list[Approval]:
        stamped = [
            a if a.created_at else a.model_copy(update={"created_at": now()}) for a in approvals
        ]
        self.upsert(conn, t.approvals, [_row(a) for a in stamped], ["id"])
        return stamped

    def get_approval(self, approval_id: str) -> Approval:
        """The request ``approval_id`` (a unique prefix is enough)."""
        require_id(approval_id, "approval")
        with self._tx() as conn:
            return self._approval(conn, approval_id)

    def _approval(self, conn: Connection, approval_id: str) -> Approval:
        a = t.approvals
        exact = conn.execute(select(a.c.record).where(a.c.id == approval_id)).first()
        if exact is not None:
            return Approval.model_validate(exact.record)
        escaped = approval_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = conn.execute(
            select(a.c.record).where(a.c.id.like(f"{escaped}%", escape="\\")).limit(2)
        ).all()
        if not rows:
            raise NotFound(f"no approval request {approval_id!r} (see `emery approvals list JOB`)")
        if len(rows) > 1:
            raise NotFound(f"{approval_id!r} matches several approval requests: give more of it")
        return Approval.model_validate(rows[0].record)

    def list_approvals(
        self, job_id: str | None = None, *, status: str | None = None
    ) -> list[Approval]:
        """Requests, oldest first: of one job, in one status, or all."""
        a = t.approvals
        stmt = select(a.c.record).order_by(a.c.created_at, a.c.id)
        if job_id is not None:
            stmt = stmt.where(a.c.job_id == job_id)
        if status is not None:
            stmt = stmt.where(a.c.status == status)
        with self._tx() as conn:
            return [Approval.model_validate(row.record) for row in conn.execute(stmt)]

    def decide_approval(
        self,
        approval_id: str,
        action: str,
        *,
        reason: str | None = None,
        edited: dict[str, str] | None = None,
    ) -> Approval:
        """Approve, reject or edit a pending request; IllegalTransition once it is decided."""
        status = ACTIONS.get(action)
        if status is None:
            raise ConfigError(f"unknown action {action!r}: choose approve, reject or edit")
        with self._tx(write=True) as conn:
            current = self._approval(conn, approval_id)
            if current.status != "pending":
                raise IllegalTransition(
                    f"approval request {current.id} is already {current.status}"
                )
            decided = current.model_copy(
                update={
                    "status": status,
                    "reason": reason,
                    "edited": dict(edited or {}),
                    "decided_at": now(),
                }
            )
            row = _row(decided)
            changed = conn.execute(
                update(t.approvals)
                .where(t.approvals.c.id == current.id, t.approvals.c.status == "pending")
                .values(status=row["status"], record=row["record"], decided_at=row["decided_at"])
            ).rowcount
            if changed != 1:  # pragma: no cover - the write transaction holds the row
                raise IllegalTransition(f"approval request {current.id} was decided meanwhile")
            return decided
