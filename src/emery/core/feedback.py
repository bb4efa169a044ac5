"""Feedback on a recorded trace: a score or a thumbs-up/down sent after the fact, by trace
or span id, that a dataset built from traces reads as the label of the calls it covers."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FeedbackKind = Literal["score", "thumb", "reward"]
THUMBS = {"up": 1.0, "down": 0.0}
_HEX = frozenset("0123456789abcdef")


def _hex_id(value: str, length: int, what: str) -> str:
    text = value.lower()
    if len(text) != length or not set(text) <= _HEX:
        raise ValueError(f"{what} must be {length} hex digits, not {value[:40]!r}")
    return text


class NewFeedback(BaseModel):
    """What a client sends: the trace (and optionally the span) it is about, and either a
    ``score`` in [0, 1] or a ``thumb`` (``"up"`` or ``"down"``), with an optional comment."""

    model_config = ConfigDict(
        json_schema_extra={  # exactly one of the two, as ``_one_value`` checks
            "oneOf": [
                {"required": ["score"], "properties": {"score": {"type": "number"}}},
                {"required": ["thumb"], "properties": {"thumb": {"type": "string"}}},
            ]
        }
    )

    trace_id: str = Field(json_schema_extra={"pattern": "^[0-9a-fA-F]{32}$"})
    span_id: str | None = Field(default=None, json_schema_extra={"pattern": "^[0-9a-fA-F]{16}$"})
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    thumb: Literal["up", "down"] | None = None
    comment: str | None = Field(default=None, max_length=4000)

    @field_validator("trace_id")
    @classmethod
    def _trace(cls, value: str) -> str:
        return _hex_id(value, 32, "trace_id")

    @field_validator("span_id")
    @classmethod
    def _span(cls, value: str | None) -> str | None:
        return None if value is None else _hex_id(value, 16, "span_id")

    @model_validator(mode="after")
    def _one_value(self) -> NewFeedback:
        if (self.score is None) == (self.thumb is None):
            raise ValueError("give either score (0 to 1) or thumb ('up' or 'down'), not both")
        return self

    @property
    def kind(self) -> FeedbackKind:
        return "thumb" if self.thumb is not None else "score"

    @property
    def value(self) -> float:
        """The feedback as a score in [0, 1] (a thumb up is 1, down is 0)."""
        return THUMBS[self.thumb] if self.thumb is not None else float(self.score or 0.0)


class FeedbackRecord(BaseModel):
    """Stored feedback: its trace and span, the score in [0, 1], what was sent and when."""

    id: int | None = None
    trace_id: str
    span_id: str | None = None
    kind: FeedbackKind
    score: float = Field(ge=0.0, le=1.0)
    raw: Any = None
    """What was sent (``"up"``, ``0.7``, a reward value)."""
    comment: str | None = None
    created_at: datetime | None = None

    @classmethod
    def of(cls, new: NewFeedback) -> FeedbackRecord:
        return cls(
            trace_id=new.trace_id,
            span_id=new.span_id,
            kind=new.kind,
            score=new.value,
            raw=new.thumb if new.thumb is not None else new.score,
            comment=new.comment,
        )
