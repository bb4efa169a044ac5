"""The attempt being run: a context variable that emitters, traced LMs and the proxy read.

``activate(scope)`` makes a scope current for the code it wraps (and, through contextvars,
for tasks and ``asyncio.to_thread`` threads started inside). The scope numbers its spans,
keeps the rewards and LM calls of the attempt, and tracks activity so a silent attempt
can be declared unresponsive.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span, Tracer

from emery.core.models import ChatMessage
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.core.work_clock import WorkClock, keeping_time
from emery.lm.base import LM


@dataclass(frozen=True)
class Reward:
    """An emitted reward: the primary value and every named value."""

    value: float
    dimensions: dict[str, float] = field(default_factory=dict)
    primary: str | None = None


@dataclass
class LMCall:
    """One LM call seen during an attempt (by the LM layer, the openai client or the proxy)."""

    messages: list[ChatMessage]
    reply: str
    model: str
    source: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


KEEP_SPANS = 200


class AttemptScope:
    """Everything tracing needs to know about the attempt that is running."""

    def __init__(
        self,
        rollout: Rollout,
        attempt: Attempt,
        tracer: Tracer,
        *,
        lm: LM | None = None,
        proxy_url: str | None = None,
        seed_components: dict[str, str] | None = None,
    ) -> None:
        self.rollout = rollout
        self.attempt = attempt
        self.tracer = tracer
        self.lm = lm
        self.proxy_url = proxy_url
        self.redirect_openai = False
        self.root: Span | None = None
        """The attempt's root span (the parent of spans recorded from other threads)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop running the attempt: the proxy runs LM calls there."""
        self.on_activity: Callable[[], None] | None = None
        """Called on every sign of life (a task app forwards them to the job)."""
        self.sink: Callable[[list[SpanRecord]], None] | None = None
        """Where finished spans recorded elsewhere (a task app's) are written."""
        self.components: dict[str, str] = dict(rollout.components)
        self.seed_components: dict[str, str] = dict(seed_components or {})
        self.rewards: list[Reward] = []
        self.records: list[SpanRecord] = []
        """The attempt's finished spans (the first ``KEEP_SPANS``), for its result's trace."""
        self.lm_calls: list[LMCall] = []
        self.closed = False
        self.clock = WorkClock()
        """The attempt's own time, which ``timeout_seconds`` bounds: it stands still while
        the attempt waits on an in-process model (``emery.core.work_clock``)."""
        self.span_count = 0
        self._lock = threading.Lock()
        self._sequence = 0
        self._in_flight = 0
        self._last_activity = time.monotonic()

    @property
    def rollout_id(self) -> str:
        return self.rollout.id

    @property
    def attempt_id(self) -> str:
        return self.attempt.id

    @property
    def last_reward(self) -> Reward | None:
        with self._lock:
            return self.rewards[-1] if self.rewards else None

    def next_sequence(self) -> int:
        """The next span number of this attempt (0, 1, 2, ... in start order)."""
        with self._lock:
            number = self._sequence
            self._sequence += 1
            self.span_count += 1
            self._last_activity = time.monotonic()
        if self.on_activity is not None:
            self.on_activity()
        return number

    def touch(self) -> None:
        """Record a sign of life."""
        with self._lock:
            self._last_activity = time.monotonic()
        if self.on_activity is not None:
            self.on_activity()

    def idle_seconds(self) -> float:
        """Seconds since the last sign of life; 0 while an LM call is in flight."""
        with self._lock:
            if self._in_flight:
                return 0.0
            return time.monotonic() - self._last_activity

    def begin_call(self) -> None:
        """Mark an LM call in flight: waiting on emery's model is not unresponsiveness."""
        with self._lock:
            self._in_flight += 1

    def end_call(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last_activity = time.monotonic()

    def keep(self, record: SpanRecord) -> None:
        with self._lock:
            if len(self.records) < KEEP_SPANS:
                self.records.append(record)

    def add_reward(self, reward: Reward) -> None:
        with self._lock:
            self.rewards.append(reward)

    def add_lm_call(self, call: LMCall) -> None:
        with self._lock:
            self.lm_calls.append(call)

    def substitutions(self) -> dict[str, str]:
        """Seed text → candidate text for every component the candidate changed."""
        return {
            seed: self.components[name]
            for name, seed in self.seed_components.items()
            if seed and name in self.components and self.components[name] != seed
        }


_current: ContextVar[AttemptScope | None] = ContextVar("emery_attempt_scope", default=None)


def active_scope() -> AttemptScope | None:
    """The scope set in this context, closed or not (the span processor needs both)."""
    return _current.get()


def current_scope() -> AttemptScope | None:
    """The attempt running in this context, if any (closed attempts count as none)."""
    scope = _current.get()
    return None if scope is None or scope.closed else scope


@contextmanager
def activate(scope: AttemptScope) -> Iterator[AttemptScope]:
    """Make ``scope`` (and its clock) current for the enclosed code."""
    token = _current.set(scope)
    try:
        with keeping_time(scope.clock):
            yield scope
    finally:
        _current.reset(token)


def heartbeat() -> None:
    """Tell emery the running agent is alive (for long work that makes no spans)."""
    scope = current_scope()
    if scope is not None:
        scope.touch()
