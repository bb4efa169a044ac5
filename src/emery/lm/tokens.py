"""``[lm.<role>] record_tokens``: every call asks its model for its tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import Completion
from emery.lm.wrapper import LMWrapper


class TokenRecordingLM(LMWrapper):
    """Calls ``inner`` with ``logprobs=True`` (unless the call says otherwise), so each
    completion carries its token ids and log-probabilities (``Completion.tokens``) where
    the model can give them; traced calls record them on their span. The reply text is
    the same: only what is recorded about it grows."""

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        params.setdefault("logprobs", True)
        return await self.inner.complete(messages, **params)
