"""The SQL store: every table module plus the one-transaction step commit."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from emery.core.events import Event, StateChanged, event
from emery.store import schema as t
from emery.store.records import StepWrite
from emery.store.sql.approvals import ApprovalsMixin
from emery.store.sql.base import now
from emery.store.sql.candidates import CandidatesMixin
from emery.store.sql.feedback import FeedbackMixin
from emery.store.sql.jobs import JobsMixin, event_from_row
from emery.store.sql.queue import QueueMixin
from emery.store.sql.retention import RetentionMixin
from emery.store.sql.tallies import TalliesMixin
from emery.store.sql.trace_rows import attempt_row, rollout_row
from emery.store.sql.traces import TracesMixin
from emery.store.states import TERMINAL_STATES, OwnershipLost, check_job_transition


class SqlStore(
    JobsMixin,
    CandidatesMixin,
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
        fails, or if ``write.expect_owner`` no longer owns the running job. A write whose
        ``write_id`` is this job's last stored one is not stored again: its stored events
        are returned (the same write sent again after the connection dropped at its commit)."""
        with self._tx(write=True) as conn:
            job = self._require(conn, job_id)
            if write.write_id is not None:
                stored = self._stored_write(conn, job_id, write.write_id)
                if stored is not None:
                    return stored
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
                fields["heartbeat_at"] = self.store_time(conn)
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
            appended = self._append_events(conn, job_id, events)
            if write.write_id is not None:
                self._record_write(conn, job_id, write.write_id, appended, at)
            return appended

    def _stored_write(self, conn: Connection, job_id: str, write_id: str) -> list[Event] | None:
        """The events of ``job_id``'s last write if it is ``write_id``, else None."""
        s = t.step_writes
        row = conn.execute(
            select(s.c.first_seq, s.c.last_seq).where(
                s.c.job_id == job_id, s.c.write_id == write_id
            )
        ).first()
        if row is None:
            return None
        e = t.job_events
        rows = conn.execute(
            select(e)
            .where(e.c.job_id == job_id, e.c.seq >= row.first_seq, e.c.seq <= row.last_seq)
            .order_by(e.c.seq)
        )
        return [event_from_row(r) for r in rows]

    def _record_write(
        self, conn: Connection, job_id: str, write_id: str, events: list[Event], at: float
    ) -> None:
        seqs = [int(e.seq) for e in events if e.seq is not None]
        first, last = (seqs[0], seqs[-1]) if seqs else (0, -1)
        row = {"job_id": job_id, "write_id": write_id, "first_seq": first, "last_seq": last}
        self.upsert(conn, t.step_writes, [{**row, "at": at}], ["job_id"])
