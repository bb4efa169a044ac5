"""The scripted FakeLM used by every other unit test."""

from __future__ import annotations

import pytest

from emery.core.models import ChatMessage
from emery.lm import LM, FakeLM, complete_sync


def _user(text: str) -> list[ChatMessage]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


async def test_callable_script_gets_the_messages() -> None:
    lm = FakeLM(lambda messages: messages[-1]["content"].upper(), model="fake/upper")
    completion = await lm.complete(_user("hello there"))
    assert completion.text == "HELLO THERE"
    assert completion.model == "fake/upper"
    assert completion.finish_reason == "stop"
    assert completion.usage.prompt_tokens == 4
    assert completion.usage.completion_tokens == 2
    assert lm.calls == [_user("hello there")]
    assert isinstance(lm, LM)


async def test_mapping_script_is_looked_up_by_last_user_message() -> None:
    lm = FakeLM({"ping": "pong"}, default="?")
    messages: list[ChatMessage] = [
        {"role": "user", "content": "ping"},
        {"role": "assistant", "content": "earlier reply"},
    ]
    assert (await lm.complete(messages)).text == "pong"
    assert (await lm.complete(_user("other"))).text == "?"


async def test_mapping_without_default_raises_lookup_error() -> None:
    lm = FakeLM({"ping": "pong"})
    with pytest.raises(LookupError, match="other"):
        await lm.complete(_user("other"))


async def test_sequence_script_replays_in_order_then_default() -> None:
    lm = FakeLM(["one", "two"], default="done")
    texts = [(await lm.complete(_user("x"))).text for _ in range(4)]
    assert texts == ["one", "two", "done", "done"]


async def test_sequence_without_default_raises_lookup_error_when_exhausted() -> None:
    lm = FakeLM(["only"])
    await lm.complete(_user("x"))
    with pytest.raises(LookupError):
        await lm.complete(_user("y"))


async def test_stop_cuts_the_reply_at_the_first_marker() -> None:
    lm = FakeLM(lambda _: "Answer: 4\nExplanation: because STOP more")
    completion = await lm.complete(_user("q"), stop=["\n", "STOP"])
    assert completion.text == "Answer: 4"


async def test_max_tokens_truncates_words_and_reports_length() -> None:
    lm = FakeLM(lambda _: "a b c d e")
    short = await lm.complete(_user("q"), max_tokens=2)
    assert short.text == "a b"
    assert short.finish_reason == "length"
    assert short.usage.completion_tokens == 2
    enough = await lm.complete(_user("q"), max_tokens=5)
    assert enough.text == "a b c d e"
    assert enough.finish_reason == "stop"


def test_complete_sync_runs_from_plain_code() -> None:
    lm = FakeLM(["sync reply"])
    assert complete_sync(lm, _user("x")).text == "sync reply"


async def test_top_logprobs_are_the_scripted_alternatives_cut_to_n_else_the_word() -> None:
    alternatives = [{"4": -0.2, "3": -1.9, "5": -3.0}]
    lm = FakeLM(["4 fine", "4 fine"], alternatives=alternatives)
    tokens = (await lm.complete(_user("grade"), logprobs=True, top_logprobs=2)).tokens
    assert tokens is not None
    assert tokens.completion_logprobs is not None
    top = tokens.completion_top_logprobs
    assert top is not None
    assert [[(c.token, c.logprob) for c in choices] for choices in top] == [
        [("4", -0.2), ("3", -1.9)],
        [("fine", tokens.completion_logprobs[1])],
    ]
    plain = (await lm.complete(_user("grade"), logprobs=True)).tokens
    assert plain is not None
    assert plain.completion_top_logprobs is None


async def test_scripted_alternatives_can_depend_on_the_messages() -> None:
    lm = FakeLM("2", alternatives=lambda messages: [{messages[-1]["content"]: -0.5}])
    tokens = (await lm.complete(_user("7"), logprobs=True, top_logprobs=5)).tokens
    assert tokens is not None
    assert tokens.completion_top_logprobs is not None
    assert tokens.completion_top_logprobs[0][0].token == "7"
