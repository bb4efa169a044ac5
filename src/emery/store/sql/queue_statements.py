"""The rollout queue's hot statements, built once with bound parameters.

A runner makes a claim, heartbeats, a finish and an attempt end per rollout; building and
hashing those statements anew each time cost about a third of the store's CPU per
rollout. Parameter names start with ``p_`` (SQLAlchemy reserves a column's own name in a
``SET`` clause).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Select, Update, bindparam, func, select, update
from sqlalchemy.sql.elements import ColumnElement

from emery.store import schema as t
from emery.store.queue import EXECUTOR_KEY, FINAL_ROLLOUT, LIVE_ATTEMPT, RUNNERS

CLAIM_WINDOW = 8
"""Queued rollouts a claim tries, oldest first, before saying the queue is empty."""


def queued_marker() -> ColumnElement[bool]:
    """A rollout row that went through the queue."""
    marker: ColumnElement[bool] = t.rollouts.c["metadata"][EXECUTOR_KEY].as_string() == RUNNERS
    return marker


@cache
def claim_window(one_job: bool) -> Select[Any]:
    """The oldest queued rollouts of running jobs (of ``p_job`` when ``one_job``)."""
    r, j = t.rollouts, t.jobs
    stmt: Select[Any] = (
        select(r.c.id, r.c.attempt_count)
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
def claim_update() -> Update:
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
def heartbeat() -> Update:
    """Renew attempt ``p_id``'s heartbeat while it is live."""
    a = t.attempts
    return (
        update(a)
        .where(a.c.id == bindparam("p_id"), a.c.status.in_(LIVE_ATTEMPT))
        .values(heartbeat_at=bindparam("p_at"))
    )


@cache
def end_attempt() -> Update:
    """End live attempt ``p_id`` with ``p_status`` and ``p_error`` at ``p_at``."""
    a = t.attempts
    return (
        update(a)
        .where(a.c.id == bindparam("p_id"), a.c.status.in_(LIVE_ATTEMPT))
        .values(
            status=bindparam("p_status"),
            error=bindparam("p_error"),
            finished_at=bindparam("p_at"),
            heartbeat_at=bindparam("p_at"),
        )
    )


@cache
def rollout_metadata() -> Select[Any]:
    """Rollout ``p_id``'s metadata."""
    r = t.rollouts
    return select(r.c["metadata"]).where(r.c.id == bindparam("p_id"))


@cache
def finish() -> Update:
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
            finished_at=bindparam("p_at"),
        )
    )
