"""Stopping the batcher: requests in flight fail, the model is freed and the decoder
thread has ended, by ``stop()``, by ``stop_batchers()`` and at interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from local_engine_support import FakeDecoder

from emery.core.models import ChatMessage
from emery.lm import LMError
from emery.lm.llama_batcher import Batcher, stop_batchers


def _chat(user: str) -> list[ChatMessage]:
    return [{"role": "user", "content": user}]


def _decoding(decoder: FakeDecoder) -> None:
    """Return once the decoder has run a few batched steps."""
    for _ in range(2000):
        if len(decoder.step_sizes) > 3:
            return
        time.sleep(0.001)
    raise AssertionError("the batcher never stepped")


def test_stop_fails_what_is_in_flight_frees_the_model_and_ends_the_thread() -> None:
    decoder = FakeDecoder(slots=1, delay=0.001)
    batcher = Batcher(lambda: decoder, model="local/fake")
    running = batcher.submit(_chat("#100000"), {})
    waiting = batcher.submit(_chat("next"), {})
    _decoding(decoder)
    thread = batcher._thread
    assert thread is not None

    batcher.stop()

    assert not thread.is_alive()
    assert decoder.closed
    for future in (running, waiting):
        with pytest.raises(LMError, match="local/fake: the model was stopped"):
            future.result(timeout=0)
    assert batcher.running() == 0
    batcher.stop()  # stopped: nothing to do
    assert batcher.submit(_chat("again"), {}).result(timeout=10).text == "re: again"
    batcher.stop()


def test_stop_batchers_stops_every_engine_with_a_worker() -> None:
    decoders = [FakeDecoder(slots=1, delay=0.001) for _ in range(2)]
    batchers = [Batcher(lambda d=d: d, model="local/fake") for d in decoders]
    futures = [batcher.submit(_chat("#100000"), {}) for batcher in batchers]
    for decoder in decoders:
        _decoding(decoder)

    stop_batchers()

    assert all(batcher._thread is None for batcher in batchers)
    assert all(decoder.closed for decoder in decoders)
    assert all(isinstance(future.exception(timeout=0), LMError) for future in futures)


def test_the_decoder_thread_is_stopped_before_the_interpreter_exits() -> None:
    """A process that leaves while the model decodes frees it first (llama.cpp crashed
    with SIGSEGV when torn down under its decoding thread)."""
    script = textwrap.dedent(
        """
        import time
        from local_engine_support import FakeDecoder
        from emery.lm.llama_batcher import Batcher

        class Decoder(FakeDecoder):
            def close(self):
                print("closed after", len(self.step_sizes) > 3, flush=True)

        decoder = Decoder(slots=1, delay=0.001)
        Batcher(lambda: decoder, model="local/fake").submit(
            [{"role": "user", "content": "#100000"}], {}
        )
        while len(decoder.step_sizes) <= 3:
            time.sleep(0.001)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "closed after True\n"
