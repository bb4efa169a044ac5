"""UsageMeter and MeteredLM: per-role totals, cache hits and cost."""

from __future__ import annotations

import asyncio

import pytest
from fake_models import RecordingLM

from emery.core.models import ChatMessage
from emery.lm import (
    CachedLM,
    Completion,
    FakeLM,
    LMConfig,
    MeteredLM,
    Price,
    ResponseCache,
    RoleUsage,
    TokenUsage,
    UsageMeter,
    build_lm,
)
from emery.lm.usage import usage_scope

# FakeLM counts words: 4 prompt tokens, 2 completion tokens per call.
MESSAGES: list[ChatMessage] = [{"role": "user", "content": "one two three four"}]


def _fake(model: str = "openai/gpt-4o-mini") -> FakeLM:
    return FakeLM(lambda _: "five six", model=model)


async def test_totals_per_role() -> None:
    meter = UsageMeter()
    task = MeteredLM(_fake(), meter, "task")
    judge = MeteredLM(_fake(), meter, "judge")
    await task.complete(MESSAGES)
    await task.complete(MESSAGES)
    await judge.complete(MESSAGES)
    by_role = meter.by_role()
    assert set(by_role) == {"task", "judge"}
    assert by_role["task"].calls == 2
    assert by_role["task"].prompt_tokens == 8
    assert by_role["task"].completion_tokens == 4
    assert by_role["task"].total_tokens == 12
    assert by_role["judge"].calls == 1
    total = meter.total()
    assert total.calls == 3
    assert total.prompt_tokens == 12


async def test_cost_comes_from_the_price_table() -> None:
    meter = UsageMeter()
    lm = MeteredLM(_fake("openai/gpt-4o-mini"), meter, "task")
    await lm.complete(MESSAGES)
    # gpt-4o-mini: $0.15 in, $0.60 out per million tokens.
    assert meter.by_role()["task"].cost_usd == pytest.approx((4 * 0.15 + 2 * 0.60) / 1e6)


async def test_local_and_unknown_models_are_free() -> None:
    meter = UsageMeter()
    await MeteredLM(_fake("local/qwen2.5-coder-0.5b"), meter, "task").complete(MESSAGES)
    assert meter.by_role()["task"].cost_usd == 0.0
    assert meter.by_role()["task"].prompt_tokens == 4


def test_price_for_model_strips_the_provider() -> None:
    assert Price.for_model("openai/gpt-4o") == Price(input_per_mtok=2.5, output_per_mtok=10.0)
    assert Price.for_model("gpt-4o") == Price(input_per_mtok=2.5, output_per_mtok=10.0)
    assert Price.for_model("local/whatever") == Price()
    completion = Completion(text="", usage=TokenUsage(prompt_tokens=1_000_000))
    assert Price.for_model("gpt-4o").cost(completion) == pytest.approx(2.5)


def test_config_prices_override_the_table() -> None:
    both = LMConfig(
        model="openai/gpt-4o-mini", price_input_per_mtok=1.0, price_output_per_mtok=3.0
    ).price()
    assert both == Price(input_per_mtok=1.0, output_per_mtok=3.0)
    only_input = LMConfig(model="openai/gpt-4o-mini", price_input_per_mtok=1.0).price()
    assert only_input == Price(input_per_mtok=1.0, output_per_mtok=0.60)
    free = LMConfig(model="openai/gpt-4o-mini", price_input_per_mtok=0.0).price()
    assert free.input_per_mtok == 0.0


async def test_build_lm_uses_the_configured_price() -> None:
    meter = UsageMeter()
    config = LMConfig(model="openai/gpt-4o-mini", price_input_per_mtok=10.0)
    lm = build_lm(config, role="proposer", meter=meter, cache=None, base=_fake())
    await lm.complete(MESSAGES)
    assert meter.by_role()["proposer"].cost_usd == pytest.approx((4 * 10.0 + 2 * 0.60) / 1e6)


async def test_cache_hits_count_as_calls_but_cost_nothing() -> None:
    meter = UsageMeter()
    cache = ResponseCache(":memory:")
    inner = _fake()
    lm = MeteredLM(CachedLM(inner, cache), meter, "task")
    await lm.complete(MESSAGES)
    hit = await lm.complete(MESSAGES)
    cache.close()
    assert hit.cached
    usage = meter.by_role()["task"]
    assert usage.calls == 2
    assert usage.cache_hits == 1
    assert usage.prompt_tokens == 4
    assert usage.completion_tokens == 2
    assert usage.cost_usd == pytest.approx((4 * 0.15 + 2 * 0.60) / 1e6)
    assert len(inner.calls) == 1


async def test_build_lm_caches_and_meters() -> None:
    meter = UsageMeter()
    cache = ResponseCache(":memory:")
    inner = _fake()
    lm = build_lm(
        LMConfig(model="openai/gpt-4o-mini"), role="task", meter=meter, cache=cache, base=inner
    )
    await lm.complete(MESSAGES)
    await lm.complete(MESSAGES)
    no_cache = build_lm(
        LMConfig(model="openai/gpt-4o-mini", cache=False),
        role="judge",
        meter=meter,
        cache=cache,
        base=inner,
    )
    await no_cache.complete(MESSAGES)
    cache.close()
    assert len(inner.calls) == 2
    assert meter.by_role()["task"].cache_hits == 1
    assert meter.by_role()["judge"].cache_hits == 0


async def test_role_defaults_fill_unset_parameters() -> None:
    inner = RecordingLM()
    lm = MeteredLM(inner, UsageMeter(), "reflection", temperature=0.7, max_tokens=64)
    await lm.complete(MESSAGES)
    await lm.complete(MESSAGES, temperature=0.0, max_tokens=5, stop=["\n"])
    assert inner.params[0] == {"temperature": 0.7, "max_tokens": 64, "stop": None}
    assert inner.params[1] == {"temperature": 0.0, "max_tokens": 5, "stop": ["\n"]}


async def test_build_lm_applies_config_defaults() -> None:
    inner = RecordingLM()
    config = LMConfig(model="python/x:y", temperature=1.0, max_tokens=99)
    lm = build_lm(config, role="task", meter=UsageMeter(), cache=None, base=inner)
    await lm.complete(MESSAGES)
    assert inner.params[0]["temperature"] == 1.0
    assert inner.params[0]["max_tokens"] == 99


def test_meter_starts_from_initial_totals_and_adds() -> None:
    meter = UsageMeter({"task": RoleUsage(calls=5, prompt_tokens=50)})
    meter.record(
        "task", Completion(text="x", usage=TokenUsage(prompt_tokens=1, completion_tokens=2)), 0.5
    )
    usage = meter.by_role()["task"]
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (6, 51, 2)
    assert usage.cost_usd == 0.5
    cached = Completion(text="x", usage=TokenUsage(prompt_tokens=9), cached=True)
    meter.record("task", cached, 1.0)
    usage = meter.by_role()["task"]
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens, usage.cost_usd) == (7, 1, 51, 0.5)


async def test_a_usage_scope_hears_only_the_calls_of_its_own_task() -> None:
    meter = UsageMeter()
    task_lm = MeteredLM(_fake(), meter, "task")
    judge_lm = MeteredLM(_fake(), UsageMeter(), "judge")  # another meter: heard too

    async def run(calls: int) -> dict[str, RoleUsage]:
        with usage_scope() as used:
            for _ in range(calls):
                await task_lm.complete(MESSAGES)
            await judge_lm.complete(MESSAGES)
            return used.by_role()

    one, three = await asyncio.gather(run(1), run(3))
    assert (one["task"].calls, one["task"].prompt_tokens) == (1, 4)
    assert (three["task"].calls, three["task"].completion_tokens) == (3, 6)
    assert one["judge"].calls == three["judge"].calls == 1
    assert meter.by_role()["task"].calls == 4  # the meter itself counts everything
    total = UsageMeter()
    total.add(one)
    total.add(three)
    assert total.by_role()["task"] == meter.by_role()["task"]
