"""Rollouts, attempts and spans written to (and read back from) the job store.

``StoreRecorder`` is the ``RolloutRecorder`` a job passes to its evaluator: status changes
and finished spans are buffered and written in batches, the newest state of a rollout or
attempt replacing its row. Attempt ids are ``{rollout_id}:{number}``, so rows the engine
writes for the same attempt at the end of a step (insert-or-ignore) do not duplicate them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.protocol import Store, TraceWriter
from emery.store.records import SpanFilter
from emery.tracing.write_behind import WriteBehind

log = logging.getLogger(__name__)


def load_spans(store: Store, rollout_id: str, attempt_id: str | None = None) -> list[SpanRecord]:
    """Every stored span of a rollout (or one attempt), in attempt and sequence order."""
    spans: list[SpanRecord] = []
    offset = 0
    while True:
        page = store.list_spans(
            SpanFilter(rollout_id=rollout_id, attempt_id=attempt_id), limit=1000, offset=offset
        )
        spans.extend(page.items)
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
        store: TraceWriter,
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
                [self._owned_rollout(r) for r in rollouts],
                [self._owned_attempt(a) for a in attempts],
                [self._owned_span(s) for s in spans],
            )
        except Exception as exc:
            log.warning(
                "storing %d rollouts, %d attempts and %d spans failed: %s",
                len(rollouts),
                len(attempts),
                len(spans),
                exc,
            )

    def _owned_rollout(self, rollout: Rollout) -> Rollout:
        """The rollout with this recorder's job id where it has none."""
        if rollout.job_id is not None or self.job_id is None:
            return rollout
        return rollout.model_copy(update={"job_id": self.job_id})

    def _owned_attempt(self, attempt: Attempt) -> Attempt:
        """The attempt with this recorder's worker id and a heartbeat (its start at least)."""
        return attempt.model_copy(
            update={
                "worker_id": attempt.worker_id or self.worker_id,
                "heartbeat_at": attempt.heartbeat_at or attempt.started_at,
            }
        )

    def _owned_span(self, span: SpanRecord) -> SpanRecord:
        """The span with this recorder's job id where it has none."""
        if span.job_id is not None or self.job_id is None:
            return span
        return span.model_copy(update={"job_id": self.job_id})
