"""Any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

import openai

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm.base import Completion, LMError, TokenUsage, sampling_params
from emery.lm.loop_local import LoopLocal
from emery.lm.retry import RetryPolicy, retrying

TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections are worth retrying; other errors are not."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


class OpenAICompatibleLM:
    """Chat completions through the official ``openai`` client against any ``base_url``.

    The API key comes from ``api_key``, else the environment variable ``api_key_env``
    (default ``OPENAI_API_KEY``); a local server that needs none gets a placeholder.
    At most ``concurrency`` requests are in flight at once.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        key = api_key or os.environ.get(api_key_env)
        if key is None:
            if base_url is None:
                raise ConfigError(
                    f"no API key for model {model!r}: set {api_key_env} or lm.api_key"
                )
            key = "not-needed"
        self.model = model
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.extra_body = extra_body or {}
        self._clients = LoopLocal(
            lambda: openai.AsyncOpenAI(
                api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0
            ),
            close=lambda client: client.close(),
        )
        self._slots = LoopLocal(lambda: asyncio.Semaphore(concurrency))

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        body = sampling_params(temperature, max_tokens, stop, params)
        client = await self._clients.get()
        slots = await self._slots.get()

        async def call() -> Any:
            async with slots:
                return await client.chat.completions.create(
                    model=self.model,
                    messages=list(messages),  # type: ignore[arg-type]
                    extra_body=self.extra_body or None,
                    **body,
                )

        start = time.perf_counter()
        try:
            response = await retrying(call, policy=self.retry, is_transient=is_transient)
        except openai.OpenAIError as exc:
            raise LMError(f"{self.model}: {exc}") from exc
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "stop",
            usage=TokenUsage(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
            ),
            latency_s=time.perf_counter() - start,
            model=response.model or self.model,
        )
