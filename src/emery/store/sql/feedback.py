"""Feedback on recorded traces: stored by trace (and span) id, read back for the traces a
dataset is built from."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select

from emery.core.feedback import FeedbackRecord
from emery.store import schema as t
from emery.store.records import to_datetime
from emery.store.sql.base import SqlBase, now

_CHUNK = 500
"""Trace ids per ``IN (...)`` query: far below every backend's bound-parameter limit."""


class FeedbackMixin(SqlBase):
    """``add_feedback`` and ``list_feedback``."""

    def add_feedback(self, record: FeedbackRecord) -> FeedbackRecord:
        """Store one piece of feedback; returns it with its id and time."""
        at = now()
        values = record.model_dump(exclude={"id", "created_at"}, mode="json")
        with self._tx(write=True) as conn:
            result = conn.execute(t.feedback.insert().values(**values, created_at=at))
            key = result.inserted_primary_key
        return record.model_copy(
            update={"id": int(key[0]) if key else None, "created_at": to_datetime(at)}
        )

    def list_feedback(self, trace_ids: Collection[str] | None = None) -> list[FeedbackRecord]:
        """Feedback on the given traces (every trace when None), oldest first."""
        f = t.feedback
        base = select(f).order_by(f.c.created_at, f.c.id)  # chunks are merged below
        if trace_ids is None:
            statements = [base]
        else:
            ids = sorted(set(trace_ids))
            statements = [
                base.where(f.c.trace_id.in_(ids[i : i + _CHUNK]))
                for i in range(0, len(ids), _CHUNK)
            ]
        records: list[FeedbackRecord] = []
        with self._tx() as conn:
            for stmt in statements:
                for row in conn.execute(stmt):
                    data = dict(row._mapping)
                    data["created_at"] = to_datetime(data["created_at"])
                    records.append(FeedbackRecord.model_validate(data))
        if len(statements) > 1:
            records.sort(key=lambda r: (r.created_at, r.id))
        return records
