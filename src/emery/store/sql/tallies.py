"""What the store holds, counted at once for the server's ``/metrics``: jobs by state,
rollouts by status, runners by status, and LM usage by model and role."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, func, select

from emery.store import schema as t
from emery.store.records import LMTally, StoreTallies
from emery.store.sql.base import SqlBase


class TalliesMixin(SqlBase):
    def tallies(self) -> StoreTallies:
        """Counts over the whole store. LM usage is each job's as of its last checkpoint
        (a finished job's test scoring included where its result records it), by the model
        its config names for the role."""
        j, r, w, c = t.jobs, t.rollouts, t.workers, t.checkpoints
        with self._tx() as conn:
            jobs, rollouts, workers = (
                _count_by(conn, column) for column in (j.c.state, r.c.status, w.c.status)
            )
            usage_rows = conn.execute(
                select(j.c.resolved_config, j.c.result, c.c.usage).select_from(
                    j.outerjoin(c, c.c.job_id == j.c.id)
                )
            ).all()
        lm: dict[tuple[str, str], LMTally] = {}
        for config, result, checkpoint_usage in usage_rows:
            usage = (result or {}).get("usage") or checkpoint_usage or {}
            for role, spent in usage.items():
                model = _model_of(config, role)
                tally = lm.setdefault((model, role), LMTally(model=model, role=role))
                tally.add(spent)
        return StoreTallies(
            jobs=jobs,
            rollouts=rollouts,
            workers=workers,
            lm=sorted(lm.values(), key=lambda x: (x.model, x.role)),
        )


def _count_by(conn: Connection, column: ColumnElement[Any]) -> dict[str, int]:
    """Rows of ``column``'s table by its value."""
    rows = conn.execute(select(column, func.count()).group_by(column)).all()
    return {str(value): int(count) for value, count in rows}


def _model_of(config: dict[str, Any] | None, role: str) -> str:
    """The model a job's resolved config names for ``role`` (the task's for a role it does
    not set), or "unknown"."""
    lms = (config or {}).get("lm") or {}
    named = lms.get(role) or lms.get("task") or {}
    return str(named.get("model") or "unknown")
