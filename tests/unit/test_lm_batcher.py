"""The batcher's scheduling, over a fake decoder whose replies come from its cache."""

from __future__ import annotations

import time
from concurrent.futures import Future, wait

import pytest
from local_engine_support import END, FakeDecoder, render

from emery.core.models import ChatMessage
from emery.lm import Completion, LMError
from emery.lm.llama_batcher import Batcher, common_prefix
from emery.lm.llama_decoder import MIN_CHUNK, prefill_chunks

SYSTEM = "You are terse. " * 8  # a long shared prefix (120 characters)


def _chat(user: str, system: str = SYSTEM) -> list[ChatMessage]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _batcher(decoder: FakeDecoder, **kw: bool) -> Batcher:
    return Batcher(lambda: decoder, model="local/fake", **kw)


def _results(futures: list[Future[Completion]]) -> list[str]:
    done, _ = wait(futures, timeout=10)
    assert len(done) == len(futures)
    return [f.result().text for f in futures]


def _submit_held(
    batcher: Batcher, decoder: FakeDecoder, users: list[str]
) -> list[Future[Completion]]:
    """Submit every request while the decoder is held, so all wait together."""
    decoder.release.clear()
    futures = [batcher.submit(_chat(user), {"temperature": 0.0}) for user in users]
    time.sleep(0.05)
    decoder.release.set()
    return futures


def test_batched_replies_equal_one_at_a_time_replies() -> None:
    users = [f"question {i}" for i in range(6)] + ["#30", "#3"]
    one = FakeDecoder(slots=1)
    alone = [_results([_batcher(one).submit(_chat(u), {})])[0] for u in users]
    many = FakeDecoder(slots=4)
    together = _results(_submit_held(_batcher(many), many, users))

    assert together == alone
    assert alone[0] == "re: question 0"
    assert alone[6] == "x" * 30
    assert max(many.step_sizes) == 4
    assert max(one.step_sizes) == 1


def test_a_shared_prefix_is_read_once_and_counted() -> None:
    decoder = FakeDecoder(slots=4)
    batcher = _batcher(decoder)
    users = ["alpha", "beta", "gamma", "delta"]
    texts = _results(_submit_held(batcher, decoder, users))

    assert texts == [f"re: {u}" for u in users]
    prompts = [len(f"<system>{SYSTEM}<user>{u}<a>") for u in users]
    shared = len(f"<system>{SYSTEM}<user>")
    stats = batcher.stats
    reused = sum(min(shared, n - MIN_CHUNK) for n in prompts[1:])  # a tail of 8 is read anew
    assert stats.prompt_tokens == sum(prompts)
    assert stats.reused_tokens == reused
    assert reused < 3 * shared, "'beta<a>' is shorter than MIN_CHUNK: a shared token is read again"
    assert stats.prefilled_tokens == sum(prompts) - reused == decoder.prefilled
    assert stats.copies == 3


def test_a_freed_slot_keeps_its_cache_for_the_next_request() -> None:
    decoder = FakeDecoder(slots=2)
    batcher = _batcher(decoder)
    _results([batcher.submit(_chat("first"), {})])
    _results([batcher.submit(_chat("second"), {})])
    assert batcher.stats.reused_tokens == len(f"<system>{SYSTEM}<user>")
    assert batcher.stats.copies == 0
    _results([batcher.submit(_chat("second"), {})])  # same prompt: its last 8 are read again
    assert decoder.prefilled == batcher.stats.prefilled_tokens
    prefix = len(f"<system>{SYSTEM}<user>")
    assert batcher.stats.reused_tokens == prefix * 2 + len("second<a>") - MIN_CHUNK


def test_a_long_and_a_short_request_finish_independently() -> None:
    decoder = FakeDecoder(slots=2, delay=0.002)
    batcher = _batcher(decoder)
    long = batcher.submit(_chat("#400"), {})
    short = batcher.submit(_chat("hi"), {})
    assert short.result(timeout=10).text == "re: hi"
    assert not long.done()
    third = batcher.submit(_chat("next"), {})  # takes the short one's slot
    assert third.result(timeout=10).text == "re: next"
    assert not long.done()
    assert long.result(timeout=10).text == "x" * 400
    assert long.result().usage.completion_tokens == 400


def test_a_cancelled_request_frees_its_slot_mid_batch() -> None:
    decoder = FakeDecoder(slots=1, delay=0.002)
    batcher = _batcher(decoder)
    doomed = batcher.submit(_chat("#5000"), {})
    waiting = batcher.submit(_chat("after"), {})
    for _ in range(1000):
        if len(decoder.step_sizes) > 5:
            break
        time.sleep(0.002)
    assert doomed.cancel()
    assert waiting.result(timeout=10).text == "re: after"
    assert batcher.stats.cancelled == 1
    assert len(decoder.step_sizes) < 1000
    assert batcher.running() == 0
    assert decoder.active_samplers == set()


def test_waiting_requests_are_served_longest_shared_prefix_first() -> None:
    decoder = FakeDecoder(slots=1)
    batcher = _batcher(decoder)
    decoder.release.clear()
    chats = [_chat(f"q{i}", "Alpha. " if i % 2 == 0 else "Beta.. ") for i in range(8)]
    futures = [batcher.submit(chat, {}) for chat in chats]
    time.sleep(0.05)
    decoder.release.set()
    _results(futures)
    assert decoder.served == ["q0", "q2", "q4", "q6", "q1", "q3", "q5", "q7"]


def test_without_prefix_reuse_requests_are_served_in_order_from_nothing() -> None:
    decoder = FakeDecoder(slots=1)
    batcher = _batcher(decoder, prefix_reuse=False)
    decoder.release.clear()
    futures = [
        batcher.submit(_chat(f"q{i}", "Alpha. " if i % 2 else "Beta.. "), {}) for i in range(4)
    ]
    time.sleep(0.05)
    decoder.release.set()
    _results(futures)
    assert decoder.served == ["q0", "q1", "q2", "q3"]
    assert batcher.stats.reused_tokens == 0
    assert batcher.stats.prefilled_tokens == batcher.stats.prompt_tokens


def test_stop_strings_and_max_tokens_end_a_reply() -> None:
    batcher = _batcher(FakeDecoder(slots=2))
    stopped = batcher.submit(_chat("one two three"), {"stop": [" tw"]})
    cut = batcher.submit(_chat("#50"), {"max_tokens": 7})
    assert stopped.result(timeout=10).text == "re: one"
    assert stopped.result().finish_reason == "stop"
    assert cut.result(timeout=10).text == "x" * 7
    assert cut.result().finish_reason == "length"
    assert cut.result().usage.completion_tokens == 7


def test_a_bad_prompt_fails_alone_and_the_engine_keeps_serving() -> None:
    decoder = FakeDecoder(slots=2)
    decoder.fail_prepare_on = "bad"
    batcher = _batcher(decoder)
    bad = batcher.submit(_chat("bad"), {})
    with pytest.raises(LMError, match="prompt too long"):
        bad.result(timeout=10)
    assert _results([batcher.submit(_chat("good"), {})]) == ["re: good"]


def test_a_model_that_does_not_load_fails_each_request_with_the_reason() -> None:
    def broken() -> FakeDecoder:
        raise RuntimeError("no such file")

    batcher = Batcher(broken, model="local/broken")
    with pytest.raises(LMError, match="local/broken: no such file"):
        batcher.submit(_chat("x"), {}).result(timeout=10)


def test_close_frees_the_model_and_a_later_request_loads_it_again() -> None:
    loaded: list[FakeDecoder] = []

    def load() -> FakeDecoder:
        loaded.append(FakeDecoder())
        return loaded[-1]

    batcher = Batcher(load, model="local/fake")
    batcher.close()  # nothing started: nothing to do
    assert _results([batcher.submit(_chat("one"), {})]) == ["re: one"]
    batcher.close()
    assert loaded[0].closed
    assert _results([batcher.submit(_chat("two"), {})]) == ["re: two"]
    assert len(loaded) == 2


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_a_request_for_tokens_gets_its_ids_and_a_logprob_per_reply_token() -> None:
    decoder = FakeDecoder(slots=2)
    batcher = _batcher(decoder)
    plain = batcher.submit(_chat("alpha"), {"temperature": 0.0})
    recorded = batcher.submit(_chat("beta"), {"temperature": 0.0}, tokens=True)
    wait([plain, recorded], timeout=10)

    assert plain.result().tokens is None
    completion = recorded.result()
    assert completion.text == "re: beta"
    tokens = completion.tokens
    assert tokens is not None
    prompt = render(_chat("beta"))
    assert "".join(map(chr, tokens.prompt_token_ids)) == prompt
    assert "".join(map(chr, tokens.completion_token_ids)) == "re: beta"
    # each reply token's log-probability was read where it was sampled, before the next step
    assert tokens.completion_logprobs == [-(len(prompt) + k) / 1000 for k in range(len("re: beta"))]


def test_a_prompt_is_read_in_pieces_of_at_least_min_chunk_tokens() -> None:
    assert prefill_chunks(5, 512) == [5]  # a short prompt is read whole
    assert prefill_chunks(512, 512) == [512]
    assert prefill_chunks(515, 512) == [507, 8]  # not 512 + 3: 3 are read with other kernels
    assert prefill_chunks(1030, 512) == [512, 510, 8]
    assert all(size >= MIN_CHUNK for n in range(8, 2000) for size in prefill_chunks(n, 64))
    assert sum(prefill_chunks(30, 4)) == 30  # a batch too small to keep 8: plain pieces


def test_a_replys_decoded_positions_are_never_reused_for_a_prompt() -> None:
    """A prompt that goes on where a reply went (its text holds the reply) reads the reply
    anew: decoded positions were computed a token a step, not as a prompt is read."""
    decoder = FakeDecoder(slots=1)
    batcher = _batcher(decoder)
    first = _chat("alpha")
    reply = _results([batcher.submit(first, {})])[0]
    follow_up = _chat(f"alpha{END}{reply} and more")
    assert render(follow_up).startswith(render(first) + reply), "its prompt holds the reply"
    _results([batcher.submit(follow_up, {})])
    assert batcher.stats.reused_tokens == len(render(first))  # its prompt, not its reply
