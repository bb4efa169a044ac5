"""Rollouts with their attempts and spans; versioned resources; workers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, update

from emery.core.rollouts import (
    ATTEMPT_TRANSITIONS,
    FINAL_ATTEMPT_STATUSES,
    FINAL_ROLLOUT_STATUSES,
    ROLLOUT_TRANSITIONS,
    Attempt,
    Rollout,
    check_transition,
)
from emery.core.spans import SpanRecord
from emery.store import schema as t
from emery.store.records import (
    Page,
    ResourceRecord,
    RolloutFilter,
    SpanFilter,
    WorkerRecord,
    to_datetime,
)
from emery.store.sql.base import SqlBase, now, order_by, paged
from emery.store.sql.trace_rows import (
    attempt_from_row,
    attempt_row,
    record_from_row,
    record_row,
    rollout_from_row,
    rollout_row,
    span_from_row,
    span_row,
)
from emery.store.states import NotFound

ROLLOUT_SORTS = {
    "created_at": t.rollouts.c.created_at,
    "finished_at": t.rollouts.c.finished_at,
    "score": t.rollouts.c.score,
    "status": t.rollouts.c.status,
}


class TracesMixin(SqlBase):
    """Rollouts (with a status machine), attempts with heartbeats, spans, resources, workers."""

    # --- rollouts ---------------------------------------------------------------------

    def add_rollouts(self, records: Sequence[Rollout]) -> None:
        """Insert rollouts, or replace the stored fields of ones that exist."""
        with self._tx(write=True) as conn:
            self._upsert_rollouts(conn, records)

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._tx() as conn:
            row = conn.execute(select(t.rollouts).where(t.rollouts.c.id == rollout_id)).first()
        if row is None:
            raise NotFound(f"no rollout {rollout_id!r}")
        return rollout_from_row(row)

    def update_rollout(
        self, rollout_id: str, *, status: str | None = None, **fields: Any
    ) -> Rollout:
        """Change a rollout's status (checked against the status machine) and fields."""
        with self._tx(write=True) as conn:
            row = conn.execute(select(t.rollouts).where(t.rollouts.c.id == rollout_id)).first()
            if row is None:
                raise NotFound(f"no rollout {rollout_id!r}")
            values = dict(fields)
            if status is not None:
                check_transition("rollout", rollout_id, ROLLOUT_TRANSITIONS, row.status, status)
                values["status"] = status
                if status == "running" and row.started_at is None:
                    values.setdefault("started_at", now())
                if status in FINAL_ROLLOUT_STATUSES:
                    values.setdefault("finished_at", now())
            if values:
                conn.execute(
                    update(t.rollouts).where(t.rollouts.c.id == rollout_id).values(**values)
                )
            updated = conn.execute(select(t.rollouts).where(t.rollouts.c.id == rollout_id)).one()
        return rollout_from_row(updated)

    def list_rollouts(
        self,
        filter: RolloutFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> Page[Rollout]:
        f = filter or RolloutFilter()
        r = t.rollouts
        stmt = select(r)
        for name in ("job_id", "candidate_id", "example_id", "split"):
            value = getattr(f, name)
            if value is not None:
                stmt = stmt.where(r.c[name] == value)
        if f.status:
            stmt = stmt.where(r.c.status.in_(f.status))
        stmt = order_by(stmt, ROLLOUT_SORTS, sort, "created_at")
        with self._tx() as conn:
            rows, total = paged(conn, stmt, limit, offset)
        return Page(
            items=[rollout_from_row(row) for row in rows],
            total=total,
            offset=offset,
            limit=limit,
        )

    # --- attempts ---------------------------------------------------------------------

    def add_attempt(self, record: Attempt) -> Attempt:
        """Start (or rewrite) an attempt of a rollout and count it on the rollout."""
        row = attempt_row(record, now())
        count = t.rollouts.c.attempt_count
        bigger = (
            func.max(count, record.number)
            if self.dialect == "sqlite"
            else func.greatest(count, record.number)
        )
        with self._tx(write=True) as conn:
            self.upsert(conn, t.attempts, [row], ["id"])
            conn.execute(
                update(t.rollouts)
                .where(t.rollouts.c.id == record.rollout_id)
                .values(attempt_count=bigger)
            )
        return record.model_copy(update={"started_at": to_datetime(row["started_at"])})

    def update_attempt(
        self, attempt_id: str, *, status: str | None = None, **fields: Any
    ) -> Attempt:
        """Change an attempt's status (checked) or fields; any update is also a heartbeat."""
        with self._tx(write=True) as conn:
            row = conn.execute(select(t.attempts).where(t.attempts.c.id == attempt_id)).first()
            if row is None:
                raise NotFound(f"no attempt {attempt_id!r}")
            at = now()
            values: dict[str, Any] = {"heartbeat_at": at, **fields}
            if status is not None:
                check_transition("attempt", attempt_id, ATTEMPT_TRANSITIONS, row.status, status)
                values["status"] = status
                if status in FINAL_ATTEMPT_STATUSES:
                    values.setdefault("finished_at", at)
            conn.execute(update(t.attempts).where(t.attempts.c.id == attempt_id).values(**values))
            updated = conn.execute(select(t.attempts).where(t.attempts.c.id == attempt_id)).one()
        return attempt_from_row(updated)

    def list_attempts(self, rollout_id: str) -> list[Attempt]:
        a = t.attempts
        with self._tx() as conn:
            rows = conn.execute(select(a).where(a.c.rollout_id == rollout_id).order_by(a.c.number))
            return [attempt_from_row(row) for row in rows]

    # --- spans ------------------------------------------------------------------------

    def add_spans(self, records: Sequence[SpanRecord]) -> None:
        """Store a batch of spans; spans of an attempt without ``seq`` get the next numbers."""
        if not records:
            return
        with self._tx(write=True) as conn:
            self._insert_spans(conn, records)

    def add_traces(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None:
        """Write a batch of live trace rows in one transaction: rollouts and attempts are
        inserted or replaced (the rollout row carries its attempt count), spans appended
        as in ``add_spans``."""
        if not (rollouts or attempts or spans):
            return
        with self._tx(write=True) as conn:
            self._upsert_rollouts(conn, rollouts)
            self._upsert_attempts(conn, attempts)
            self._insert_spans(conn, spans)

    def list_spans(
        self, filter: SpanFilter | None = None, *, limit: int | None = 1000, offset: int = 0
    ) -> Page[SpanRecord]:
        f = filter or SpanFilter()
        s = t.spans
        stmt = select(s)
        for name in ("job_id", "rollout_id", "attempt_id", "trace_id", "name"):
            value = getattr(f, name)
            if value is not None:
                stmt = stmt.where(s.c[name] == value)
        if f.since_seq is not None:
            stmt = stmt.where(s.c.seq > f.since_seq)
        if f.started_after is not None:
            stmt = stmt.where(s.c.start_time >= f.started_after.timestamp())
        if f.started_before is not None:
            stmt = stmt.where(s.c.start_time < f.started_before.timestamp())
        stmt = stmt.order_by(s.c.rollout_id, s.c.attempt_id, s.c.seq, s.c.start_time, s.c.id)
        with self._tx() as conn:
            rows, total = paged(conn, stmt, limit, offset)
        return Page(
            items=[span_from_row(row) for row in rows], total=total, offset=offset, limit=limit
        )

    # --- resources --------------------------------------------------------------------

    def put_resource(
        self, name: str, content: Any, *, kind: str = "document", job_id: str | None = None
    ) -> ResourceRecord:
        """Store a new version of a named resource."""
        r = t.resources
        with self._tx(write=True) as conn:
            last = conn.execute(select(func.max(r.c.version)).where(r.c.name == name)).scalar()
            version = 1 if last is None else int(last) + 1
            at = now()
            conn.execute(
                r.insert().values(
                    name=name,
                    version=version,
                    kind=kind,
                    content=content,
                    job_id=job_id,
                    created_at=at,
                )
            )
        return ResourceRecord(
            name=name,
            version=version,
            kind=kind,
            content=content,
            job_id=job_id,
            created_at=to_datetime(at),
        )

    def get_resource(self, name: str, version: int | None = None) -> ResourceRecord:
        """A version of a resource (default: the latest)."""
        r = t.resources
        stmt = select(r).where(r.c.name == name)
        stmt = (
            stmt.where(r.c.version == version)
            if version is not None
            else stmt.order_by(r.c.version.desc()).limit(1)
        )
        with self._tx() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise NotFound(f"no resource {name!r}" + (f" version {version}" if version else ""))
        record: ResourceRecord = record_from_row(ResourceRecord, row, ("created_at",))
        return record

    def list_resources(self, name: str | None = None) -> list[ResourceRecord]:
        r = t.resources
        stmt = select(r).order_by(r.c.name, r.c.version)
        if name is not None:
            stmt = stmt.where(r.c.name == name)
        with self._tx() as conn:
            return [
                record_from_row(ResourceRecord, row, ("created_at",)) for row in conn.execute(stmt)
            ]

    # --- workers ----------------------------------------------------------------------

    def register_worker(self, record: WorkerRecord) -> None:
        row = record_row(record, ("started_at", "heartbeat_at"), ("started_at",), now())
        row["heartbeat_at"] = now()
        for tally in ("rollouts_done", "rollouts_failed"):  # counted from attempts, not kept
            row.pop(tally)
        with self._tx(write=True) as conn:
            self.upsert(conn, t.workers, [row], ["id"])

    def worker_heartbeat(
        self, worker_id: str, *, status: str | None = None, job_id: str | None = None
    ) -> None:
        values: dict[str, Any] = {"heartbeat_at": now(), "job_id": job_id}
        if status is not None:
            values["status"] = status
        with self._tx(write=True) as conn:
            conn.execute(update(t.workers).where(t.workers.c.id == worker_id).values(**values))

    def list_workers(self) -> list[WorkerRecord]:
        a = t.attempts
        counts = (
            select(a.c.worker_id, a.c.status, func.count())
            .where(a.c.worker_id.is_not(None), a.c.status.in_(sorted(FINAL_ATTEMPT_STATUSES)))
            .group_by(a.c.worker_id, a.c.status)
        )
        with self._tx() as conn:
            rows = conn.execute(select(t.workers).order_by(t.workers.c.started_at)).all()
            finished = conn.execute(counts).all()
        done: dict[str, int] = {}
        failed: dict[str, int] = {}
        for worker_id, status, count in finished:
            tally = done if status == "succeeded" else failed
            tally[worker_id] = tally.get(worker_id, 0) + count
        records = []
        for row in rows:
            record = record_from_row(WorkerRecord, row, ("started_at", "heartbeat_at"))
            record.rollouts_done = done.get(record.id, 0)
            record.rollouts_failed = failed.get(record.id, 0)
            records.append(record)
        return records

    # --- helpers shared with the step commit ------------------------------------------

    def _upsert_rollouts(self, conn: Connection, records: Sequence[Rollout]) -> None:
        self.upsert(conn, t.rollouts, [rollout_row(r) for r in records], ["id"])

    def _upsert_attempts(self, conn: Connection, records: Sequence[Attempt]) -> None:
        at = now()
        self.upsert(conn, t.attempts, [attempt_row(r, at) for r in records], ["id"])

    def _insert_spans(self, conn: Connection, records: Sequence[SpanRecord]) -> None:
        s = t.spans
        next_seq: dict[str, int] = {}
        rows = []
        for record in records:
            row = span_row(record)
            if row["seq"] is None and record.attempt_id is not None:
                key = record.attempt_id
                if key not in next_seq:
                    last = conn.execute(
                        select(func.max(s.c.seq)).where(s.c.attempt_id == key)
                    ).scalar()
                    next_seq[key] = 0 if last is None else int(last) + 1
                row["seq"] = next_seq[key]
                next_seq[key] += 1
            rows.append(row)
        self.insert_ignore(conn, s, rows, ["trace_id", "span_id"])
