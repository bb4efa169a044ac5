"""Tracing: rollouts, attempts and OpenTelemetry-shaped spans; emitters; adapters."""

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
