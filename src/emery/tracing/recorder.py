"""Where rollouts, attempts and spans go: a small protocol and an in-memory implementation.

The job engine plugs in a store-backed recorder (``emery.tracing.store_recorder``); tests
use ``MemoryRecorder``; ``NullRecorder`` keeps nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord


@runtime_checkable
class RolloutRecorder(Protocol):
    """Receives rollouts and attempts on every status change, and finished spans in batches."""

    def save_rollout(self, rollout: Rollout) -> None:
        """Insert or update a rollout (keyed by its id)."""
        ...

    def save_attempt(self, attempt: Attempt) -> None:
        """Insert or update an attempt (keyed by its id)."""
        ...

    def add_spans(self, spans: Sequence[SpanRecord]) -> None:
        """Append finished spans (a batch, possibly from several rollouts)."""
        ...


class NullRecorder:
    """Keeps nothing."""

    def save_rollout(self, rollout: Rollout) -> None:
        return None

    def save_attempt(self, attempt: Attempt) -> None:
        return None

    def add_spans(self, spans: Sequence[SpanRecord]) -> None:
        return None


class MemoryRecorder:
    """Keeps everything in memory (thread-safe); ``batches`` counts ``add_spans`` calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rollouts: dict[str, Rollout] = {}
        self._attempts: dict[str, Attempt] = {}
        self._spans: list[SpanRecord] = []
        self.batches = 0
        self.history: dict[str, list[str]] = {}

    def save_rollout(self, rollout: Rollout) -> None:
        with self._lock:
            self._rollouts[rollout.id] = rollout.model_copy(deep=True)
            seen = self.history.setdefault(rollout.id, [])
            if not seen or seen[-1] != rollout.status:
                seen.append(rollout.status)

    def save_attempt(self, attempt: Attempt) -> None:
        with self._lock:
            self._attempts[attempt.id] = attempt.model_copy(deep=True)

    def add_spans(self, spans: Sequence[SpanRecord]) -> None:
        with self._lock:
            self._spans.extend(spans)
            self.batches += 1

    def rollouts(self) -> list[Rollout]:
        with self._lock:
            return list(self._rollouts.values())

    def rollout(self, rollout_id: str) -> Rollout:
        with self._lock:
            return self._rollouts[rollout_id]

    def attempts(self, rollout_id: str) -> list[Attempt]:
        with self._lock:
            found = [a for a in self._attempts.values() if a.rollout_id == rollout_id]
        return sorted(found, key=lambda a: a.number)

    def spans(
        self, rollout_id: str | None = None, attempt_id: str | None = None
    ) -> list[SpanRecord]:
        """Spans in attempt order, then sequence order."""
        with self._lock:
            spans = list(self._spans)
        numbers = {a.id: a.number for a in self._attempts.values()}
        chosen = [
            s
            for s in spans
            if (rollout_id is None or s.rollout_id == rollout_id)
            and (attempt_id is None or s.attempt_id == attempt_id)
        ]
        return sorted(chosen, key=lambda s: (numbers.get(s.attempt_id or "", 0), s.sequence or 0))
