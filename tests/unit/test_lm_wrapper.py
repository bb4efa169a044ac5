"""LMWrapper: the one place the ``complete`` signature of LM wrappers is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm import LM, Completion, FakeLM, LMWrapper

MESSAGES: list[ChatMessage] = [{"role": "user", "content": "one two three"}]


class Shorter(LMWrapper):
    """Caps every call at one token and counts the calls."""

    def __init__(self, inner: LM) -> None:
        super().__init__(inner)
        self.seen: list[dict[str, Any]] = []

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        self.seen.append(dict(params))
        params["max_tokens"] = 1
        return await self.inner.complete(messages, **params)


async def test_a_wrapper_forwards_the_model_and_unchanged_calls() -> None:
    lm = LMWrapper(FakeLM(lambda _: "a b c", model="fake/x"))
    assert isinstance(lm, LM)
    assert lm.model == "fake/x"
    completion = await lm.complete(MESSAGES, stop=["c"])
    assert completion.text == "a b "


async def test_the_hook_sees_the_given_keywords_and_may_change_them() -> None:
    shorter = Shorter(FakeLM(lambda _: "a b c"))
    lm = LMWrapper(shorter)
    completion = await lm.complete(MESSAGES, temperature=0.5, tools=[])
    assert completion.text == "a"
    assert completion.finish_reason == "length"
    [seen] = shorter.seen
    assert seen == {"temperature": 0.5, "tools": []}
