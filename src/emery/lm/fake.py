"""A deterministic scripted LM for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import Completion, TokenUsage

Responder = Callable[[Sequence[ChatMessage]], str]


class FakeLM:
    """Answers from a script: a function of the messages, a mapping, or a list of replies.

    - a callable gets the messages and returns the reply;
    - a mapping is looked up by the last user message (then ``default``);
    - a sequence is replayed in order (then ``default``).

    Tokens are counted as whitespace-separated words. ``calls`` records every request.
    """

    def __init__(
        self,
        script: Responder | Mapping[str, str] | Sequence[str],
        *,
        default: str | None = None,
        model: str = "fake",
        delay_s: float = 0.0,
    ) -> None:
        self.model = model
        self.delay_s = delay_s
        self.calls: list[list[ChatMessage]] = []
        self._script = script
        self._default = default
        self._replayed = 0

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        self.calls.append(list(messages))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        text = self._reply(messages)
        for marker in stop or ():
            text = text.split(marker, 1)[0]
        words = text.split()
        finish = "stop"
        if max_tokens is not None and len(words) > max_tokens:
            text, finish = " ".join(words[:max_tokens]), "length"
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        return Completion(
            text=text,
            finish_reason=finish,
            usage=TokenUsage(prompt_tokens=prompt_tokens, completion_tokens=len(text.split())),
            model=self.model,
        )

    def _reply(self, messages: Sequence[ChatMessage]) -> str:
        script = self._script
        if callable(script):
            return script(messages)
        if isinstance(script, Mapping):
            last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
            if last_user in script:
                return script[last_user]
        elif self._replayed < len(script):
            self._replayed += 1
            return script[self._replayed - 1]
        if self._default is None:
            raise LookupError(f"FakeLM has no scripted reply for: {messages[-1]['content']!r}")
        return self._default
