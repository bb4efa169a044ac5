"""Jobs, their events (one sequence per job) and checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, select, update
from sqlalchemy.sql.elements import ColumnElement

from emery.core.errors import IllegalTransition
from emery.core.events import Event, StateChanged, event
from emery.store import schema as t
from emery.store.records import (
    CheckpointRecord,
    JobFilter,
    JobRecord,
    NewJob,
    Page,
    to_datetime,
)
from emery.store.sql.base import SqlBase, now, order_by, paged
from emery.store.states import NotFound, OwnershipLost, check_job_transition, require_id

JOB_SORTS = {
    "created_at": t.jobs.c.created_at,
    "updated_at": t.jobs.c.updated_at,
    "name": t.jobs.c.name,
    "state": t.jobs.c.state,
    "best_score": t.jobs.c.best_score,
    "algorithm": t.jobs.c.algorithm,
}
_TIME_FIELDS = ("heartbeat_at", "created_at", "updated_at", "started_at", "finished_at")


READ_AT = "read_at"
"""The column a job row is read with: the store's clock at the read."""


def _owner_is(owner: str | None) -> ColumnElement[bool]:
    return t.jobs.c.owner.is_(None) if owner is None else t.jobs.c.owner == owner


def job_from_row(row: Row[Any]) -> JobRecord:
    """The job of ``row``; with a ``read_at`` column (``SqlBase.store_now``), its owner's
    heartbeat's age by the store's clock."""
    data = dict(row._mapping)
    read_at = data.pop(READ_AT, None)
    read_at = None if read_at is None else float(read_at)
    beat = data["heartbeat_at"]
    if read_at is not None and beat is not None and data["owner"] is not None:
        data["heartbeat_age_s"] = max(0.0, read_at - float(beat))  # an owner's liveness
    for name in _TIME_FIELDS:
        data[name] = to_datetime(data[name])
    return JobRecord.model_validate(data)


def event_from_row(row: Row[Any]) -> Event:
    return Event(kind=row.kind, data=dict(row.data), seq=row.seq, at=to_datetime(row.at))


class JobsMixin(SqlBase):
    """Job rows, the state machine, control requests, events and checkpoints."""

    # --- jobs -------------------------------------------------------------------------

    def create_job(self, job: NewJob) -> JobRecord:
        """Insert a job in state ``created`` with its ``created`` event."""
        at = now()
        with self._tx(write=True) as conn:
            conn.execute(
                t.jobs.insert().values(
                    **job.model_dump(),
                    state="created",
                    last_seq=0,
                    created_at=at,
                    updated_at=at,
                )
            )
            self._append_events(conn, job.id, [event("created", StateChanged(state="created"))])
            return self._load_job(conn, job.id)

    def get_job(self, job_id: str) -> JobRecord:
        with self._tx() as conn:
            return self._load_job(conn, job_id)

    def resolve_job_id(self, prefix: str) -> str:
        """The id of the one job whose id (or name) starts with ``prefix``."""
        require_id(prefix, "job")
        with self._tx() as conn:
            exact = conn.execute(select(t.jobs.c.id).where(t.jobs.c.id == prefix)).first()
            if exact is not None:
                return str(exact.id)
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = conn.execute(
                select(t.jobs.c.id).where(t.jobs.c.id.like(f"{escaped}%", escape="\\")).limit(3)
            ).all()
            if not rows:
                rows = conn.execute(
                    select(t.jobs.c.id)
                    .where(t.jobs.c.name == prefix)
                    .order_by(t.jobs.c.created_at.desc())
                    .limit(1)
                ).all()
        if not rows:
            raise NotFound(f"no job {prefix!r} in this store (see `emery jobs list`)")
        if len(rows) > 1:
            raise NotFound(f"{prefix!r} matches several jobs: {', '.join(r.id for r in rows)}, ...")
        return str(rows[0].id)

    def list_jobs(
        self,
        filter: JobFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 50,
        offset: int = 0,
    ) -> Page[JobRecord]:
        """Jobs matching ``filter``, newest first unless ``sort`` says otherwise."""
        f = filter or JobFilter()
        stmt = select(t.jobs, self.store_now().label(READ_AT))
        if f.state:
            stmt = stmt.where(t.jobs.c.state.in_(f.state))
        for name in ("algorithm", "kind", "system_name", "config_hash", "name"):
            value = getattr(f, name)
            if value is not None:
                stmt = stmt.where(t.jobs.c[name] == value)
        stmt = order_by(stmt, JOB_SORTS, sort, "-created_at")
        with self._tx() as conn:
            rows, total = paged(conn, stmt, limit, offset)
        jobs = [job_from_row(r) for r in rows]
        return Page(items=jobs, total=total, offset=offset, limit=limit)

    def update_job(self, job_id: str, **fields: Any) -> JobRecord:
        """Set columns of a job row (not its state: use ``transition``). A new ``owner``
        given without ``heartbeat_at`` beats first at the store's clock (``store_time``)."""
        if "state" in fields:
            raise ValueError("use transition() to change a job's state")
        with self._tx(write=True) as conn:
            self._require(conn, job_id)
            if fields.get("owner") is not None and "heartbeat_at" not in fields:
                fields["heartbeat_at"] = self.store_time(conn)  # a new owner's first beat
            conn.execute(
                update(t.jobs).where(t.jobs.c.id == job_id).values(**fields, updated_at=now())
            )
            return self._load_job(conn, job_id)

    def transition(
        self,
        job_id: str,
        target: str,
        *,
        event_kind: str | None = None,
        reason: str | None = None,
        expect: Sequence[str] | None = None,
        fields: dict[str, Any] | None = None,
        extra_events: Sequence[Event] = (),
        expect_owner: str | None = None,
    ) -> tuple[JobRecord, list[Event]]:
        """Move a job to ``target`` and record the state event (``event_kind``, default the
        target's name) after ``extra_events``, all in one transaction.

        Refuses an illegal transition, a current state outside ``expect`` when given, and
        (OwnershipLost) a job whose owner is not ``expect_owner`` when given.
        """
        with self._tx(write=True) as conn:
            current = self._require(conn, job_id)
            if expect is not None and current.state not in expect:
                raise IllegalTransition(
                    f"job {job_id} is {current.state}, not {' or '.join(expect)}"
                )
            if expect_owner is not None and current.owner != expect_owner:
                raise OwnershipLost(f"job {job_id} is now {current.state} in {current.owner}")
            check_job_transition(job_id, current.state, target)
            at = now()
            values: dict[str, Any] = {"state": target, "updated_at": at, **(fields or {})}
            if values.get("owner") is not None and "heartbeat_at" not in values:
                values["heartbeat_at"] = self.store_time(conn)  # a new owner's first beat
            if target == "running" and current.started_at is None:
                values.setdefault("started_at", at)
            if target in ("succeeded", "failed", "cancelled"):
                values.setdefault("finished_at", at)
                values.setdefault("requested_action", None)
            # Conditional on the state read above: a writer that moved the job meanwhile (any
            # backend, any process) makes this one refuse instead of overwrite.
            where = [t.jobs.c.id == job_id, t.jobs.c.state == current.state]
            if expect_owner is not None:
                where.append(t.jobs.c.owner == expect_owner)
            moved = conn.execute(update(t.jobs).where(*where).values(**values))
            if moved.rowcount != 1:
                state = self._require(conn, job_id).state
                raise IllegalTransition(f"job {job_id} is {state}, not {current.state}")
            state_event = event(event_kind or target, StateChanged(state=target, reason=reason))
            stored = self._append_events(conn, job_id, [*extra_events, state_event])
            return self._load_job(conn, job_id), stored

    def take_over(
        self, job_id: str, *, owner: str, expect_owner: str | None, reason: str
    ) -> tuple[JobRecord, list[Event]]:
        """Become the owner of a running job whose previous owner is gone (``resumed`` event)."""
        with self._tx(write=True) as conn:
            current = self._require(conn, job_id)
            if current.state != "running" or current.owner != expect_owner:
                raise OwnershipLost(
                    f"job {job_id} changed hands while resuming (now {current.state},"
                    f" owner {current.owner})"
                )
            at = now()
            moved = conn.execute(  # conditional too: a PostgreSQL reader may be out of date
                update(t.jobs)
                .where(t.jobs.c.id == job_id, t.jobs.c.state == "running", _owner_is(expect_owner))
                .values(owner=owner, heartbeat_at=self.store_time(conn), updated_at=at)
            )
            if moved.rowcount != 1:
                raise OwnershipLost(f"job {job_id} changed hands while resuming")
            stored = self._append_events(
                conn, job_id, [event("resumed", StateChanged(state="running", reason=reason))]
            )
            return self._load_job(conn, job_id), stored

    def swap_owner(
        self, job_id: str, owner: str | None, *, state: str, expect_owner: str | None
    ) -> JobRecord | None:
        """Make ``owner`` the job's owner (None: no one) with a fresh heartbeat, in one
        conditional write: only while the job is still in ``state`` with ``expect_owner``
        (the row as the caller read it). The job as written, or None when the row had
        changed (another process got there first)."""
        with self._tx(write=True) as conn:
            self._require(conn, job_id)
            at = now()
            moved = conn.execute(
                update(t.jobs)
                .where(t.jobs.c.id == job_id, t.jobs.c.state == state, _owner_is(expect_owner))
                .values(
                    owner=owner,
                    heartbeat_at=self.store_time(conn) if owner is not None else None,
                    updated_at=at,
                )
            )
            return self._load_job(conn, job_id) if moved.rowcount == 1 else None

    def set_requested_action(
        self, job_id: str, action: str | None, *, only_state: str | None = None
    ) -> bool:
        """Ask the job's engine to pause or cancel (None clears it). With ``only_state``,
        only while the job is in that state; returns whether the row changed."""
        with self._tx(write=True) as conn:
            self._require(conn, job_id)
            stmt = update(t.jobs).where(t.jobs.c.id == job_id)
            if only_state is not None:
                stmt = stmt.where(t.jobs.c.state == only_state)
            result = conn.execute(stmt.values(requested_action=action, updated_at=now()))
            return bool(result.rowcount)

    def heartbeat(self, job_id: str, owner: str) -> JobRecord:
        """Refresh the owner's heartbeat; returns the row (state and requested action)."""
        with self._tx(write=True) as conn:
            conn.execute(
                update(t.jobs)
                .where(t.jobs.c.id == job_id, t.jobs.c.owner == owner)
                .values(heartbeat_at=self.store_time(conn))
            )
            return self._load_job(conn, job_id)

    def delete_job(self, job_id: str) -> None:
        """Remove a job with its events, checkpoint and candidates (evaluations stay cached)."""
        with self._tx(write=True) as conn:
            self._require(conn, job_id)
            tables = (t.job_events, t.checkpoints, t.candidates, t.job_examples, t.idempotency_keys)
            for table in tables:
                conn.execute(table.delete().where(table.c.job_id == job_id))
            conn.execute(t.jobs.delete().where(t.jobs.c.id == job_id))

    # --- idempotency keys -------------------------------------------------------------

    def keyed_job(self, key: str) -> tuple[str, str] | None:
        """(job id, request hash) a request with idempotency key ``key`` made, if any."""
        k = t.idempotency_keys
        with self._tx() as conn:
            row = conn.execute(select(k.c.job_id, k.c.request_hash).where(k.c.key == key)).first()
        return None if row is None else (str(row[0]), str(row[1]))

    def bind_key(self, key: str, request_hash: str, job_id: str) -> tuple[str, str]:
        """Record that ``key`` made ``job_id``, unless a request with that key got there
        first; returns what the key is bound to now (the first request wins)."""
        k = t.idempotency_keys
        row = {"key": key, "job_id": job_id, "request_hash": request_hash, "created_at": now()}
        with self._tx(write=True) as conn:
            self.insert_ignore(conn, k, [row], ["key"])
            bound = conn.execute(select(k.c.job_id, k.c.request_hash).where(k.c.key == key)).one()
        return str(bound[0]), str(bound[1])

    # --- events -----------------------------------------------------------------------

    def append_events(self, job_id: str, events: Sequence[Event]) -> list[Event]:
        """Store events with the job's next sequence numbers."""
        with self._tx(write=True) as conn:
            self._require(conn, job_id)
            return self._append_events(conn, job_id, events)

    def list_events(
        self,
        job_id: str,
        *,
        since: int = 0,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Events with ``seq > since``, in order."""
        stmt = (
            select(t.job_events)
            .where(t.job_events.c.job_id == job_id, t.job_events.c.seq > since)
            .order_by(t.job_events.c.seq)
        )
        if kinds:
            stmt = stmt.where(t.job_events.c.kind.in_(list(kinds)))
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._tx() as conn:
            return [event_from_row(row) for row in conn.execute(stmt)]

    # --- checkpoints ------------------------------------------------------------------

    def get_checkpoint(self, job_id: str) -> CheckpointRecord | None:
        with self._tx() as conn:
            row = conn.execute(
                select(t.checkpoints).where(t.checkpoints.c.job_id == job_id)
            ).first()
        if row is None:
            return None
        data = dict(row._mapping)
        data["created_at"] = to_datetime(data["created_at"])
        return CheckpointRecord.model_validate(data)

    # --- helpers shared with the step commit ------------------------------------------

    def _load_job(self, conn: Connection, job_id: str) -> JobRecord:
        return job_from_row(self._require_row(conn, job_id, lock=False))

    def _require(self, conn: Connection, job_id: str) -> JobRecord:
        """The job row, locked until the transaction ends (PostgreSQL: FOR UPDATE; SQLite
        write transactions already hold the database lock)."""
        return job_from_row(self._require_row(conn, job_id, lock=True))

    def _require_row(self, conn: Connection, job_id: str, *, lock: bool) -> Row[Any]:
        stmt = select(t.jobs, self.store_now().label(READ_AT)).where(t.jobs.c.id == job_id)
        if lock and self.dialect == "postgresql":
            stmt = stmt.with_for_update()
        row = conn.execute(stmt).first()
        if row is None:
            raise NotFound(f"no job {job_id!r} in this store (see `emery jobs list`)")
        return row

    def _append_events(self, conn: Connection, job_id: str, events: Sequence[Event]) -> list[Event]:
        if not events:
            return []
        last = conn.execute(
            update(t.jobs)
            .where(t.jobs.c.id == job_id)
            .values(last_seq=t.jobs.c.last_seq + len(events))
            .returning(t.jobs.c.last_seq)
        ).scalar_one()
        first = int(last) - len(events) + 1
        at = now()
        rows = [
            {"job_id": job_id, "seq": first + i, "kind": e.kind, "data": e.data, "at": at}
            for i, e in enumerate(events)
        ]
        conn.execute(t.job_events.insert(), rows)
        return [
            Event(kind=e.kind, data=e.data, seq=first + i, at=to_datetime(at))
            for i, e in enumerate(events)
        ]

    def _save_checkpoint(self, conn: Connection, checkpoint: CheckpointRecord) -> None:
        row = checkpoint.model_dump(mode="json", exclude={"created_at"})
        row["created_at"] = now()
        self.upsert(conn, t.checkpoints, [row], ["job_id"])
