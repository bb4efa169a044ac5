"""The ``lm`` a function agent receives: traced, and callable from sync and async code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import LM
from emery.lm.wrapper import LMWrapper


def as_messages(prompt: str | Sequence[ChatMessage], system: str | None) -> list[ChatMessage]:
    """A prompt string (one user message) or a message list, with an optional system message."""
    messages: list[ChatMessage] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return messages


class AgentLM(LMWrapper):
    """Wraps the rollout's traced LM for agent code.

    ``await lm.complete(messages)`` (the LM protocol) and ``await lm.acall(prompt)`` in async
    agents; ``lm(prompt)`` in sync agents, which run in threads of their own: the call is handed
    to the rollout's event loop and the thread waits for the reply text.
    """

    def __init__(self, lm: LM, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(lm)
        self._loop = loop
        self._loop_thread = threading.get_ident()

    async def acall(
        self, prompt: str | Sequence[ChatMessage], *, system: str | None = None, **params: Any
    ) -> str:
        """The reply text to ``prompt`` (async agents)."""
        completion = await self.inner.complete(as_messages(prompt, system), **params)
        return completion.text

    def __call__(
        self, prompt: str | Sequence[ChatMessage], *, system: str | None = None, **params: Any
    ) -> str:
        """The reply text to ``prompt`` (sync agents)."""
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("inside an async agent use `await lm.acall(...)`, not `lm(...)`")
        future = asyncio.run_coroutine_threadsafe(
            self.acall(prompt, system=system, **params), self._loop
        )
        return future.result()
