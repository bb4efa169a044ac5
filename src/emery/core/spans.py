"""Spans: one OpenTelemetry-shaped model for what tracing records, the store keeps and
exports read."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

SpanStatus = Literal["unset", "ok", "error"]


class SpanEvent(BaseModel):
    """A timestamped event inside a span (for example an exception)."""

    name: str
    time: datetime
    attributes: dict[str, Any] = Field(default_factory=dict)


class SpanRecord(BaseModel):
    """One finished span: OpenTelemetry fields plus its job, rollout, attempt and sequence.

    ``sequence`` orders the spans of one attempt; the store numbers spans stored without one.
    """

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str
    kind: str = "internal"
    start_time: datetime
    end_time: datetime
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    status: SpanStatus = "unset"
    status_message: str | None = None
    job_id: str | None = None
    rollout_id: str | None = None
    attempt_id: str | None = None
    sequence: int | None = None

    @property
    def duration_s(self) -> float:
        return (self.end_time - self.start_time).total_seconds()
