"""Any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx2
import openai

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm.base import (
    Completion,
    LMError,
    TokenChoice,
    TokenTrace,
    TokenUsage,
    sampling_params,
)
from emery.lm.loop_local import LoopLocal
from emery.lm.provider_errors import MalformedReply, check_settings
from emery.lm.retry import RetryPolicy, send_call
from emery.lm.throttle import Throttle, estimate_tokens, throttle_for

_tls_lock = threading.Lock()
_tls: list[ssl.SSLContext] = []


def tls_context() -> ssl.SSLContext:
    """The default TLS context (system CA store), built once per process: loading the CA
    certificates takes tens of milliseconds, and a client is made per event loop."""
    with _tls_lock:
        if not _tls:
            _tls.append(httpx2.create_ssl_context())
        return _tls[0]


def http_client(concurrency: int, timeout_s: float) -> httpx2.AsyncClient:
    """The HTTP client under the ``openai`` client: the SDK's aiohttp transport (a C HTTP
    parser and an O(1) connection pool; far less CPU per call at high concurrency than the
    default pool, which scans every connection on each request), with a pool as large as
    the concurrency limit."""
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return openai.DefaultAioHttpClient(limits=limits, timeout=timeout_s, verify=tls_context())


TOKEN_ID_PREFIX = "token_id:"  # vLLM's ``return_tokens_as_token_ids`` spelling of a token


def reply_tokens(reply: dict[str, Any], choice: dict[str, Any]) -> TokenTrace | None:
    """The tokens a reply carries: ``choices[0].logprobs.content[*].logprob`` (a request
    with ``logprobs: true``) and its ``top_logprobs`` (a request with ``top_logprobs: N``),
    and the token ids where the server gives them (vLLM's ``prompt_token_ids`` and
    ``choices[0].token_ids``, or tokens spelt ``token_id:N``). None when it carries
    neither."""
    content = (choice.get("logprobs") or {}).get("content")
    completion_ids = choice.get("token_ids")
    if content is None and completion_ids is None:
        return None
    logprobs = [float(item["logprob"]) for item in content] if content is not None else None
    if completion_ids is None and content is not None:
        spelt = [str(item.get("token", "")) for item in content]
        if spelt and all(token.startswith(TOKEN_ID_PREFIX) for token in spelt):
            completion_ids = [int(token.removeprefix(TOKEN_ID_PREFIX)) for token in spelt]
    return TokenTrace(
        prompt_token_ids=list(reply.get("prompt_token_ids") or []),
        completion_token_ids=list(completion_ids or []),
        completion_logprobs=logprobs,
        completion_top_logprobs=top_choices(content or []),
    )


def top_choices(content: list[dict[str, Any]]) -> list[list[TokenChoice]] | None:
    """``content[*].top_logprobs`` as choices per reply token; None when no token has any
    (the request did not ask for them)."""
    tops = [item.get("top_logprobs") or [] for item in content]
    if not any(tops):
        return None
    return [
        [TokenChoice(token=str(c["token"]), logprob=float(c["logprob"])) for c in top]
        for top in tops
    ]


class OpenAICompatibleLM:
    """Chat completions through the official ``openai`` client against any ``base_url``.

    The API key comes from ``api_key``, else the environment variable ``api_key_env``
    (default ``OPENAI_API_KEY``); a local server that needs none gets a placeholder.
    ``client``: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client whose endpoint, key,
    organization, project and headers are used instead (a client of this model's own is
    made from them per event loop). Calls go through the model's ``Throttle`` (shared in
    this process by every user of the same endpoint, model and key: at most
    ``concurrency`` in flight, adapted to the provider's rate-limit answers, paced to
    ``requests_per_minute`` / ``tokens_per_minute`` when given) and are sent again as
    ``retry`` says (``emery.lm.retry``). Requests go through the client's ``post`` (its
    auth, headers, timeouts and error types) with a plain JSON body, and only the fields a
    ``Completion`` needs are read from the reply: building the SDK's typed request and
    response models costs more CPU than the rest of a call. A call with ``logprobs=True``
    (and ``top_logprobs=N``) sends them on and reads the reply's log-probabilities, the
    likeliest tokens per position, and token ids where the server returns them, into
    ``Completion.tokens``.
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
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        client: openai.AsyncOpenAI | openai.OpenAI | None = None,
    ) -> None:
        headers: dict[str, str] = {}
        organization = project = None
        if client is not None:
            base_url, key = str(client.base_url), client.api_key
            organization, project = client.organization, client.project
            # what the caller set on the client (the SDK keeps it there), not its defaults
            headers = {
                k: str(v) for k, v in (getattr(client, "_custom_headers", None) or {}).items()
            }
        else:
            key = api_key or os.environ.get(api_key_env) or ""
        if not key:
            if base_url is None:
                raise ConfigError(
                    f"no API key for model {model!r}: set {api_key_env} or lm.api_key"
                )
            key = "not-needed"
        self.model = model
        self.name = f"openai/{model}"
        self.json_mode = True
        """Whether a stage that parses a JSON object sends ``response_format`` (JSON mode);
        false from the first time the endpoint rejects it (``emery.lm.json_mode``)."""
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self.extra_body = extra_body or {}
        self._rng = random.Random()
        self.throttle: Throttle = throttle_for(
            ("openai", base_url or "", model, hashlib.sha256(key.encode()).hexdigest()[:16]),
            self.name,
            concurrency=concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )
        self._clients = LoopLocal(
            lambda: openai.AsyncOpenAI(
                api_key=key,
                base_url=base_url,
                organization=organization,
                project=project,
                default_headers=headers or None,
                timeout=timeout_s,
                max_retries=0,
                http_client=http_client(concurrency, timeout_s),
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
        if not self.json_mode:  # the endpoint rejected it once: not sent again
            params.pop("response_format", None)
        body = {
            "model": self.model,
            "messages": list(messages),
            **sampling_params(temperature, max_tokens, stop, params),
            **self.extra_body,
        }
        tokens = estimate_tokens(messages, max_tokens)
        try:
            return await self._send(body, tokens)
        except LMError as exc:
            if "response_format" not in body or not _rejects_json_mode(exc):
                raise
            # a server or model without JSON mode: the parser reads the reply's JSON anyway
            self.json_mode = False
            body.pop("response_format")
            return await self._send(body, tokens)

    async def _send(self, body: dict[str, Any], tokens: int) -> Completion:
        client = await self._clients.get()
        slots = await self._slots.get()

        async def send() -> Completion:
            async with slots:
                start = time.perf_counter()
                raw = await client.post("/chat/completions", body=body, cast_to=bytes)
                return self._completion(raw, time.perf_counter() - start)

        return await send_call(
            send,
            name=self.name,
            throttle=self.throttle,
            policy=self.retry,
            tokens=tokens,
            rng=self._rng,
        )

    async def check(self) -> None:
        """One call of a single token, before a job's first evaluation: a refused key,
        model or quota, or an endpoint that cannot be reached, raises ``ProviderRefused``;
        any other answer (a rate limit or an error of the provider's included) passes."""
        client = await self._clients.get()
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Reply with OK."}],
            "max_tokens": 1,
            "temperature": 0.0,
        }
        await check_settings(
            lambda: client.post("/chat/completions", body=body, cast_to=bytes),
            name=self.name,
            where=self.base_url or "OpenAI's endpoint",
        )

    def _completion(self, raw: bytes, latency_s: float) -> Completion:
        try:
            reply = json.loads(raw)
            choice = reply["choices"][0]
            usage = reply.get("usage") or {}
            return Completion(
                text=(choice.get("message") or {}).get("content") or "",
                finish_reason=choice.get("finish_reason") or "stop",
                usage=TokenUsage(
                    prompt_tokens=usage.get("prompt_tokens") or 0,
                    completion_tokens=usage.get("completion_tokens") or 0,
                ),
                latency_s=latency_s,
                model=reply.get("model") or self.model,
                tokens=reply_tokens(reply, choice),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                f"{self.model}: not a chat completion: {raw[:200]!r} ({type(exc).__name__})"
            ) from exc


def _rejects_json_mode(error: LMError) -> bool:
    """Whether ``error`` is the endpoint's 400 (or 422) rejecting ``response_format``."""
    cause = error.__cause__
    if not isinstance(cause, openai.APIStatusError) or cause.status_code not in (400, 422):
        return False
    said = str(cause).lower()
    return "response_format" in said or "json" in said
