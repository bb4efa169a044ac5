"""Rollouts, attempts and spans written to (and read back from) the job store.

``StoreRecorder`` is the ``RolloutRecorder`` a job passes to its evaluator: status changes
and finished spans are buffered and written in batches, the newest state of a rollout or
attempt replacing its row. Attempt ids are ``{rollout_id}:{number}``, so rows the engine
writes for the same attempt at the end of a step (insert-or-ignore) do not duplicate them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from emery.store.protocol import Store
from emery.store.records import AttemptRecord, RolloutRecord, SpanFilter
from emery.store.records import SpanRecord as StoredSpan
from emery.tracing.records import Attempt, Rollout, SpanEvent, SpanRecord
from emery.tracing.write_behind import WriteBehind

log = logging.getLogger(__name__)


def jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its text."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def rollout_record(rollout: Rollout, job_id: str | None = None) -> RolloutRecord:
    """A rollout as a store row."""
    config = rollout.config
    return RolloutRecord(
        id=rollout.rollout_id,
        job_id=rollout.job_id or job_id,
        candidate_id=rollout.candidate_id,
        example_id=rollout.example_id,
        split=rollout.split,
        mode=rollout.split,
        status=rollout.status,
        input=jsonable(rollout.input),
        output=jsonable(rollout.output),
        score=rollout.score,
        error=rollout.error,
        max_attempts=config.max_attempts,
        retry_statuses=list(config.retry_on),
        timeout_seconds=config.timeout_seconds,
        unresponsive_seconds=config.unresponsive_seconds,
        attempt_count=rollout.attempts,
        created_at=rollout.created_at,
        started_at=rollout.created_at if rollout.status != "queuing" else None,
        finished_at=rollout.ended_at,
    )


def attempt_record(attempt: Attempt, worker_id: str | None = None) -> AttemptRecord:
    """An attempt as a store row."""
    return AttemptRecord(
        id=attempt.attempt_id,
        rollout_id=attempt.rollout_id,
        number=attempt.number,
        status=attempt.status,
        worker_id=worker_id,
        error=attempt.error,
        started_at=attempt.started_at,
        heartbeat_at=attempt.last_heartbeat_at or attempt.started_at,
        finished_at=attempt.ended_at,
    )


def stored_span(span: SpanRecord, job_id: str | None = None) -> StoredSpan:
    """A span as a store row (times as UNIX seconds, OpenTelemetry's upper-case enums)."""
    return StoredSpan(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_id=span.parent_id,
        name=span.name,
        kind=span.kind.upper(),
        start_time=span.start_time.timestamp(),
        end_time=span.end_time.timestamp(),
        attributes=span.attributes,
        events=[
            {"name": e.name, "time": e.time.timestamp(), "attributes": e.attributes}
            for e in span.events
        ],
        status_code=span.status.upper(),
        status_message=span.status_message,
        job_id=job_id,
        rollout_id=span.rollout_id,
        attempt_id=span.attempt_id,
        seq=span.sequence,
    )


def _time(seconds: float | None) -> datetime:
    return datetime.fromtimestamp(seconds or 0.0, UTC)


def span_from_store(row: StoredSpan) -> SpanRecord:
    """A stored span as a ``SpanRecord`` (what the adapters read)."""
    status = row.status_code.lower()
    return SpanRecord(
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_id=row.parent_id,
        name=row.name,
        kind=row.kind.lower(),
        start_time=_time(row.start_time),
        end_time=_time(row.end_time if row.end_time is not None else row.start_time),
        attributes=dict(row.attributes),
        events=[
            SpanEvent(
                name=str(e.get("name", "")),
                time=_time(e.get("time")),
                attributes=dict(e.get("attributes") or {}),
            )
            for e in row.events
        ],
        status=status if status in ("unset", "ok", "error") else "unset",
        status_message=row.status_message,
        rollout_id=row.rollout_id,
        attempt_id=row.attempt_id,
        sequence=row.seq or 0,
    )


def load_spans(store: Store, rollout_id: str, attempt_id: str | None = None) -> list[SpanRecord]:
    """Every stored span of a rollout (or one attempt), in attempt and sequence order."""
    spans: list[SpanRecord] = []
    offset = 0
    while True:
        page = store.list_spans(
            SpanFilter(rollout_id=rollout_id, attempt_id=attempt_id), limit=1000, offset=offset
        )
        spans.extend(span_from_store(row) for row in page.items)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return spans


class StoreRecorder:
    """A ``RolloutRecorder`` writing to a ``Store`` behind a write buffer.

    Status changes and spans are buffered (``WriteBehind``) and written in one transaction
    per batch from a background thread, at most ``max_delay_s`` after they happen;
    ``flush`` writes what is pending before returning (the evaluator flushes at the end of
    every batch of rollouts, so a step's rows are stored before the step commits). A
    failing write is logged, never raised: tracing must not fail a rollout.
    """

    def __init__(
        self,
        store: Store,
        job_id: str | None = None,
        worker_id: str | None = None,
        *,
        max_batch: int = 2048,
        max_delay_s: float = 1.0,
    ):
        self.store = store
        self.job_id = job_id
        self.worker_id = worker_id
        self.buffer = WriteBehind(self._write, max_batch=max_batch, max_delay_s=max_delay_s)

    def save_rollout(self, rollout: Rollout) -> None:
        self.buffer.rollout(rollout)

    def save_attempt(self, attempt: Attempt) -> None:
        self.buffer.attempt(attempt)

    def add_spans(self, spans: Sequence[SpanRecord]) -> None:
        self.buffer.spans(spans)

    def flush(self) -> None:
        """Store everything recorded so far."""
        self.buffer.flush()

    def _write(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None:
        try:
            self.store.add_traces(
                [rollout_record(r, self.job_id) for r in rollouts],
                [attempt_record(a, self.worker_id) for a in attempts],
                [stored_span(s, self.job_id) for s in spans],
            )
        except Exception as exc:
            log.warning(
                "storing %d rollouts, %d attempts and %d spans failed: %s",
                len(rollouts),
                len(attempts),
                len(spans),
                exc,
            )
