"""Tracing: rollouts, attempts and OpenTelemetry-shaped spans; emitters; adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.tracing.emitters import (
        emit_annotation,
        emit_exception,
        emit_message,
        emit_object,
        emit_reward,
    )
    from emery.tracing.lm import TracedLM
    from emery.tracing.processor import RecordingSpanProcessor, RolloutTracing
    from emery.tracing.recorder import MemoryRecorder, NullRecorder, RolloutRecorder
    from emery.tracing.records import (
        Attempt,
        AttemptStatus,
        Rollout,
        RolloutConfig,
        RolloutStatus,
        SpanEvent,
        SpanRecord,
    )
    from emery.tracing.registry import LiveRollouts, RolloutProxy
    from emery.tracing.scope import AttemptScope, LMCall, Reward, current_scope, heartbeat

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "emit_annotation": "emery.tracing.emitters",
        "emit_exception": "emery.tracing.emitters",
        "emit_message": "emery.tracing.emitters",
        "emit_object": "emery.tracing.emitters",
        "emit_reward": "emery.tracing.emitters",
        "TracedLM": "emery.tracing.lm",
        "RecordingSpanProcessor": "emery.tracing.processor",
        "RolloutTracing": "emery.tracing.processor",
        "MemoryRecorder": "emery.tracing.recorder",
        "NullRecorder": "emery.tracing.recorder",
        "RolloutRecorder": "emery.tracing.recorder",
        "Attempt": "emery.tracing.records",
        "AttemptStatus": "emery.tracing.records",
        "Rollout": "emery.tracing.records",
        "RolloutConfig": "emery.tracing.records",
        "RolloutStatus": "emery.tracing.records",
        "SpanEvent": "emery.tracing.records",
        "SpanRecord": "emery.tracing.records",
        "LiveRollouts": "emery.tracing.registry",
        "RolloutProxy": "emery.tracing.registry",
        "AttemptScope": "emery.tracing.scope",
        "LMCall": "emery.tracing.scope",
        "Reward": "emery.tracing.scope",
        "current_scope": "emery.tracing.scope",
        "heartbeat": "emery.tracing.scope",
    },
)

__all__ = [
    "Attempt",
    "AttemptScope",
    "AttemptStatus",
    "LMCall",
    "LiveRollouts",
    "MemoryRecorder",
    "NullRecorder",
    "RecordingSpanProcessor",
    "Reward",
    "Rollout",
    "RolloutConfig",
    "RolloutProxy",
    "RolloutRecorder",
    "RolloutStatus",
    "RolloutTracing",
    "SpanEvent",
    "SpanRecord",
    "TracedLM",
    "current_scope",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "heartbeat",
]
