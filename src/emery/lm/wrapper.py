"""The base of every LM that wraps another LM (cache, usage meter, tracing, tallies)."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion


class LMWrapper:
    """An LM around ``inner``: same model name, and ``complete`` goes through ``_call``.

    A subclass overrides ``_call(messages, params)``, where ``params`` are the keyword
    arguments ``complete`` was given (``temperature``, ``max_tokens``, ``stop`` and any
    others, only those given, in a fresh dict the hook may change) and forwards them with
    ``self.inner.complete(messages, **params)``. The default forwards unchanged.

    Only ``model`` is forwarded: an attribute passed through ``__getattr__`` would make
    every misspelt attribute of a wrapper ``Any`` to mypy.
    """

    def __init__(self, inner: LM) -> None:
        self.inner = inner

    @property
    def model(self) -> str:
        return self.inner.model

    def complete(
        self, messages: Sequence[ChatMessage], **params: Any
    ) -> Coroutine[Any, Any, Completion]:
        # ``_call``'s coroutine itself, not awaited here: a stack of wrappers then costs
        # one coroutine per layer, as hand-written forwarding did (the rollout hot path).
        return self._call(messages, params)

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        return await self.inner.complete(messages, **params)


def unwrapped(lm: LM) -> LM:
    """The model under every wrapper (cache, meter, tracing, budget) of ``lm``."""
    while isinstance(lm, LMWrapper):
        lm = lm.inner
    return lm
