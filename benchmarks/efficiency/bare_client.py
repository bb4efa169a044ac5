"""A diagnostic model client for the mock endpoint, without the ``openai`` SDK: one aiohttp
session per event loop posting the request's JSON and reading the reply's text and usage.

emery calls every OpenAI-compatible endpoint through the SDK (``lm/openai_compat.py``); this
client exists only so ``run.py --client bare`` can show how much of a run's wall time the
SDK's own work per call takes (README: "What bounds k = 4's wall time"). It has no retries,
no auth beyond a placeholder key and no error mapping: never use it for a real endpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from emery.core.models import ChatMessage
from emery.lm.base import Completion, TokenUsage, sampling_params
from emery.lm.loop_local import LoopLocal


class BareLM:
    """Chat completions from ``base_url`` through a bare aiohttp session (module doc)."""

    def __init__(self, model: str, base_url: str) -> None:
        self._model = model
        self.url = f"{base_url}/chat/completions"
        self._sessions = LoopLocal(
            lambda: aiohttp.ClientSession(
                headers={"Content-Type": "application/json", "Authorization": "Bearer mock"}
            ),
            close=lambda session: session.close(),
        )

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        body = {
            "model": self._model,
            "messages": list(messages),
            **sampling_params(temperature, max_tokens, stop, params),
        }
        session = await self._sessions.get()
        started = time.perf_counter()
        async with session.post(self.url, data=json.dumps(body)) as reply:
            reply.raise_for_status()
            data = json.loads(await reply.read())
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return Completion(
            text=choice["message"]["content"] or "",
            finish_reason=choice.get("finish_reason") or "stop",
            usage=TokenUsage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
            ),
            latency_s=time.perf_counter() - started,
            model=data.get("model") or self._model,
        )
