"""Batched decoding on the real embedded models via llama.cpp."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from emery.core.models import ChatMessage
from emery.data.tasks import builtin_task
from emery.lm.config import local_model_path
from emery.lm.llama_batcher import common_prefix
from emery.lm.llama_decoder import LlamaDecoder
from emery.lm.llama_prompt import capture
from emery.lm.local import LocalLM

pytestmark = pytest.mark.integration

N_CTX = 2048
INSTRUCTION = "Solve the word problem. Show one line per step, then 'Answer: <number>'."
DEMOS: list[ChatMessage] = [
    {"role": "user", "content": "Ava has 3 bags with 4 shells in each. How many shells?"},
    {"role": "assistant", "content": "3 x 4 = 12.\nAnswer: 12"},
    {"role": "user", "content": "Ben had 35 dollars and spent 9. How many are left?"},
    {"role": "assistant", "content": "35 - 9 = 26.\nAnswer: 26"},
]


def _prompts(n: int) -> list[list[ChatMessage]]:
    examples = builtin_task("word_problems").dataset(seed=7).test[:n]
    return [
        [
            {"role": "system", "content": INSTRUCTION},
            *DEMOS,
            {"role": "user", "content": e.input["question"]},
        ]
        for e in examples
    ]


def _path(model: str = "smollm2-135m") -> str:
    return str(local_model_path(model))


def _step_logits(decoder: LlamaDecoder, entries: list[tuple[int, int, int]]) -> list[float]:
    """The logits of the first entry after one decode step of all of them."""
    import llama_cpp

    decoder.step(entries)
    row = llama_cpp.llama_get_logits_ith(decoder._ctx, 0)
    return [row[i] for i in range(llama_cpp.llama_vocab_n_tokens(decoder._vocab))]


@pytest.mark.parametrize("model", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_a_sequence_in_a_batch_of_four_gets_the_logits_it_gets_alone(model: str) -> None:
    """Bit for bit, so greedy replies cannot depend on what else is in the batch (with
    llama.cpp's weight repacking, groups of 4 rows went through another kernel)."""
    decoder = LlamaDecoder(_path(model), slots=4, n_ctx=512, n_threads=os.cpu_count() or 1, seed=0)
    entries = []
    for slot, messages in enumerate(_prompts(4)):
        prompt = decoder.prepare(messages, {"temperature": 0.0})
        decoder.begin(slot, prompt.sampling)
        first = decoder.prefill(slot, prompt.tokens, 0)
        entries.append((slot, first, len(prompt.tokens)))
    alone = _step_logits(decoder, entries[:1])
    decoder.keep(0, 0, entries[0][2])  # forget the step: slot 0 is as before it
    together = _step_logits(decoder, entries)
    decoder.close()
    assert together == alone


def test_an_unreadable_lora_adapter_is_a_clear_error_and_frees_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    loaded: list[object] = []
    freed: list[object] = []
    load, free = llama_cpp.llama_model_load_from_file, llama_cpp.llama_model_free

    def load_recorded(*args: object) -> object:
        loaded.append(load(*args))
        return loaded[-1]

    def free_recorded(model: object) -> None:
        freed.append(model)
        free(model)

    monkeypatch.setattr(llama_cpp, "llama_model_load_from_file", load_recorded)
    monkeypatch.setattr(llama_cpp, "llama_model_free", free_recorded)
    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"not a gguf file")
    with pytest.raises(RuntimeError, match="could not load the LoRA adapter"):
        LlamaDecoder(_path(), slots=1, n_ctx=256, n_threads=1, seed=0, lora_path=adapter)
    assert len(loaded) == 1
    assert any(model is loaded[0] for model in freed)


async def test_batched_greedy_replies_equal_the_single_sequence_path() -> None:
    import llama_cpp

    prompts = _prompts(6)
    llama = llama_cpp.Llama(
        model_path=_path(), n_ctx=N_CTX, n_threads=os.cpu_count(), verbose=False
    )
    single = [
        llama.create_chat_completion(messages=p, max_tokens=48, temperature=0.0) for p in prompts
    ]
    tokens = [capture(llama, p, {"temperature": 0.0})["prompt"] for p in prompts]
    llama.close()

    lm = LocalLM(_path(), n_ctx=N_CTX, n_parallel=4)
    batched = await asyncio.gather(*(lm.complete(p, max_tokens=48) for p in prompts))
    stats = lm.batcher.stats
    lm.batcher.close()

    for reference, completion in zip(single, batched, strict=True):
        assert completion.text == reference["choices"][0]["message"]["content"]
        assert completion.finish_reason == reference["choices"][0]["finish_reason"]
        assert completion.usage.completion_tokens == reference["usage"]["completion_tokens"]
        assert completion.usage.prompt_tokens == reference["usage"]["prompt_tokens"]
    assert stats.step_tokens > stats.steps  # steps decoded several sequences at once
    # the instruction and demos are read once, then copied to the other slots
    shared = min(common_prefix(tokens[0], t) for t in tokens[1:])
    assert shared > 50
    assert stats.reused_tokens >= (len(prompts) - 1) * shared
    assert stats.prefilled_tokens <= sum(map(len, tokens)) - (len(prompts) - 1) * shared
    assert stats.prefilled_tokens + stats.reused_tokens == stats.prompt_tokens


async def test_short_and_long_requests_finish_apart_and_a_cancelled_one_frees_its_slot() -> None:
    lm = LocalLM(_path(), n_ctx=N_CTX, n_parallel=2)
    story: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a ship."}]
    long = asyncio.ensure_future(lm.complete(story, max_tokens=1000))
    short = await lm.complete(_prompts(1)[0], max_tokens=4)
    assert short.finish_reason == "length"
    assert not long.done()
    long.cancel()
    after = await asyncio.wait_for(lm.complete(_prompts(2)[1], max_tokens=4), timeout=120)
    assert after.usage.completion_tokens == 4
    assert long.cancelled()
    assert lm.batcher.stats.cancelled == 1
    assert lm.batcher.running() == 0
    lm.batcher.close()


async def test_a_repeated_prompt_and_a_follow_up_get_their_lone_replies_in_a_batch() -> None:
    """Prompts the batcher reads partly from cache (the same prompt again, one that
    goes on after an earlier reply) get the reply a lone sequence gives reading them whole."""
    first = _prompts(4)
    chats = [*first, first[0]]
    alone = LocalLM(_path(), n_ctx=N_CTX, n_parallel=1, prefix_reuse=False)
    reference = [(await alone.complete(c, max_tokens=24)).text for c in chats]
    follow_up: list[ChatMessage] = [
        *first[1],
        {"role": "assistant", "content": reference[1]},
        {"role": "user", "content": "Why?"},
    ]
    reference.append((await alone.complete(follow_up, max_tokens=24)).text)
    alone.batcher.close()

    lm = LocalLM(_path(), n_ctx=N_CTX * 4, n_parallel=4)
    first_batch = await asyncio.gather(*(lm.complete(c, max_tokens=24) for c in chats[:4]))
    again = await asyncio.gather(
        lm.complete(chats[4], max_tokens=24), lm.complete(follow_up, max_tokens=24)
    )
    stats = lm.batcher.stats
    lm.batcher.close()
    assert [c.text for c in (*first_batch, *again)] == reference
    assert stats.reused_tokens > 0  # the repeat and the follow-up were read partly from cache
