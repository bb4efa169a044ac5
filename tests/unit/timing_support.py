"""Scripted models for a search's timing: replies that come back in another order from run
to run (a search must decide the same whichever rollout finishes first), a count of
how many rollouts of one candidate were in flight at once, and slow replies that count
the round trips a search waits on."""

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


class Flight:
    """The calls in flight across models; ``round_trips``: how often a call started with
    none in flight (a wait on the models that nothing else in flight hid)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.round_trips = 0


class Slow:
    """``inner``'s replies, each after ``latency`` seconds, counted in ``flight``."""

    def __init__(self, inner: FakeLM, latency: float, flight: Flight) -> None:
        self.inner, self.model, self.latency, self.flight = inner, inner.model, latency, flight

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.flight.round_trips += self.flight.in_flight == 0
        self.flight.in_flight += 1
        try:
            await asyncio.sleep(self.latency)
            return await self.inner.complete(messages, **params)
        finally:
            self.flight.in_flight -= 1
