"""Any model LiteLLM can call (``anthropic/...``, ``gemini/...``, ``ollama/...``,
``groq/...``, ``bedrock/...``), with the ``litellm`` extra installed."""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm.base import Completion, TokenUsage, sampling_params
from emery.lm.provider_errors import MalformedReply, check_settings
from emery.lm.retry import RetryPolicy, send_call
from emery.lm.throttle import Throttle, estimate_tokens, throttle_for


def load_litellm() -> ModuleType:
    """The ``litellm`` module (slow to import, so imported on first use), or a ConfigError
    naming the extra that installs it. Its price list is the one shipped with the pinned
    package (``LITELLM_LOCAL_MODEL_COST_MAP``, unless set): importing it otherwise fetches
    the list from GitHub, which an offline machine waits on. Its debug lines (printed on
    each error) are turned off."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise ConfigError(
            "LiteLLM models need the litellm extra: pip install 'emery[litellm]'"
        ) from None
    litellm.suppress_debug_info = True
    return litellm


def litellm_has_price(model: str) -> bool:
    """Whether LiteLLM's price list prices ``model``; False without the extra."""
    try:
        litellm = load_litellm()
    except ConfigError:
        return False
    try:
        prompt, generated = litellm.cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
    except Exception:  # LiteLLM raises an error of its own for an unmapped model
        return False
    return bool(prompt or generated)


class LiteLLMModel:
    """Chat completions through ``litellm.acompletion``, for a LiteLLM model string such as
    ``anthropic/claude-3-5-haiku-latest``.

    The key is ``api_key``, else the variable LiteLLM reads for the provider
    (``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ...); ``base_url`` is sent as LiteLLM's
    ``api_base``. Calls go through the model's ``Throttle`` (shared in this process by every
    user of the same endpoint, model and key) and are sent again as ``retry`` says
    (``emery.lm.retry``), exactly as ``OpenAICompatibleLM``'s: LiteLLM's errors subclass the
    ``openai`` client's, which ``provider_errors.classify`` reads, and LiteLLM's own retries
    are off. Keyword arguments of ``complete`` (``response_format``, ``mock_response``, ...)
    go to ``litellm.acompletion`` unchanged. ``Completion.cost_usd`` is LiteLLM's price of
    the call, None where it has none for the model.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> None:
        self._litellm = load_litellm()
        self.model = model
        self.name = f"litellm/{model}"
        self.api_key = api_key
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._rng = random.Random()
        self._json_mode: bool | None = None
        digest = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
        self.throttle: Throttle = throttle_for(
            ("litellm", base_url or "", model, digest),
            self.name,
            concurrency=concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )

    @property
    def json_mode(self) -> bool:
        """Whether LiteLLM says the model takes ``response_format`` (``emery.lm.json_mode``):
        it turns JSON mode into what each provider needs (a tool call for Anthropic)."""
        if self._json_mode is None:
            try:
                supported = self._litellm.get_supported_openai_params(model=self.model)
            except Exception:  # an unmapped model: LiteLLM raises an error of its own
                supported = None
            self._json_mode = "response_format" in (supported or ())
        return self._json_mode

    async def _call(self, messages: Sequence[ChatMessage], body: dict[str, Any]) -> Any:
        return await self._litellm.acompletion(
            model=self.model,
            messages=list(messages),
            api_key=self.api_key,
            api_base=self.base_url,
            timeout=self.timeout_s,
            num_retries=0,
            **body,
        )

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

        async def send() -> Completion:
            start = time.perf_counter()
            response = await self._call(messages, body)
            return self._completion(response, time.perf_counter() - start)

        return await send_call(
            send,
            name=self.name,
            throttle=self.throttle,
            policy=self.retry,
            tokens=estimate_tokens(messages, max_tokens),
            rng=self._rng,
        )

    async def check(self) -> None:
        """One call of a single token, before a job's first evaluation: a refused key,
        model or quota, or an endpoint that cannot be reached, raises ``ProviderRefused``;
        any other answer (a rate limit or an error of the provider's included) passes."""
        messages: list[ChatMessage] = [{"role": "user", "content": "Reply with OK."}]
        await check_settings(
            lambda: self._call(messages, {"max_tokens": 1, "temperature": 0.0}),
            name=self.name,
            where=self.base_url or "the provider's endpoint",
        )

    def cost_usd(self, completion: Completion) -> float | None:
        """What LiteLLM's price list says ``completion`` cost, in US dollars; None when it
        has no price for this model."""
        try:
            prompt, generated = self._litellm.cost_per_token(
                model=self.model,
                prompt_tokens=completion.usage.prompt_tokens,
                completion_tokens=completion.usage.completion_tokens,
            )
        except Exception:  # LiteLLM raises an error of its own for an unmapped model
            return None
        return float(prompt) + float(generated)

    def _completion(self, response: Any, latency_s: float) -> Completion:
        try:
            choice = response.choices[0]
            usage = getattr(response, "usage", None)
            completion = Completion(
                text=choice.message.content or "",
                finish_reason=choice.finish_reason or "stop",
                usage=TokenUsage(
                    prompt_tokens=getattr(usage, "prompt_tokens", None) or 0,
                    completion_tokens=getattr(usage, "completion_tokens", None) or 0,
                ),
                latency_s=latency_s,
                model=getattr(response, "model", None) or self.model,
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                f"{self.model}: not a chat completion: {str(response)[:200]!r}"
                f" ({type(exc).__name__})"
            ) from exc
        completion.cost_usd = self.cost_usd(completion)
        return completion
