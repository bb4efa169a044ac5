"""A GGUF model run in-process by llama-cpp-python.

One llama.cpp context is not safe to call from two threads, so every call goes through a
single worker thread. The worker serves the pending request whose messages share the
longest prefix with the prompt it just ran: llama.cpp then keeps the shared part of its
KV cache and reads only the new tokens, so scoring many examples under one long
instruction reads the instruction once.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emery.core.errors import ConfigError, EmeryError
from emery.core.models import ChatMessage
from emery.lm.base import Completion, LMError, TokenUsage


@dataclass
class _Request:
    order: int
    key: str
    messages: list[ChatMessage]
    params: dict[str, Any]
    future: Future[Completion] = field(default_factory=Future)


def prompt_key(messages: Sequence[ChatMessage]) -> str:
    """A string whose prefixes follow the prefixes of the rendered prompt."""
    return "".join(f"\x1e{m['role']}\x1f{m['content']}" for m in messages)


def shared_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings."""
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071 - character prefix is meant


class LocalLM:
    """Chat completions from a local GGUF file via llama.cpp, loaded on first use."""

    def __init__(
        self,
        path: str | Path,
        *,
        model: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        prefix_reuse: bool = True,
        seed: int = 0,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(f"model file not found: {self.path}")
        self.model = model or f"local/{self.path.name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.prefix_reuse = prefix_reuse
        self.seed = seed
        self._llama: Any = None
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._order = itertools.count()
        self._worker: threading.Thread | None = None
        self._last_key = ""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        request_params: dict[str, Any] = {
            "temperature": temperature or 0.0,
            "max_tokens": max_tokens,
            "stop": list(stop) if stop else None,
            **params,
        }
        request = _Request(
            order=next(self._order),
            key=prompt_key(messages),
            messages=list(messages),
            params=request_params,
        )
        with self._cond:
            self._pending.append(request)
            self._ensure_worker()
            self._cond.notify()
        return await asyncio.wrap_future(request.future)

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._serve, name="emery-llama", daemon=True)
            self._worker.start()

    def _next_request(self) -> _Request:
        with self._cond:
            while not self._pending:
                self._cond.wait()
            if self.prefix_reuse:
                best = max(
                    self._pending, key=lambda r: (shared_prefix(r.key, self._last_key), -r.order)
                )
            else:
                best = min(self._pending, key=lambda r: r.order)
            self._pending.remove(best)
            return best

    def _serve(self) -> None:
        while True:
            request = self._next_request()
            if not request.future.set_running_or_notify_cancel():
                continue
            try:
                request.future.set_result(self._run(request))
            except Exception as exc:
                request.future.set_exception(LMError(f"{self.model}: {exc}"))
            self._last_key = request.key

    def _load(self) -> Any:
        if self._llama is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise EmeryError(
                    "llama-cpp-python is not installed: run `pip install 'emery[local]'`"
                ) from exc
            self._llama = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                verbose=False,
            )
        return self._llama

    def _run(self, request: _Request) -> Completion:
        llama = self._load()
        if not self.prefix_reuse:
            llama.reset()
        params = {k: v for k, v in request.params.items() if v is not None}
        start = time.perf_counter()
        response = llama.create_chat_completion(messages=request.messages, **params)
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            usage=TokenUsage(
                prompt_tokens=usage.get("prompt_tokens", 0),
                completion_tokens=usage.get("completion_tokens", 0),
            ),
            latency_s=time.perf_counter() - start,
            model=self.model,
        )
