"""Attempts that are running right now, by id: what the LM proxy serves.

A system that runs its agent out of process (a task app, or any agent reading
``OPENAI_BASE_URL``) needs a per-attempt proxy URL. The evaluator asks a ``RolloutProxy``
for one when an attempt starts and releases it when the attempt ends; requests for an
attempt that is not running are refused.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from emery.tracing.scope import AttemptScope


class LiveRollouts:
    """(rollout id, attempt id) → the running attempt's scope. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scopes: dict[tuple[str, str], AttemptScope] = {}
        self._latest: dict[str, AttemptScope] = {}

    def register(self, scope: AttemptScope) -> None:
        with self._lock:
            self._scopes[(scope.rollout_id, scope.attempt_id)] = scope
            self._latest[scope.rollout_id] = scope

    def unregister(self, scope: AttemptScope) -> None:
        with self._lock:
            self._scopes.pop((scope.rollout_id, scope.attempt_id), None)
            if self._latest.get(scope.rollout_id) is scope:
                del self._latest[scope.rollout_id]

    def get(self, rollout_id: str, attempt_id: str | None = None) -> AttemptScope | None:
        """The attempt's scope; without ``attempt_id``, the rollout's running attempt."""
        with self._lock:
            if attempt_id is None:
                scope = self._latest.get(rollout_id)
            else:
                scope = self._scopes.get((rollout_id, attempt_id))
        return None if scope is None or scope.closed else scope

    def __len__(self) -> int:
        with self._lock:
            return len(self._scopes)


def attempt_path(rollout_id: str, attempt_id: str) -> str:
    """The proxy path prefix of one attempt (an OpenAI ``base_url`` ends with it)."""
    return f"/rollouts/{rollout_id}/attempts/{attempt_id}/v1"


@runtime_checkable
class RolloutProxy(Protocol):
    """Gives running attempts an OpenAI-compatible base URL whose calls are recorded."""

    def open(self, scope: AttemptScope) -> str:
        """Serve ``scope`` (its ``lm`` answers) and return its base URL."""
        ...

    def close(self, scope: AttemptScope) -> None:
        """Stop serving ``scope``."""
        ...
