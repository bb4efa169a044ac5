"""LocalLM, the facade over the batcher: parameters in, completions out, cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from local_engine_support import FakeDecoder

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm import LMError, LocalLM
from emery.lm.llama_batcher import Batcher


def _local_lm(tmp_path: Path, decoder: FakeDecoder, **kw: Any) -> LocalLM:
    path = tmp_path / "dummy.gguf"
    path.write_bytes(b"GGUF")
    lm = LocalLM(path, **kw)
    lm.batcher = Batcher(lambda: decoder, model=lm.model, prefix_reuse=lm.prefix_reuse)
    return lm


def _chat(user: str) -> list[ChatMessage]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": user}]


async def test_parameters_reach_the_model_without_nones(tmp_path: Path) -> None:
    decoder = FakeDecoder()
    lm = _local_lm(tmp_path, decoder)
    await lm.complete(_chat("q"), temperature=0.3, stop=["\n"], top_p=0.5)
    await lm.complete(_chat("q2"))
    assert decoder.prepared == [
        {"temperature": 0.3, "stop": ["\n"], "top_p": 0.5},
        {"temperature": 0.0},
    ]


async def test_completion_fields(tmp_path: Path) -> None:
    lm = _local_lm(tmp_path, FakeDecoder(), model="local/dummy")
    completion = await lm.complete(_chat("hello"))
    assert completion.text == "re: hello"
    assert completion.finish_reason == "stop"
    assert completion.model == "local/dummy"
    assert completion.usage.prompt_tokens == len("<system>Be brief.<user>hello<a>")
    assert completion.usage.completion_tokens == len("re: hello")
    assert completion.latency_s > 0
    assert LocalLM(tmp_path / "dummy.gguf").model == "local/dummy.gguf"


async def test_concurrent_calls_run_as_one_batch(tmp_path: Path) -> None:
    decoder = FakeDecoder(slots=4)
    lm = _local_lm(tmp_path, decoder)
    texts = await asyncio.gather(*(lm.complete(_chat(f"q{i}")) for i in range(4)))
    assert [c.text for c in texts] == [f"re: q{i}" for i in range(4)]
    assert max(decoder.step_sizes) == 4


async def test_a_cancelled_call_frees_its_slot(tmp_path: Path) -> None:
    decoder = FakeDecoder(slots=1, delay=0.002)
    lm = _local_lm(tmp_path, decoder)
    doomed = asyncio.ensure_future(lm.complete(_chat("#5000")))
    while len(decoder.step_sizes) < 5:
        await asyncio.sleep(0.002)
    doomed.cancel()
    after = await asyncio.wait_for(lm.complete(_chat("after")), timeout=10)
    assert after.text == "re: after"
    assert doomed.cancelled()
    assert lm.batcher.stats.cancelled == 1


async def test_a_failing_prompt_raises_lm_error_and_the_model_keeps_serving(
    tmp_path: Path,
) -> None:
    decoder = FakeDecoder()
    decoder.fail_prepare_on = "bad"
    lm = _local_lm(tmp_path, decoder)
    with pytest.raises(LMError, match="prompt too long"):
        await lm.complete(_chat("bad"))
    assert (await lm.complete(_chat("good"))).text == "re: good"


async def test_an_unloadable_file_is_an_lm_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"not a model")
    with pytest.raises(LMError, match=r"local/junk\.gguf"):
        await LocalLM(path, n_ctx=256).complete(_chat("hi"))


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        LocalLM(tmp_path / "absent.gguf")


async def test_a_call_for_top_logprobs_gets_the_likeliest_tokens_at_each_reply_position(
    tmp_path: Path,
) -> None:
    decoder = FakeDecoder()
    lm = _local_lm(tmp_path, decoder)
    plain = await lm.complete(_chat("hi"), logprobs=True)
    completion = await lm.complete(_chat("hi"), logprobs=True, top_logprobs=1)
    assert decoder.prepared[-1] == {"temperature": 0.0}  # not a sampling parameter
    assert plain.tokens is not None
    assert plain.tokens.completion_top_logprobs is None
    assert completion.text == "re: hi"
    assert completion.tokens is not None
    top = completion.tokens.completion_top_logprobs
    assert top is not None
    prompt = len("<system>Be brief.<user>hi<a>")
    # one list per reply token, read where that token was sampled, cut to the one asked for
    assert [[(c.token, c.logprob) for c in choices] for choices in top] == [
        [(chr(ord("a") + (prompt + k) % 26), -0.25)] for k in range(len("re: hi"))
    ]
