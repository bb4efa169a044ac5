"""``timeout_seconds`` bounds a rollout's own time: waiting on the in-process model (queued
behind other rollouts' requests, or decoding on a busy machine) does not count, while an
agent stuck in its own code is still stopped; a code-harness episode's time limit alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness_support import calculator_examples, calculator_reply
from local_engine_support import FakeDecoder

from emery.core.models import ChatMessage, Example
from emery.core.work_clock import waiting_on_model
from emery.evaluation import Evaluator
from emery.lm import Completion, FakeLM
from emery.lm.llama_batcher import Batcher
from emery.lm.local import LocalLM
from emery.systems.function_agent import FunctionAgent, agent
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.tracing import MemoryRecorder, RolloutConfig
from emery.verifiers import ExactMatch

TIMEOUT_S = 0.15
REPLY_TOKENS = 25  # at 5 ms a step, about 0.13 s a reply: the 4th of 4 queues ~0.4 s


def _slow_local_model(tmp_path: Path) -> LocalLM:
    """A ``LocalLM`` whose decoder has one slot and takes 5 ms a token."""
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"")
    lm = LocalLM(path, model="local/fake")
    decoder = FakeDecoder(slots=1, delay=0.005)
    lm.batcher = Batcher(lambda: decoder, model=lm.model)
    return lm


def _evaluator(fn: Any, lm: LocalLM, recorder: MemoryRecorder) -> Evaluator:
    return Evaluator(
        FunctionAgent(fn, instrument_openai=False),
        ExactMatch(),
        lm,
        concurrency=4,
        rollouts=RolloutConfig(timeout_seconds=TIMEOUT_S),
        recorder=recorder,
    )


def _examples(n: int) -> list[Example]:
    return [Example(id=f"ex{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(n)]


async def test_rollouts_queued_for_the_model_longer_than_the_timeout_succeed(
    tmp_path: Path,
) -> None:
    @agent
    async def asks(task: dict[str, Any], lm: Any) -> str:
        reply = await lm.acall(f"#{REPLY_TOKENS}")
        assert reply == "x" * REPLY_TOKENS
        return str(task["word"])

    lm = _slow_local_model(tmp_path)
    recorder = MemoryRecorder()
    start = time.monotonic()
    ev = _evaluator(asks, lm, recorder)
    results = (await ev.evaluate(ev.system.seed_candidate(), _examples(4), "val")).results
    lm.close()
    assert [r.error for r in results] == [None] * 4
    assert [r.score for r in results] == [1.0] * 4
    assert time.monotonic() - start > 2 * TIMEOUT_S  # the last ones waited past the timeout


async def test_an_agent_stuck_in_its_own_code_still_times_out(tmp_path: Path) -> None:
    @agent
    async def stuck(task: dict[str, Any], lm: Any) -> str:
        await lm.acall(f"#{REPLY_TOKENS}")  # queued and decoded: not counted
        await asyncio.sleep(30)  # its own time
        return str(task["word"])

    lm = _slow_local_model(tmp_path)
    recorder = MemoryRecorder()
    ev = _evaluator(stuck, lm, recorder)
    ev.rollout_maker.grace_s = 0.05
    start = time.monotonic()
    results = (await ev.evaluate(ev.system.seed_candidate(), _examples(2), "val")).results
    lm.close()
    assert time.monotonic() - start < 3.0
    for result in results:
        (attempt,) = recorder.attempts(result.rollout_id or "")
        assert attempt.status == "timeout"
        assert f"timeout_seconds={TIMEOUT_S:g}" in (attempt.error or "")


class WaitingLM(FakeLM):
    """A scripted model that waits ``wait_s`` per call as an in-process model would."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(calculator_reply, model="fake/calculator")
        self.wait_s = wait_s

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        with waiting_on_model():
            await asyncio.sleep(self.wait_s)
        return await super().complete(messages, **params)


async def test_a_harness_episode_does_not_spend_its_time_limit_waiting_on_the_model() -> None:
    system = CodeHarness(CodeHarnessConfig(environment="calculator", timeout_s=0.6))
    evaluator = Evaluator(system, ExactMatch(), WaitingLM(wait_s=0.3))  # 3 calls: 0.9 s
    result = await evaluator.evaluate(system.seed_candidate(), calculator_examples(1), "val")
    assert result.results[0].error is None
    assert result.scores == [1.0]
