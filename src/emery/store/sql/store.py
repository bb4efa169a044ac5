"""The SQL store: every table module plus the one-transaction step commit."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from emery.core.events import Event, StateChanged, event
from emery.store import schema as t
from emery.store.records import StepWrite
from emery.store.sql.approvals import ApprovalsMixin
from emery.store.sql.base import now
from emery.store.sql.feedback import FeedbackMixin
from emery.store.sql.jobs import JobsMixin
from emery.store.sql.queue import QueueMixin
from emery.store.sql.results import ResultsMixin
from emery.store.sql.retention import RetentionMixin
from emery.store.sql.tallies import TalliesMixin
from emery.store.sql.trace_rows import attempt_row, rollout_row
from emery.store.sql.traces import TracesMixin
from emery.store.states import TERMINAL_STATES, OwnershipLost, check_job_transition


class SqlStore(
    JobsMixin,
    ResultsMixin,
    TracesMixin,
    QueueMixin,
    FeedbackMixin,
    ApprovalsMixin,
    TalliesMixin,
    RetentionMixin,
):
    """The store on any SQLAlchemy engine (SQLite file, SQLite in memory, PostgreSQL)."""

    def commit_step(self, job_id: str, write: StepWrite) -> list[Event]:
        """Store one step atomically: candidates, evaluations with their rollouts and
        attempts, the checkpoint, approval requests, job fields, an optional final state,
        and events (returned with their sequence numbers). Nothing is written if any part
        fails, or if ``write.expect_owner`` no longer owns the running job."""
        with self._tx(write=True) as conn:
            job = self._require(conn, job_id)
            if write.expect_owner is not None and (
                job.owner != write.expect_owner or job.state != "running"
            ):
                raise OwnershipLost(
                    f"job {job_id} is no longer run by this process"
                    f" (state {job.state}, owner {job.owner})"
                )
            self._insert_candidates(conn, job_id, write.candidates)
            at = now()
            self.insert_ignore(conn, t.rollouts, [rollout_row(r) for r in write.rollouts], None)
            self.insert_ignore(conn, t.attempts, [attempt_row(a, at) for a in write.attempts], None)
            self._insert_evaluations(conn, write.evaluations, job_id)
            if write.checkpoint is not None:
                self._save_checkpoint(conn, write.checkpoint)
            self._save_approvals(conn, write.approvals)
            fields: dict[str, Any] = {"updated_at": at, **write.job_fields}
            if write.expect_owner is not None:
                fields["heartbeat_at"] = at
            events = list(write.events)
            if write.final_state is not None:
                check_job_transition(job_id, job.state, write.final_state)
                fields["state"] = write.final_state
                if write.final_state in TERMINAL_STATES:
                    fields.setdefault("finished_at", at)  # a result may have named the time
                    fields["requested_action"] = None
                events.append(
                    event(
                        write.final_state,
                        StateChanged(state=write.final_state, reason=write.final_reason),
                    )
                )
            conn.execute(update(t.jobs).where(t.jobs.c.id == job_id).values(**fields))
            return self._append_events(conn, job_id, events)
