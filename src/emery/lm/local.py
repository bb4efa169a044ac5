"""A GGUF model run in-process by llama-cpp-python, concurrent requests decoded as one batch.

Requests go to a ``Batcher`` (``llama_batcher``) over a ``LlamaDecoder``
(``llama_decoder``): up to ``n_parallel`` requests advance together, one token each per
llama.cpp call, each in its own KV-cache sequence of ``n_ctx`` tokens; prompts that share a
prefix share its cache. A request decoded in a batch gets the logits it gets alone, so a
greedy reply does not depend on the batch it ran in.

A call waits inside ``waiting_on_model()``: the rollout that made it does not spend its
``timeout_seconds`` while queued behind other requests or decoding on a busy machine.
A call with ``logprobs=True`` gets its token ids and the model's log-probability of each
reply token in ``Completion.tokens`` (and with ``top_logprobs=N`` the ``N`` likeliest
tokens at each reply position); the reply is the same as without.

``close()`` (or leaving ``with LocalLM(...)``) stops the decoder thread and frees the model.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from emery.core.errors import ConfigError, EmeryError
from emery.core.models import ChatMessage
from emery.core.work_clock import waiting_on_model
from emery.lm.base import Completion
from emery.lm.llama_batcher import Batcher, Decoder


class LocalLM:
    """Chat completions from a local GGUF file via llama.cpp, loaded on first use."""

    def __init__(
        self,
        path: str | Path,
        *,
        model: str | None = None,
        n_ctx: int = 4096,
        n_parallel: int = 4,
        n_threads: int | None = None,
        prefix_reuse: bool = True,
        seed: int = 0,
        lora_path: str | Path | None = None,
    ) -> None:
        self.path = Path(path)
        self.lora_path = Path(lora_path) if lora_path is not None else None
        if not self.path.is_file():
            raise ConfigError(f"model file not found: {self.path}")
        self.model = model or f"local/{self.path.name}"
        self.n_ctx = n_ctx
        self.n_parallel = n_parallel
        self.n_threads = n_threads or os.cpu_count() or 1
        self.prefix_reuse = prefix_reuse
        self.seed = seed
        self.batcher = Batcher(self._decoder, model=self.model, prefix_reuse=prefix_reuse)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        tokens = bool(params.pop("logprobs", False))
        top = int(params.pop("top_logprobs", None) or 0) if tokens else 0
        request_params: dict[str, Any] = {
            "temperature": temperature or 0.0,
            "max_tokens": max_tokens,
            "stop": list(stop) if stop else None,
            **params,
        }
        request_params = {k: v for k, v in request_params.items() if v is not None}
        with waiting_on_model():
            future = self.batcher.submit(messages, request_params, tokens=tokens, top=top)
            return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the decoder thread (requests in flight fail) and free the model; a later
        call loads it again."""
        self.batcher.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _decoder(self) -> Decoder:
        try:
            import llama_cpp  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise EmeryError(
                "llama-cpp-python is not installed: run `pip install 'emery[local]'`"
            ) from exc
        from emery.lm.llama_decoder import LlamaDecoder

        return LlamaDecoder(
            self.path,
            slots=self.n_parallel,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            seed=self.seed,
            lora_path=self.lora_path,
        )
