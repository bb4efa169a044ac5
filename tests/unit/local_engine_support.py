"""A fake ``Decoder`` for the batch engine: tokens are characters, replies come from the cache.

The reply a slot produces is computed from the tokens in that slot's cache (the prompt
and what it generated so far), so a cache that was copied or cut wrongly gives a wrong
reply. ``re: <last user message>`` is the reply, or ``n`` x's for a user message ``#n``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.llama_prompt import Prompt, Sampling

EOG = 0
END = "<a>"


def render(messages: Sequence[ChatMessage]) -> str:
    return "".join(f"<{m['role']}>{m['content']}" for m in messages) + END


def reply_for(prompt: str) -> str:
    user = prompt[prompt.rfind("<user>") + len("<user>") : -len(END)]
    return "x" * int(user[1:]) if user.startswith("#") else f"re: {user}"


class FakeDecoder:
    """Records prompt tokens read, step sizes and calls; ``delay`` slows each call."""

    bos = -1

    def __init__(self, slots: int = 2, *, delay: float = 0.0, room: int = 10_000) -> None:
        self.slots = slots
        self.delay = delay
        self.room = room
        self.kv: dict[int, list[int]] = {i: [] for i in range(slots)}
        self.prefilled = 0
        self.step_sizes: list[int] = []
        self.served: list[str] = []  # last user message of each prompt, in prefill order
        self.prepared: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.release.set()
        self.fail_prepare_on: str | None = None
        self.active_samplers: set[int] = set()
        self.closed = False

    def prepare(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Prompt:
        self.prepared.append(dict(params))
        if messages[-1]["content"] == self.fail_prepare_on:
            raise ValueError("prompt too long")
        tokens = [ord(c) for c in render(messages)]
        return Prompt(
            tokens=tokens,
            sampling=Sampling(temperature=params.get("temperature", 0.0)),
            max_tokens=params.get("max_tokens") or 1000,
            room=self.room,
            stop=[s.encode() for s in params.get("stop") or []],
        )

    def piece(self, token: int) -> bytes:
        return chr(token).encode()

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def begin(self, slot: int, sampling: Sampling) -> None:
        self.active_samplers.add(slot)

    def end(self, slot: int) -> None:
        self.active_samplers.discard(slot)

    def keep(self, slot: int, source: int, n: int) -> None:
        assert n <= len(self.kv[source])
        self.kv[slot] = list(self.kv[source][:n])

    def prefill(self, slot: int, tokens: Sequence[int], pos: int) -> int:
        self.release.wait(timeout=10)
        assert pos == len(self.kv[slot]), "prompt read at the wrong position"
        self.kv[slot] += tokens
        self.prefilled += len(tokens)
        text = "".join(map(chr, self.kv[slot]))
        self.served.append(text[text.rfind("<user>") + len("<user>") : -len(END)])
        return self._next(slot)

    def step(self, entries: Sequence[tuple[int, int, int]]) -> list[int]:
        time.sleep(self.delay)
        self.step_sizes.append(len(entries))
        for slot, token, pos in entries:
            assert pos == len(self.kv[slot]), "token decoded at the wrong position"
            self.kv[slot].append(token)
        return [self._next(slot) for slot, _, _ in entries]

    def logprob(self, slot: int, token: int) -> float:
        """A log-probability that says where it was asked: minus the slot's cache length
        (what the cache held when the token was sampled) in thousandths."""
        return -len(self.kv[slot]) / 1000

    def top(self, slot: int, n: int) -> list[tuple[int, float]]:
        """The likeliest tokens, saying where they were asked: a letter for the slot's cache
        length (``a`` + length mod 26), then ``?``."""
        where = ord("a") + len(self.kv[slot]) % 26
        return [(where, -0.25), (ord("?"), -2.0)][:n]

    def close(self) -> None:
        self.closed = True

    def _next(self, slot: int) -> int:
        text = "".join(map(chr, self.kv[slot]))
        end = text.rfind(END) + len(END)
        reply, done = reply_for(text[:end]), len(text) - end
        return ord(reply[done]) if done < len(reply) else EOG
