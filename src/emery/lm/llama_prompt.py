"""A chat request as llama.cpp prompt tokens, sampling settings and stop rules.

The prompt is built by llama-cpp-python's own chat handler (the GGUF's template, as
``Llama.create_chat_completion`` uses it): the handler is run against a stand-in whose
``create_completion`` records what it was given instead of generating, so the tokens,
stop strings and defaults are exactly those of a plain ``create_chat_completion`` call.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from emery.core.models import ChatMessage

LLAMA_DEFAULT_SEED = 0xFFFFFFFF

# create_completion arguments that need the single-sequence generator: refused here.
_UNSUPPORTED = ("logprobs", "grammar", "logits_processor", "logit_bias", "suffix", "echo")


@dataclass(frozen=True)
class Sampling:
    """How one sequence picks its next token (``Llama._init_sampler``'s chain)."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int = LLAMA_DEFAULT_SEED


@dataclass(frozen=True)
class Prompt:
    """What one request decodes: prompt tokens, sampling and when to stop."""

    tokens: list[int]
    sampling: Sampling
    max_tokens: int
    room: int
    stop: list[bytes]
    stop_on: Callable[[Any, Any], bool] | None = None


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.kwargs = kwargs


class _Recorder:
    """A ``Llama`` whose ``create_completion`` records its arguments and stops."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, **kwargs: Any) -> Any:
        raise _Captured(kwargs)


def capture(llama: Any, messages: Sequence[ChatMessage], params: dict[str, Any]) -> dict[str, Any]:
    """The ``create_completion`` arguments ``llama.create_chat_completion`` would use."""
    create = type(llama).create_chat_completion
    try:
        create(_Recorder(llama), messages=list(messages), **params)
    except _Captured as captured:
        return captured.kwargs
    raise RuntimeError("the chat handler did not call create_completion")


def request_seed(seed: int | None, model_seed: int) -> int:
    """The sampler seed ``Llama._create_completion`` uses for a call."""
    if seed is not None:
        return seed
    return random.Random(model_seed or LLAMA_DEFAULT_SEED).randint(0, 2**32)


def completion_limit(max_tokens: int | None, n_prompt: int, n_ctx: int) -> int:
    """Tokens a completion may have: ``max_tokens``, cut to what the context leaves."""
    if n_prompt >= n_ctx:
        raise ValueError(f"Requested tokens ({n_prompt}) exceed context window of {n_ctx}")
    if max_tokens is None or max_tokens <= 0:
        max_tokens = n_ctx - n_prompt
    return max_tokens if max_tokens + n_prompt < n_ctx else n_ctx - n_prompt


def build_prompt(
    llama: Any, messages: Sequence[ChatMessage], params: dict[str, Any], n_ctx: int, seed: int
) -> Prompt:
    """``messages`` and ``params`` as a ``Prompt`` for a context of ``n_ctx`` per sequence."""
    kw = capture(llama, messages, params)
    refused = [name for name in _UNSUPPORTED if kw.get(name) not in (None, False, "")]
    if kw.get("stream"):
        refused.append("stream")
    if kw.get("mirostat_mode"):
        refused.append("mirostat_mode")
    if refused:
        raise ValueError(f"not supported by the batched local engine: {', '.join(refused)}")
    tokens = list(kw["prompt"])
    stop = kw.get("stop") or []
    stop = [stop] if isinstance(stop, str) else list(stop)
    criteria = kw.get("stopping_criteria")
    sampling = Sampling(
        temperature=kw["temperature"],
        top_k=kw["top_k"],
        top_p=kw["top_p"],
        min_p=kw["min_p"],
        typical_p=kw["typical_p"],
        repeat_penalty=kw["repeat_penalty"],
        frequency_penalty=kw["frequency_penalty"],
        presence_penalty=kw["presence_penalty"],
        seed=request_seed(kw.get("seed"), seed),
    )
    return Prompt(
        tokens=tokens,
        sampling=sampling,
        max_tokens=completion_limit(kw.get("max_tokens"), len(tokens), n_ctx),
        room=n_ctx - len(tokens),
        stop=[s.encode("utf-8") for s in stop],
        stop_on=criteria,
    )
