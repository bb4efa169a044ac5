"""LiteLLMModel offline, through LiteLLM's own ``mock_response``."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jobs_support as js
import pytest

from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.jobs import JobEngine, create_job, run_job
from emery.lm.base import Completion, TokenUsage
from emery.lm.config import LMConfig, build_base_lm
from emery.lm.provider_errors import ProviderRefused
from emery.lm.retry import RetryPolicy
from emery.store import MemoryStore
from emery.store.records import RolloutFilter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list fetch on import
litellm = pytest.importorskip("litellm")

from emery.lm.litellm_lm import LiteLLMModel  # noqa: E402

MESSAGES: list[ChatMessage] = [{"role": "user", "content": "What is 2 + 2?"}]
FAST_RETRY = RetryPolicy(
    max_attempts=3, base_delay_s=0.001, max_delay_s=0.01, rate_limit_base_s=0.01, max_wait_s=5.0
)
_keys = itertools.count()


def model(name: str = "anthropic/claude-3-5-haiku-latest") -> LiteLLMModel:
    """A model with a key of its own, so no test shares another's throttle."""
    return LiteLLMModel(name, api_key=f"test-key-{next(_keys)}", retry=FAST_RETRY)


def rate_limit(wait_s: str = "0.01") -> Exception:
    response = httpx.Response(
        429, headers={"retry-after": wait_s}, request=httpx.Request("POST", "https://x")
    )
    return litellm.RateLimitError(
        "slow down", llm_provider="anthropic", model="claude", response=response
    )


def auth_error() -> Exception:
    return litellm.AuthenticationError(
        "invalid x-api-key", llm_provider="anthropic", model="claude"
    )


@pytest.fixture
def mocked(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[dict[str, Any]]]:
    """Answer the i-th ``litellm.acompletion`` call with ``mock_response=replies[i]`` (the
    last reply from then on); returns the calls' keyword arguments."""

    real = litellm.acompletion

    def install(*replies: Any) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []

        async def acompletion(**kwargs: Any) -> Any:
            calls.append(kwargs)
            reply = replies[min(len(calls), len(replies)) - 1]
            return await real(**{**kwargs, "mock_response": reply})

        monkeypatch.setattr(litellm, "acompletion", acompletion)
        return calls

    return install


async def test_text_and_usage() -> None:
    lm = model()
    out = await lm.complete(MESSAGES, max_tokens=8, mock_response="Answer: 4")
    assert out.text == "Answer: 4"
    assert out.finish_reason == "stop"
    assert out.usage.prompt_tokens > 0
    assert out.usage.completion_tokens > 0
    assert out.latency_s >= 0.0


async def test_params_go_to_litellm_unchanged(mocked: Callable[..., list[dict[str, Any]]]) -> None:
    calls = mocked("{}")
    lm = LiteLLMModel(
        "gemini/gemini-2.0-flash", api_key="k-params", base_url="http://proxy:4000", timeout_s=7.0
    )
    fmt = {"type": "json_object"}
    await lm.complete(MESSAGES, temperature=0.3, max_tokens=5, stop=["\n"], response_format=fmt)
    (sent,) = calls
    assert sent["model"] == "gemini/gemini-2.0-flash"
    assert sent["messages"] == MESSAGES
    assert sent["response_format"] is fmt
    assert (sent["temperature"], sent["max_tokens"], sent["stop"]) == (0.3, 5, ["\n"])
    assert (sent["api_key"], sent["api_base"]) == ("k-params", "http://proxy:4000")
    assert sent["timeout"] == 7.0
    assert sent["num_retries"] == 0


async def test_rate_limit_is_waited_out_then_answered(
    mocked: Callable[..., list[dict[str, Any]]],
) -> None:
    calls = mocked(rate_limit(), rate_limit(), "Answer: 4")
    out = await model().complete(MESSAGES)
    assert out.text == "Answer: 4"
    assert len(calls) == 3  # rate limits use up no attempt (max_attempts is 3)


async def test_authentication_error_is_refused_after_one_call(
    mocked: Callable[..., list[dict[str, Any]]],
) -> None:
    calls = mocked(auth_error())
    with pytest.raises(ProviderRefused, match="API key was refused"):
        await model().complete(MESSAGES)
    assert len(calls) == 1


async def test_check(mocked: Callable[..., list[dict[str, Any]]]) -> None:
    calls = mocked("OK")
    await model().check()
    assert calls[0]["max_tokens"] == 1
    mocked(rate_limit())
    await model().check()  # a rate limit is no refusal
    calls = mocked(auth_error())
    with pytest.raises(ProviderRefused):
        await model().check()
    assert len(calls) == 1


def test_cost_usd() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=100)
    priced = model("anthropic/claude-haiku-4-5").cost_usd(Completion(text="", usage=usage))
    assert priced is not None
    assert priced > 0
    assert model("anthropic/no-such-model-xyz").cost_usd(Completion(text="", usage=usage)) is None


async def test_completion_carries_its_cost() -> None:
    out = await model("anthropic/claude-haiku-4-5").complete(MESSAGES, mock_response="4")
    assert out.cost_usd is not None
    assert out.cost_usd > 0


def test_missing_litellm_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(ConfigError, match=r"pip install 'emery\[litellm\]'"):
        LiteLLMModel("anthropic/claude-3-5-haiku-latest")


@pytest.mark.parametrize(
    ("configured", "litellm_model"),
    [
        ("litellm/anthropic/claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
        ("anthropic/claude-3-5-haiku-latest", "anthropic/claude-3-5-haiku-latest"),
    ],
)
def test_build_base_lm(configured: str, litellm_model: str) -> None:
    config = LMConfig(
        model=configured,
        api_key="k-config",
        base_url="http://proxy:4000",
        max_attempts=2,
        max_wait_s=9.0,
    )
    lm = build_base_lm(config)
    assert isinstance(lm, LiteLLMModel)
    assert lm.model == litellm_model
    assert (lm.api_key, lm.base_url) == ("k-config", "http://proxy:4000")
    assert (lm.retry.max_attempts, lm.retry.max_wait_s) == (2, 9.0)


def _job(tmp_path: Path, lms: dict[str, str], budget: dict[str, Any]) -> tuple[MemoryStore, Any]:
    config = js.search_config(tmp_path / ".emery", iterations=3, budget=budget)
    config["runtime"]["cache"] = False
    config["lm"] = {role: {"model": model} for role, model in lms.items()}
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), base_dir=tmp_path).id
    return store, run_job(store, job_id, engine=JobEngine(store, job_id))


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_job_on_litellm_models_ends_as_on_the_same_models_called_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search job whose task and reflection models are LiteLLM strings, answered through
    LiteLLM's ``mock_response`` by the scripted models, stores the scores the same job gets
    from those models called directly, and its LM cost comes from LiteLLM's price list
    (which also lets an ``lm_cost_usd`` limit validate)."""
    direct = {
        "task": "python/jobs_support:task_lm",
        "reflection": "python/jobs_support:reflection_lm",
    }
    store, job = _job(tmp_path / "direct", direct, {})
    assert job.state == "succeeded"

    hosted = {"task": "anthropic/claude-haiku-4-5", "reflection": "anthropic/claude-sonnet-4-5"}
    scripts = {hosted["task"]: js.task_lm(), hosted["reflection"]: js.reflection_lm()}
    real = litellm.acompletion
    called: list[str] = []

    async def acompletion(**kwargs: Any) -> Any:
        called.append(kwargs["model"])
        reply = await scripts[kwargs["model"]].complete(kwargs["messages"])
        return await real(**{**kwargs, "mock_response": reply.text})

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-job")
    routed_store, routed = _job(tmp_path / "litellm", hosted, {"lm_cost_usd": 100.0})
    assert routed.state == "succeeded", routed.error
    assert set(called) == set(hosted.values())
    assert js.stored_scores(routed_store, routed.id) == js.stored_scores(store, job.id)
    assert (routed.best_candidate_id, routed.best_score) == (job.best_candidate_id, job.best_score)
    rollouts = routed_store.list_rollouts(RolloutFilter(job_id=routed.id), limit=None).items
    assert rollouts
    assert all(r.status == "succeeded" for r in rollouts)
    checkpoint = routed_store.get_checkpoint(routed.id)
    assert checkpoint is not None
    assert all(checkpoint.usage[role]["cost_usd"] > 0 for role in ("task", "reflection"))


async def test_json_mode_where_litellm_says_the_model_takes_it(
    mocked: Callable[..., list[dict[str, Any]]],
) -> None:
    assert model("anthropic/claude-haiku-4-5").json_mode
    assert not model("nosuch/model").json_mode
    calls = mocked('{"a": 1}')
    await model().complete(MESSAGES, response_format={"type": "json_object"})
    assert calls[0]["response_format"] == {"type": "json_object"}
