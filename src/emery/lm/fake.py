"""A deterministic scripted LM for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import Completion, TokenChoice, TokenTrace, TokenUsage

Responder = Callable[[Sequence[ChatMessage]], str]
Alternatives = Sequence[Mapping[str, float]]
"""Per reply word, the likeliest tokens there and their log-probabilities."""


class FakeLM:
    """Answers from a script: a function of the messages, a mapping, or a list of replies.

    - a callable gets the messages and returns the reply;
    - a mapping is looked up by the last user message (then ``default``);
    - a sequence is replayed in order (then ``default``).

    Tokens are whitespace-separated words. A call with ``logprobs=True`` gets its tokens
    (``Completion.tokens``): each word's id in ``vocabulary`` (``decode`` reads ids back)
    and a log-probability of ``-0.1 * (1 + id % 5)`` per completion word. With
    ``top_logprobs=N`` as well it gets, per reply word, the first ``N`` entries of the
    scripted ``alternatives`` for that word (a sequence, or a function of the messages
    giving one), or the word itself with its log-probability where none are scripted.
    ``calls`` records every request.
    """

    def __init__(
        self,
        script: Responder | Mapping[str, str] | Sequence[str],
        *,
        default: str | None = None,
        model: str = "fake",
        delay_s: float = 0.0,
        alternatives: Alternatives | Callable[[Sequence[ChatMessage]], Alternatives] = (),
    ) -> None:
        self.model = model
        self.alternatives = alternatives
        self.delay_s = delay_s
        self.calls: list[list[ChatMessage]] = []
        self._script = script
        self._default = default
        self._replayed = 0
        self.vocabulary: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``'s words (new words get the next id)."""
        return [self.vocabulary.setdefault(word, len(self.vocabulary)) for word in text.split()]

    def decode(self, ids: Sequence[int]) -> str:
        """The words of ``ids``, joined by spaces."""
        words = {i: word for word, i in self.vocabulary.items()}
        return " ".join(words[i] for i in ids)

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
            tokens=self._tokens(messages, text, int(params.get("top_logprobs") or 0))
            if params.get("logprobs")
            else None,
        )

    def _tokens(self, messages: Sequence[ChatMessage], text: str, top: int) -> TokenTrace:
        prompt = self.encode(" ".join(m["content"] for m in messages))
        completion = self.encode(text)
        logprobs = [-0.1 * (1 + i % 5) for i in completion]
        return TokenTrace(
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            completion_logprobs=logprobs,
            completion_top_logprobs=self._top(messages, text.split(), logprobs, top)
            if top
            else None,
        )

    def _top(
        self, messages: Sequence[ChatMessage], words: list[str], logprobs: list[float], n: int
    ) -> list[list[TokenChoice]]:
        scripted = self.alternatives
        if callable(scripted):
            scripted = scripted(messages)
        return [
            [TokenChoice(token=t, logprob=lp) for t, lp in list(scripted[i].items())[:n]]
            if i < len(scripted)
            else [TokenChoice(token=word, logprob=logprobs[i])]
            for i, word in enumerate(words)
        ]

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
