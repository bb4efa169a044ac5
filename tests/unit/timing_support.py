"""Scripted models for a search's timing: replies that come back in another order from run
to run (a search must decide the same whichever rollout finishes first), and a count of
how many rollouts of one candidate were in flight at once."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Sequence
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


class LanesLM:
    """``inner``'s replies, each held a few event-loop turns; ``most_at_once`` is the most
    calls of one system prompt (one candidate) on one split (``split_of`` a call's
    messages) that were in flight together."""

    def __init__(self, inner: FakeLM, split_of: Callable[[Sequence[ChatMessage]], str]) -> None:
        self.inner, self.model, self.split_of = inner, inner.model, split_of
        self.in_flight: Counter[tuple[str, str]] = Counter()
        self.most_at_once: Counter[str] = Counter()

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        split = self.split_of(messages)
        key = (str(messages[0]["content"]), split)
        self.in_flight[key] += 1
        self.most_at_once[split] = max(self.most_at_once[split], self.in_flight[key])
        try:
            for _ in range(5):  # let every rollout started with this one start too
                await asyncio.sleep(0)
            return await self.inner.complete(messages, **params)
        finally:
            self.in_flight[key] -= 1
