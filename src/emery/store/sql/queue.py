"""The rollout queue on the store: claim with a lease, heartbeat, finish once, expire leases.

Every change is one conditional ``UPDATE`` whose row count says whether it happened, so
two runners never hold the same attempt and a result is kept once, on SQLite (writes are
serialized by ``BEGIN IMMEDIATE``) and PostgreSQL (a second ``UPDATE`` of a row waits for
the first to commit, then no longer matches) alike.

A runner makes a claim, heartbeats, a finish and an attempt end per rollout; building and
hashing those statements anew each time cost about a third of the store's CPU per
rollout, so they are built once (``@cache``) with bound parameters, whose names start with
``p_`` (SQLAlchemy reserves a column's own name in a ``SET`` clause).

On PostgreSQL the store's clock is the database's (``SqlBase.store_time``): those
statements read it themselves (``in_sql``: ``database_now`` in place of ``p_at``, and a
claim's window returns it with its rows), so a queue call costs no ``SELECT`` of the time
of its own. Elsewhere, or with a test's ``clock`` set, the time is a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, Update, bindparam, func, select, update
from sqlalchemy.sql.elements import ColumnElement

from emery.core.rollouts import Rollout
from emery.store import schema as t
from emery.store.queue import (
    DEFAULT_LEASE_S,
    EXECUTOR_KEY,
    FINAL_ROLLOUT,
    LEASE_KEY,
    LIVE_ATTEMPT,
    LIVE_ROLLOUT,
    RESULT_KEY,
    RUNNERS,
)
from emery.store.records import RolloutEnd
from emery.store.sql.base import SqlBase, database_now
from emery.store.sql.trace_rows import jsonable, rollout_from_row

CLAIM_WINDOW = 8
"""Queued rollouts a claim tries, oldest first, before saying the queue is empty."""


def queued_marker() -> ColumnElement[bool]:
    """A rollout row that went through the queue."""
    marker: ColumnElement[bool] = t.rollouts.c["metadata"][EXECUTOR_KEY].as_string() == RUNNERS
    return marker


def stamp(in_sql: bool) -> ColumnElement[Any]:
    """The store's time in a queue statement: read by the statement, or ``p_at``."""
    return database_now() if in_sql else bindparam("p_at")


@cache
def claim_window(one_job: bool, in_sql: bool) -> Select[Any]:
    """The oldest queued rollouts of running jobs (of ``p_job`` when ``one_job``); with
    ``in_sql``, each row with the store's time (``store_now``)."""
    r, j = t.rollouts, t.jobs
    columns: list[ColumnElement[Any]] = [r.c.id, r.c.attempt_count]
    if in_sql:
        columns.append(database_now().label("store_now"))
    stmt: Select[Any] = (
        select(*columns)
        .join(j, j.c.id == r.c.job_id)
        .where(r.c.status == "queuing", j.c.state == "running", queued_marker())
        .order_by(r.c.created_at, r.c.id)
        .limit(CLAIM_WINDOW)
        # PostgreSQL: skip rows other claims hold, rather than wait for them (SQLite
        # renders no FOR UPDATE: its writes are serialized already)
        .with_for_update(of=r, skip_locked=True)
    )
    return stmt.where(r.c.job_id == bindparam("p_job")) if one_job else stmt


@cache
def claim_statement() -> Update:
    """Start attempt ``p_number`` of rollout ``p_id`` if it is still queued at ``p_count``."""
    r = t.rollouts
    return (
        update(r)
        .where(
            r.c.id == bindparam("p_id"),
            r.c.status == "queuing",
            r.c.attempt_count == bindparam("p_count"),
        )
        .values(
            status="running",
            attempt_count=bindparam("p_number"),
            started_at=func.coalesce(r.c.started_at, bindparam("p_at")),
        )
        .returning(*r.c)
    )


@cache
def heartbeat_statement(in_sql: bool) -> Update:
    """Renew attempt ``p_id``'s heartbeat while it is live."""
    a = t.attempts
    return (
        update(a)
        .where(a.c.id == bindparam("p_id"), a.c.status.in_(LIVE_ATTEMPT))
        .values(heartbeat_at=stamp(in_sql))
    )


@cache
def end_attempt_statement(in_sql: bool) -> Update:
    """End live attempt ``p_id`` with ``p_status`` and ``p_error``, now."""
    a = t.attempts
    at = stamp(in_sql)
    return (
        update(a)
        .where(a.c.id == bindparam("p_id"), a.c.status.in_(LIVE_ATTEMPT))
        .values(
            status=bindparam("p_status"),
            error=bindparam("p_error"),
            finished_at=at,
            heartbeat_at=at,
        )
    )


@cache
def metadata_statement() -> Select[Any]:
    """Rollout ``p_id``'s metadata."""
    r = t.rollouts
    return select(r.c["metadata"]).where(r.c.id == bindparam("p_id"))


@cache
def finish_statement(in_sql: bool) -> Update:
    """Store rollout ``p_id``'s result unless it has ended already."""
    r = t.rollouts
    return (
        update(r)
        .where(r.c.id == bindparam("p_id"), r.c.status.not_in(FINAL_ROLLOUT))
        .values(
            status=bindparam("p_status"),
            output=bindparam("p_output", type_=r.c.output.type),
            score=bindparam("p_score"),
            error=bindparam("p_error"),
            metadata=bindparam("p_metadata", type_=r.c["metadata"].type),
            finished_at=stamp(in_sql),
        )
    )


class QueueMixin(SqlBase):
    """The store-as-queue protocol ``emery runner`` processes and a ``runners`` job use."""

    def claim_rollout(self, worker_id: str, *, job_id: str | None = None) -> Rollout | None:
        """Take the oldest queued rollout of a running job (of ``job_id`` if given): its next
        attempt starts, held by ``worker_id``, with a heartbeat now. None: nothing queued."""
        with self._tx(write=True) as conn:
            return self._claim_next(conn, worker_id, job_id)

    def _claim_next(self, conn: Connection, worker_id: str, job_id: str | None) -> Rollout | None:
        in_sql = self.clock_in_sql
        window = claim_window(job_id is not None, in_sql)
        for row in conn.execute(window, {"p_job": job_id} if job_id is not None else {}).all():
            at = float(row.store_now) if in_sql else self.store_time(conn)
            claimed = self._claim(conn, row.id, int(row.attempt_count), worker_id, at)
            if claimed is not None:
                return claimed
        return None

    def _claim(
        self, conn: Connection, rollout_id: str, count: int, worker_id: str, at: float
    ) -> Rollout | None:
        """Start attempt ``count + 1`` of a queued rollout at ``at``; the rollout, or None
        when another claim took it first."""
        number = count + 1
        params = {"p_id": rollout_id, "p_count": count, "p_number": number, "p_at": at}
        claimed = conn.execute(claim_statement(), params).first()
        if claimed is None:
            return None
        row = {
            "id": f"{rollout_id}:{number}",
            "rollout_id": rollout_id,
            "number": number,
            "status": "running",
            "worker_id": worker_id,
            "error": None,
            "started_at": at,
            "heartbeat_at": at,
            "finished_at": None,
        }
        self.upsert(conn, t.attempts, [row], ["id"])
        return rollout_from_row(claimed)

    def heartbeat_attempt(self, attempt_id: str) -> bool:
        """Renew the lease of a running attempt; False when the attempt is no longer live
        (its lease expired and it was given up)."""
        with self._tx(write=True) as conn:
            params = {"p_id": attempt_id, **self._stamped(conn)}
            done = conn.execute(heartbeat_statement(self.clock_in_sql), params)
        return bool(done.rowcount == 1)

    def finish_rollout(self, rollout_id: str, attempt_id: str, end: RolloutEnd) -> bool:
        """End an attempt as ``end`` says and, unless the rollout already has a result,
        store this one (``metadata["result"]``) and its final ``status``. True when this
        result was kept."""
        with self._tx(write=True) as conn:
            return self._finish(conn, rollout_id, attempt_id, end)

    def finish_and_claim(
        self,
        rollout_id: str,
        attempt_id: str,
        end: RolloutEnd,
        *,
        worker_id: str,
        job_id: str | None = None,
    ) -> tuple[bool, Rollout | None]:
        """``finish_rollout``, then ``claim_rollout`` for ``worker_id``, in one transaction:
        whether the result was kept, and the next rollout (None: nothing queued)."""
        with self._tx(write=True) as conn:
            kept = self._finish(conn, rollout_id, attempt_id, end)
            return kept, self._claim_next(conn, worker_id, job_id)

    def _finish(self, conn: Connection, rollout_id: str, attempt_id: str, end: RolloutEnd) -> bool:
        at = self._stamped(conn)
        self._end_attempt(conn, attempt_id, end.attempt_status, end.error, at)
        row = conn.execute(metadata_statement(), {"p_id": rollout_id}).first()
        if row is None:
            return False
        values = {
            "p_id": rollout_id,
            "p_status": end.status,
            "p_output": jsonable(end.output),
            "p_score": end.score,
            "p_error": end.error,
            "p_metadata": {**(row[0] or {}), RESULT_KEY: jsonable(end.result)},
            **at,
        }
        return bool(conn.execute(finish_statement(self.clock_in_sql), values).rowcount == 1)

    def requeue_rollout(
        self, rollout_id: str, attempt_id: str, number: int, *, attempt_status: str, error: str
    ) -> bool:
        """End attempt ``number`` as retriable and put its rollout back in the queue, if that
        attempt is still the rollout's current one. True when it was requeued."""
        r = t.rollouts
        with self._tx(write=True) as conn:
            self._end_attempt(conn, attempt_id, attempt_status, error, self._stamped(conn))
            done = conn.execute(
                update(r)
                .where(
                    r.c.id == rollout_id,
                    r.c.status.in_(LIVE_ROLLOUT),
                    r.c.attempt_count == number,
                )
                .values(status="queuing", error=error)
            )
        return bool(done.rowcount == 1)

    def withdraw_rollouts(self, rollout_ids: Sequence[str], *, error: str) -> int:
        """Cancel those of ``rollout_ids`` still waiting in the queue (no runner claimed
        them), so none is claimed later. Returns how many were withdrawn."""
        if not rollout_ids:
            return 0
        r = t.rollouts
        with self._tx(write=True) as conn:
            done = conn.execute(
                update(r)
                .where(r.c.id.in_(list(rollout_ids)), r.c.status == "queuing")
                .values(status="cancelled", error=error, finished_at=self.store_now())
            )
        return int(done.rowcount)

    def expire_leases(self, *, job_id: str | None = None) -> int:
        """Give up every live queued attempt whose heartbeat is older than its rollout's
        lease: the attempt becomes ``unresponsive`` and its rollout goes back to the queue
        (or fails when no attempt is left). Returns how many leases expired."""
        r, a = t.rollouts, t.attempts
        stmt: Select[Any] = (
            select(
                r.c.id,
                r.c.attempt_count,
                r.c.max_attempts,
                r.c.retry_statuses,
                r.c["metadata"],
                a.c.id.label("attempt_id"),
                a.c.worker_id,
                func.coalesce(a.c.heartbeat_at, a.c.started_at).label("seen"),
            )
            .join(a, (a.c.rollout_id == r.c.id) & (a.c.number == r.c.attempt_count))
            .where(r.c.status.in_(LIVE_ROLLOUT), a.c.status.in_(LIVE_ATTEMPT), queued_marker())
        )
        if job_id is not None:
            stmt = stmt.where(r.c.job_id == job_id)
        expired = 0
        with self._tx(write=True) as conn:
            # the store's time read with the rows (none read when none is live)
            for row in conn.execute(stmt.add_columns(self.store_now().label("store_now"))).all():
                at = float(row.store_now)
                lease = float((row.metadata or {}).get(LEASE_KEY) or DEFAULT_LEASE_S)
                if at - float(row.seen) < lease:
                    continue
                expired += self._expire(conn, row, lease, at)
        return expired

    def _expire(self, conn: Connection, row: Any, lease: float, at: float) -> int:
        r, a = t.rollouts, t.attempts
        error = f"lease expired: worker {row.worker_id} sent no heartbeat for {lease:g} s"
        gave_up = conn.execute(
            update(a)
            .where(
                a.c.id == row.attempt_id,
                a.c.status.in_(LIVE_ATTEMPT),
                func.coalesce(a.c.heartbeat_at, a.c.started_at) <= at - lease,
            )
            .values(status="unresponsive", error=error, finished_at=at)
        )
        if gave_up.rowcount != 1:
            return 0
        number = int(row.attempt_count)
        retry = number < int(row.max_attempts) and "unresponsive" in (row.retry_statuses or ())
        values: dict[str, Any] = {"status": "queuing" if retry else "failed", "error": error}
        if not retry:
            values["finished_at"] = at
        conn.execute(
            update(r)
            .where(r.c.id == row.id, r.c.status.in_(LIVE_ROLLOUT), r.c.attempt_count == number)
            .values(**values)
        )
        return 1

    def _stamped(self, conn: Connection) -> dict[str, float]:
        """The ``p_at`` parameter of the queue's statements: none when they read the store's
        time themselves (``clock_in_sql``), else ``store_time``."""
        return {} if self.clock_in_sql else {"p_at": self.store_time(conn)}

    def _end_attempt(
        self,
        conn: Connection,
        attempt_id: str,
        status: str,
        error: str | None,
        at: dict[str, float],
    ) -> None:
        """End live attempt ``attempt_id`` (``at``: ``_stamped``'s parameter)."""
        params = {"p_id": attempt_id, "p_status": status, "p_error": error, **at}
        conn.execute(end_attempt_statement(self.clock_in_sql), params)
