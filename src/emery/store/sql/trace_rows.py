"""Rollouts, attempts and spans as rows of their tables, and back.

Rows keep times as UNIX seconds and OpenTelemetry's upper-case span kinds and status
codes; a rollout's config is flattened into columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python
from sqlalchemy import Row

from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.core.spans import SpanEvent, SpanRecord
from emery.store.records import to_datetime

_ROLLOUT_TIMES = ("created_at", "started_at", "finished_at")
_ATTEMPT_TIMES = ("started_at", "heartbeat_at", "finished_at")
_SPAN_STATUSES = ("unset", "ok", "error")


def jsonable(value: Any) -> Any:
    """``value`` as a JSON column holds it (pydantic models as dicts), else its text."""
    try:
        return to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError):
        return str(value)


def _seconds(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def record_row(
    record: Any, times: Sequence[str], defaults: Sequence[str], at: float
) -> dict[str, Any]:
    """A record as a row: JSON-able fields, times as UNIX seconds, ``defaults`` set to now."""
    data: dict[str, Any] = record.model_dump(mode="json", exclude=set(times))
    for name in times:
        value = getattr(record, name)
        data[name] = value.timestamp() if value is not None else (at if name in defaults else None)
    return data


def record_from_row(model: type[Any], row: Row[Any], times: Sequence[str]) -> Any:
    data = dict(row._mapping)
    for name in times:
        data[name] = to_datetime(data[name])
    return model.model_validate(data)


def rollout_row(rollout: Rollout) -> dict[str, Any]:
    """A rollout as a row of ``rollouts`` (its config flattened into columns)."""
    config = rollout.config
    return {
        "id": rollout.id,
        "job_id": rollout.job_id,
        "candidate_id": rollout.candidate_id,
        "example_id": rollout.example_id,
        "split": rollout.split,
        "mode": rollout.mode,
        "status": rollout.status,
        "input": jsonable(rollout.input),
        "output": jsonable(rollout.output),
        "score": rollout.score,
        "error": rollout.error,
        "max_attempts": config.max_attempts,
        "retry_statuses": list(config.retry_on),
        "timeout_seconds": config.timeout_seconds,
        "unresponsive_seconds": config.unresponsive_seconds,
        "attempt_count": rollout.attempt_count,
        "metadata": jsonable(rollout.metadata),
        "created_at": rollout.created_at.timestamp(),
        "started_at": _seconds(rollout.started_at),
        "finished_at": _seconds(rollout.finished_at),
    }


def rollout_from_row(row: Row[Any]) -> Rollout:
    data = dict(row._mapping)
    config = RolloutConfig(
        max_attempts=data.pop("max_attempts"),
        retry_on=tuple(data.pop("retry_statuses")),
        timeout_seconds=data.pop("timeout_seconds"),
        unresponsive_seconds=data.pop("unresponsive_seconds"),
    )
    for name in _ROLLOUT_TIMES:
        data[name] = to_datetime(data[name])
    return Rollout.model_validate({**data, "config": config})


def attempt_row(attempt: Attempt, at: float) -> dict[str, Any]:
    return record_row(attempt, _ATTEMPT_TIMES, ("started_at",), at)


def attempt_from_row(row: Row[Any]) -> Attempt:
    attempt: Attempt = record_from_row(Attempt, row, _ATTEMPT_TIMES)
    return attempt


def span_row(span: SpanRecord) -> dict[str, Any]:
    """A span as a row of ``spans``."""
    data: dict[str, Any] = span.model_dump(mode="json", exclude={"sequence"})
    data.update(
        kind=span.kind.upper(),
        start_time=span.start_time.timestamp(),
        end_time=span.end_time.timestamp(),
        events=[
            {"name": e.name, "time": e.time.timestamp(), "attributes": jsonable(e.attributes)}
            for e in span.events
        ],
        status_code=data.pop("status").upper(),
        seq=span.sequence,
    )
    return data


def span_from_row(row: Row[Any]) -> SpanRecord:
    data = dict(row._mapping)
    start = to_datetime(data["start_time"])
    end = to_datetime(data["end_time"])
    status = str(data["status_code"]).lower()
    return SpanRecord(
        trace_id=data["trace_id"],
        span_id=data["span_id"],
        parent_id=data["parent_id"],
        name=data["name"],
        kind=str(data["kind"]).lower(),
        start_time=start,
        end_time=end or start,
        attributes=dict(data["attributes"] or {}),
        events=[
            SpanEvent(
                name=str(e.get("name", "")),
                time=to_datetime(e.get("time") or 0.0),
                attributes=dict(e.get("attributes") or {}),
            )
            for e in data["events"] or []
        ],
        status=status if status in _SPAN_STATUSES else "unset",
        status_message=data["status_message"],
        job_id=data["job_id"],
        rollout_id=data["rollout_id"],
        attempt_id=data["attempt_id"],
        sequence=data["seq"],
    )
