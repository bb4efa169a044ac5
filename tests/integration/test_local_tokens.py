"""Token capture on the real embedded model (SmolLM2-135M via llama.cpp): the token ids a
call asked for decode back to its prompt and reply, and the reply is the one without."""

from __future__ import annotations

import math

import pytest

from emery.core.models import ChatMessage
from emery.lm.config import local_model_path
from emery.lm.local import LocalLM

pytestmark = pytest.mark.integration


async def test_token_ids_decode_to_the_prompt_and_reply_and_logprobs_are_log_probabilities() -> (
    None
):
    import llama_cpp

    path = local_model_path("smollm2-135m")
    vocabulary = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    messages: list[ChatMessage] = [
        {"role": "system", "content": "You count."},
        {"role": "user", "content": "Count from one to ten in words."},
    ]
    with LocalLM(path, n_ctx=512, n_parallel=2) as lm:
        plain = await lm.complete(messages, max_tokens=8)
        recorded = await lm.complete(messages, max_tokens=8, logprobs=True)

    assert plain.tokens is None
    assert recorded.text == plain.text  # recording changes nothing the caller gets
    tokens = recorded.tokens
    assert tokens is not None
    prompt = vocabulary.detokenize(tokens.prompt_token_ids, special=True).decode()
    assert all(m["content"] in prompt for m in messages)
    assert len(tokens.prompt_token_ids) == recorded.usage.prompt_tokens
    completion = vocabulary.detokenize(tokens.completion_token_ids).decode()
    assert completion == recorded.text
    assert len(tokens.completion_token_ids) == recorded.usage.completion_tokens == 8
    logprobs = tokens.completion_logprobs
    assert logprobs is not None
    assert len(logprobs) == 8
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in logprobs)
    assert any(lp < 0.0 for lp in logprobs)
