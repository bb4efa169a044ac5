"""Retention (``emery store prune``): the bulky trace data of old finished jobs deleted,
and the space given back.

What goes: the spans, rollouts and attempts of jobs in a terminal state (succeeded,
failed, cancelled) last updated before the cutoff, and, when asked (``app_traces``), the
application traces (spans with no job and no rollout) whose newest span started before
it. What stays: every job row, its candidates, evaluations, events and checkpoint (what
``emery report``, ``emery candidates``, warm starts, published prompts and the reuse of
stored results read; an export falls back to the calls each evaluation keeps), every job
not yet finished, and, whole, the job of a published prompt (a ``prompt`` resource names
it) or of an approval request still pending.

The deletes run a few jobs (or application traces) to a transaction, so a running job's
writes never wait long behind them; SQLite then runs ``VACUUM`` (which holds the write
lock while it rewrites the file) and truncates the WAL, so the file shrinks. PostgreSQL
deletes only: autovacuum makes the space reusable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Connection,
    Select,
    and_,
    delete,
    exists,
    func,
    or_,
    select,
    union,
)
from sqlalchemy.sql.elements import ColumnElement

from emery.core.errors import StoreError
from emery.store import schema as t
from emery.store.errors import store_label
from emery.store.records import PruneCounts
from emery.store.sql.base import SqlBase
from emery.store.states import TERMINAL_STATES

PROMPT_KIND = "prompt"
"""The kind of a published prompt's resources (``reports.published.PROMPT_KIND``)."""
JOBS_PER_TX = 20
TRACES_PER_TX = 500


def kept_job_ids() -> CompoundSelect[Any]:
    """The jobs prune leaves whole: a published prompt's job and a job with a pending
    approval request (its review reads the rollouts' inputs)."""
    r, a = t.resources, t.approvals
    return union(
        select(r.c.job_id).where(r.c.kind == PROMPT_KIND, r.c.job_id.is_not(None)),
        select(a.c.job_id).where(a.c.status == "pending"),
    )


def _old_finished(cutoff: float) -> ColumnElement[bool]:
    j = t.jobs
    return and_(j.c.state.in_(sorted(TERMINAL_STATES)), j.c.updated_at < cutoff)


def prunable_job_ids(cutoff: float) -> Select[Any]:
    """Finished jobs last updated before ``cutoff``, not kept, with trace rows left."""
    j, r, s = t.jobs, t.rollouts, t.spans
    return select(j.c.id).where(
        _old_finished(cutoff),
        j.c.id.not_in(kept_job_ids()),
        or_(exists().where(r.c.job_id == j.c.id), exists().where(s.c.job_id == j.c.id)),
    )


def _job_rows(ids: Any) -> dict[str, tuple[Any, ColumnElement[bool]]]:
    """The (table, condition) of the spans, attempts and rollouts of the jobs ``ids`` (a
    list or a select of job ids), in the order they are deleted."""
    r = t.rollouts
    rollout_ids = select(r.c.id).where(r.c.job_id.in_(ids))
    return {
        "spans": (
            t.spans,
            or_(t.spans.c.job_id.in_(ids), t.spans.c.rollout_id.in_(rollout_ids)),
        ),
        "attempts": (t.attempts, t.attempts.c.rollout_id.in_(rollout_ids)),
        "rollouts": (r, r.c.job_id.in_(ids)),
    }


def _application() -> ColumnElement[bool]:
    s = t.spans
    return and_(s.c.job_id.is_(None), s.c.rollout_id.is_(None))


def old_trace_ids(cutoff: float) -> Select[Any]:
    """Application traces whose newest span started before ``cutoff``."""
    s = t.spans
    return (
        select(s.c.trace_id)
        .where(_application())
        .group_by(s.c.trace_id)
        .having(func.max(s.c.start_time) < cutoff)
    )


def _count(conn: Connection, table: Any, condition: ColumnElement[bool]) -> int:
    return int(conn.execute(select(func.count()).select_from(table).where(condition)).scalar() or 0)


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class RetentionMixin(SqlBase):
    def prune(
        self,
        before: datetime,
        *,
        app_traces: bool = False,
        dry_run: bool = False,
        vacuum: bool = True,
    ) -> PruneCounts:
        """Delete the spans, rollouts and attempts of finished jobs last updated before
        ``before`` (and application traces older than it, with ``app_traces``), then, on a
        SQLite file, ``VACUUM`` (unless ``vacuum`` is False). ``dry_run`` deletes nothing
        and counts what would go. See the module doc for what is kept."""
        cutoff = before.timestamp()
        file = self._file()
        counts = PruneCounts(before=before, dry_run=dry_run, bytes_before=_size(file))
        with self._tx() as conn:
            counts.kept_jobs = _count(
                conn, t.jobs, and_(_old_finished(cutoff), t.jobs.c.id.in_(kept_job_ids()))
            )
            job_ids = list(conn.execute(prunable_job_ids(cutoff)).scalars())
            trace_ids = list(conn.execute(old_trace_ids(cutoff)).scalars()) if app_traces else []
            if dry_run:
                counts.jobs = len(job_ids)
                for name, (table, condition) in _job_rows(prunable_job_ids(cutoff)).items():
                    setattr(counts, name, _count(conn, table, condition))
                if app_traces:
                    counts.app_spans = _count(
                        conn,
                        t.spans,
                        and_(_application(), t.spans.c.trace_id.in_(old_trace_ids(cutoff))),
                    )
                return counts
        for batch in _chunks(job_ids, JOBS_PER_TX):
            self._prune_jobs(batch, cutoff, counts)
        for traces in _chunks(trace_ids, TRACES_PER_TX):
            with self._tx(write=True) as conn:
                still = old_trace_ids(cutoff).where(t.spans.c.trace_id.in_(list(traces)))
                done = conn.execute(  # not a trace that a new span joined since
                    delete(t.spans).where(_application(), t.spans.c.trace_id.in_(still))
                )
                counts.app_spans += int(done.rowcount)
        if file is not None and vacuum:
            self._vacuum(counts)
        counts.bytes_after = _size(file)
        return counts

    def _prune_jobs(self, batch: Sequence[str], cutoff: float, counts: PruneCounts) -> None:
        """One transaction: the trace rows of those of ``batch`` still prunable (read
        again, under the write lock)."""
        with self._tx(write=True) as conn:
            still = prunable_job_ids(cutoff).where(t.jobs.c.id.in_(list(batch)))
            ids = list(conn.execute(still).scalars())
            if not ids:
                return
            counts.jobs += len(ids)
            for name, (table, condition) in _job_rows(ids).items():
                done = conn.execute(delete(table).where(condition))
                setattr(counts, name, getattr(counts, name) + int(done.rowcount))

    def _file(self) -> Path | None:
        """The SQLite file of this store; None for PostgreSQL or SQLite in memory."""
        database = self.engine.url.database
        if self.dialect != "sqlite" or not database or database == ":memory:":
            return None
        return Path(database)

    def _vacuum(self, counts: PruneCounts) -> None:
        """``VACUUM`` the file when it has free pages (this prune's, or an earlier one's
        whose ``VACUUM`` failed) and truncate its WAL, outside any transaction (the store's
        connections begin one on every use, so this runs on a driver connection)."""
        guard = self._lock if self._lock is not None else nullcontext()
        with guard:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("PRAGMA freelist_count")
                (free,) = cursor.fetchone() or (0,)
                if free:
                    cursor.execute("VACUUM")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cursor.close()
            except sqlite3.Error as exc:
                raise StoreError(
                    f"{counts.rows} rows were deleted from the store {store_label(self.url)},"
                    f" but VACUUM failed ({exc}), so the file keeps its size: run"
                    " `emery store prune` again (VACUUM needs free disk space about the"
                    " file's size, and no other write for as long as it runs)"
                ) from None
            finally:
                raw.close()


def _size(file: Path | None) -> int | None:
    """The bytes of a SQLite file and its ``-wal`` file (None without a file)."""
    if file is None:
        return None
    total = 0
    for path in (file, file.with_name(file.name + "-wal")):
        with suppress(OSError):
            total += path.stat().st_size
    return total
