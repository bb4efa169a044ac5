"""The LM protocol every model implementation satisfies, and what a call returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from emery.core.aio import run_sync
from emery.core.example_result import TokenUsage as TokenUsage
from emery.core.models import ChatMessage


class TokenChoice(BaseModel):
    """One of the likeliest tokens at a position of a reply: its text and the model's
    log-probability of it there."""

    token: str
    logprob: float


class TokenTrace(BaseModel):
    """A call's tokens, for training on it or reading its probabilities: returned when the
    call asks ``logprobs=True`` of a model that can say (the local model; OpenAI-compatible
    servers that return them).

    ``completion_token_ids`` are the tokens as sampled (a stop string's tokens included,
    the end-of-generation token not); an empty list means the model did not say.
    ``completion_logprobs`` are the model's log-probabilities of those tokens (log-softmax
    of its logits, before the sampler's temperature and penalties), one per token.
    ``completion_top_logprobs`` answers a call that also asks ``top_logprobs=N``: for each
    reply token, the ``N`` likeliest tokens at its position, likeliest first (None when
    not asked or the model did not say).
    """

    prompt_token_ids: list[int] = Field(default_factory=list)
    completion_token_ids: list[int] = Field(default_factory=list)
    completion_logprobs: list[float] | None = None
    completion_top_logprobs: list[list[TokenChoice]] | None = None


class Completion(BaseModel):
    """The result of one chat completion."""

    text: str
    finish_reason: str = "stop"
    usage: TokenUsage = TokenUsage()
    latency_s: float = 0.0
    model: str = ""
    cached: bool = False
    tokens: TokenTrace | None = None
    """Token ids and log-probabilities, when the call asked for them (``logprobs=True``)."""
    cost_usd: float | None = None
    """What the provider's price list says the call cost, where the client knows it (a
    LiteLLM model); None otherwise."""
    rate_limited: int = 0
    """How many rate-limit answers (429 and the like) the call waited out before this one."""
    rate_limit_wait_s: float = 0.0
    """Seconds the call waited on the model's rate limit after those answers."""


class LMError(Exception):
    """A model call failed after all retries."""


@runtime_checkable
class LM(Protocol):
    """A chat model. ``complete`` is async; ``complete_sync`` runs it from plain code."""

    @property
    def model(self) -> str:
        """The model's name, as used in cache keys and usage records."""
        ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion: ...


def complete_sync(
    lm: LM,
    messages: Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop: Sequence[str] | None = None,
    **params: Any,
) -> Completion:
    """Call ``lm.complete`` from synchronous code (notebook-safe)."""
    return run_sync(
        lm.complete(messages, temperature=temperature, max_tokens=max_tokens, stop=stop, **params)
    )


SAMPLING_KEYS = frozenset({"temperature", "max_tokens", "stop"})


def sampling_params(
    temperature: float | None,
    max_tokens: int | None,
    stop: Sequence[str] | None,
    params: dict[str, Any],
) -> dict[str, Any]:
    """The canonical dict of sampling parameters, used in cache keys and request bodies.

    A temperature of None means greedy decoding (0.0).
    """
    out: dict[str, Any] = {"temperature": temperature or 0.0, **params}
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    if stop:
        out["stop"] = list(stop)
    return out


def sampling_params_of(params: dict[str, Any]) -> dict[str, Any]:
    """``sampling_params`` of the keyword arguments one ``complete`` call was given."""
    extra = {key: value for key, value in params.items() if key not in SAMPLING_KEYS}
    return sampling_params(
        params.get("temperature"), params.get("max_tokens"), params.get("stop"), extra
    )
