"""Tracing: rollouts, attempts and OpenTelemetry-shaped spans; emitters; adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.core.rollouts import (
        Attempt,
        AttemptStatus,
        Rollout,
        RolloutConfig,
        RolloutStatus,
    )
    from emery.core.spans import SpanEvent, SpanRecord
    from emery.tracing.agents import as_agent
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
    from emery.tracing.registry import LiveRollouts, RolloutProxy
    from emery.tracing.scope import AttemptScope, LMCall, Reward, current_scope, heartbeat

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "as_agent": "emery.tracing.agents",
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
        "Attempt": "emery.core.rollouts",
        "AttemptStatus": "emery.core.rollouts",
        "Rollout": "emery.core.rollouts",
        "RolloutConfig": "emery.core.rollouts",
        "RolloutStatus": "emery.core.rollouts",
        "SpanEvent": "emery.core.spans",
        "SpanRecord": "emery.core.spans",
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
    "as_agent",
    "current_scope",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "heartbeat",
]
