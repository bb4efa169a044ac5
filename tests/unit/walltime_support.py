"""A fake clock that the task model moves on, for the wall-time tests (no real sleeping).

Imported as ``walltime_support``; configs load ``python/walltime_support:task_lm``, whose
every call advances ``CLOCK`` by ``SECONDS_PER_CALL``. Pass ``CLOCK`` to the engine
(``JobEngine(..., clock=CLOCK)``) or to a search context's budget (``ctx.budget.clock``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jobs_support as js

from emery.core.models import ChatMessage
from emery.lm import Completion
from emery.lm.base import LM

SECONDS_PER_CALL = 1.0


@dataclass
class FakeClock:
    """Seconds that pass only when ``advance`` says so."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


CLOCK = FakeClock()


class ClockedLM:
    """``inner``, each call taking ``seconds`` on ``clock``."""

    def __init__(self, inner: LM, clock: FakeClock, seconds: float = SECONDS_PER_CALL) -> None:
        self.inner = inner
        self.clock = clock
        self.seconds = seconds
        self.model = getattr(inner, "model", "fake/clocked")

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.clock.advance(self.seconds)
        return await self.inner.complete(messages, **params)


def task_lm() -> ClockedLM:
    """The jobs' hash task model, each call taking one second on ``CLOCK``."""
    return ClockedLM(js.task_lm(), CLOCK)
