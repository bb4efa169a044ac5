"""Scripted models whose replies come back in another order from run to run, for tests
that a search decides the same whichever rollout finishes first."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm import Completion, FakeLM


class Jittery:
    """``inner``'s replies, each after a random number of event-loop turns (seeded), so
    the rollouts of a step finish in a different order from run to run."""

    def __init__(self, inner: FakeLM, seed: int) -> None:
        self.inner, self.model = inner, inner.model
        self.random = random.Random(seed)

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        for _ in range(self.random.randrange(12)):
            await asyncio.sleep(0)
        return await self.inner.complete(messages, **params)
