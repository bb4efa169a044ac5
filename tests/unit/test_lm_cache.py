"""ResponseCache and CachedLM: deterministic calls are served from SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emery.core.models import ChatMessage
from emery.lm import CachedLM, Completion, FakeLM, ResponseCache, TokenUsage

MESSAGES: list[ChatMessage] = [{"role": "user", "content": "what is two plus two"}]


@pytest.fixture
def cache() -> Iterator[ResponseCache]:
    cache = ResponseCache(":memory:")
    yield cache
    cache.close()


def _counting_lm() -> FakeLM:
    counter = iter(range(1000))
    return FakeLM(lambda _: f"reply {next(counter)}", model="fake/count")


async def test_temperature_zero_is_cached(cache: ResponseCache) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    first = await lm.complete(MESSAGES, temperature=0.0)
    second = await lm.complete(MESSAGES, temperature=0.0)
    assert first.cached is False
    assert second.cached is True
    assert second.text == first.text == "reply 0"
    assert second.latency_s == 0.0
    assert len(inner.calls) == 1
    assert len(cache) == 1


async def test_none_temperature_counts_as_greedy(cache: ResponseCache) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    await lm.complete(MESSAGES)
    hit = await lm.complete(MESSAGES, temperature=0.0)
    assert hit.cached
    assert len(inner.calls) == 1


async def test_sampled_calls_are_not_cached_by_default(cache: ResponseCache) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    first = await lm.complete(MESSAGES, temperature=0.7)
    second = await lm.complete(MESSAGES, temperature=0.7)
    assert (first.text, second.text) == ("reply 0", "reply 1")
    assert not second.cached
    assert len(inner.calls) == 2
    assert len(cache) == 0


async def test_sampled_calls_are_cached_with_cache_sampled(cache: ResponseCache) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache, cache_sampled=True)
    await lm.complete(MESSAGES, temperature=0.7)
    second = await lm.complete(MESSAGES, temperature=0.7)
    assert second.cached
    assert len(inner.calls) == 1
    other_temperature = await lm.complete(MESSAGES, temperature=0.9)
    assert not other_temperature.cached


@pytest.mark.parametrize(
    "params",
    [
        {"max_tokens": 10},
        {"stop": ["\n"]},
        {"top_p": 0.5},
    ],
)
async def test_different_params_use_different_keys(
    cache: ResponseCache, params: dict[str, object]
) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    await lm.complete(MESSAGES)
    changed = await lm.complete(MESSAGES, **params)  # type: ignore[arg-type]
    assert not changed.cached
    assert len(inner.calls) == 2
    assert len(cache) == 2


async def test_different_messages_or_model_use_different_keys(cache: ResponseCache) -> None:
    await CachedLM(_counting_lm(), cache).complete(MESSAGES)
    other_model = FakeLM(["x"], model="fake/other")
    assert not (await CachedLM(other_model, cache).complete(MESSAGES)).cached
    other_messages: list[ChatMessage] = [{"role": "user", "content": "what is three"}]
    assert not (await CachedLM(_counting_lm(), cache).complete(other_messages)).cached
    assert len(cache) == 3


def test_key_is_stable_and_sensitive() -> None:
    key = ResponseCache.key("m", MESSAGES, {"temperature": 0.0})
    assert key == ResponseCache.key("m", list(MESSAGES), {"temperature": 0.0})
    assert len(key) == 64
    assert key != ResponseCache.key("m2", MESSAGES, {"temperature": 0.0})
    assert key != ResponseCache.key("m", MESSAGES, {"temperature": 0.5})


async def test_cache_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cache.db"
    first_cache = ResponseCache(path)
    inner = _counting_lm()
    await CachedLM(inner, first_cache).complete(MESSAGES, max_tokens=20)
    first_cache.close()
    assert path.is_file()

    reopened = ResponseCache(path)
    try:
        fresh_inner = _counting_lm()
        hit = await CachedLM(fresh_inner, reopened).complete(MESSAGES, max_tokens=20)
        assert hit.cached
        assert hit.text == "reply 0"
        assert fresh_inner.calls == []
        assert len(reopened) == 1
    finally:
        reopened.close()


def test_put_get_round_trip_keeps_usage(cache: ResponseCache) -> None:
    completion = Completion(
        text="hi",
        finish_reason="length",
        usage=TokenUsage(prompt_tokens=5, completion_tokens=2),
        latency_s=1.5,
        model="m",
    )
    cache.put("k", completion)
    got = cache.get("k")
    assert got is not None
    assert got.usage == completion.usage
    assert got.finish_reason == "length"
    assert got.cached
    assert got.latency_s == 0.0
    assert cache.get("missing") is None


def test_writes_are_batched_and_served_before_they_are_committed(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache = ResponseCache(path, batch_size=3, flush_after_s=3600)
    other = ResponseCache(path)  # a second reader, as another process would be
    try:
        for i in range(2):
            cache.put(f"k{i}", Completion(text=f"t{i}", model="m"))
        assert cache.get("k1") is not None  # served from memory
        assert other.get("k1") is None  # not committed yet
        cache.put("k2", Completion(text="t2", model="m"))  # the batch is full: committed
        hit = other.get("k2")
        assert hit is not None
        assert hit.text == "t2"
        assert hit.cached
        cache.put("k3", Completion(text="t3", model="m"))
        cache.close()  # closing commits what is pending
        assert other.get("k3") is not None
        assert len(other) == 4
    finally:
        other.close()


def test_a_slow_model_commits_every_entry_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache = ResponseCache(path, flush_after_s=0.0)
    other = ResponseCache(path)
    try:
        cache.put("k", Completion(text="t", model="m"))
        assert other.get("k") is not None
    finally:
        cache.close()
        other.close()


def test_by_default_every_entry_is_committed_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    cache = ResponseCache(path)  # what a killed job leaves is what the next run reads
    other = ResponseCache(path)
    try:
        for i in range(3):
            cache.put(f"k{i}", Completion(text=f"t{i}", model="m"))
            assert other.get(f"k{i}") is not None
    finally:
        cache.close()
        other.close()


async def test_a_call_with_tokens_is_cached_with_them_under_a_key_of_its_own(
    cache: ResponseCache,
) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    plain = await lm.complete(MESSAGES)
    recorded = await lm.complete(MESSAGES, logprobs=True)  # not the plain call's entry
    again = await lm.complete(MESSAGES, logprobs=True)
    assert (plain.tokens, plain.text, recorded.text) == (None, "reply 0", "reply 1")
    assert recorded.tokens is not None
    assert again.cached
    assert again.tokens == recorded.tokens
    assert len(inner.calls) == 2


async def test_a_call_for_top_logprobs_is_cached_with_them_under_a_key_of_its_own(
    cache: ResponseCache,
) -> None:
    inner = _counting_lm()
    lm = CachedLM(inner, cache)
    tokens_only = await lm.complete(MESSAGES, logprobs=True)
    top = await lm.complete(MESSAGES, logprobs=True, top_logprobs=3)
    again = await lm.complete(MESSAGES, logprobs=True, top_logprobs=3)
    assert tokens_only.tokens is not None
    assert tokens_only.tokens.completion_top_logprobs is None
    assert top.tokens is not None
    assert top.tokens.completion_top_logprobs
    assert again.cached
    assert again.tokens == top.tokens
    assert len(inner.calls) == 2
