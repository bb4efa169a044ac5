"""Rollouts with attempts: retries, timeouts, unresponsive and crashing agents; span order
and completeness under 32 concurrent rollouts."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from emery.core.models import ChatMessage, Example
from emery.evaluation import Evaluator
from emery.lm import Completion, FakeLM
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import (
    MemoryRecorder,
    RolloutConfig,
    emit_message,
    emit_reward,
    heartbeat,
)
from emery.tracing import conventions as sc
from emery.verifiers import ExactMatch


def examples(n: int) -> list[Example]:
    return [Example(id=f"ex{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(n)]


def echo_lm(delay_s: float = 0.0) -> FakeLM:
    return FakeLM(lambda m: m[-1]["content"], delay_s=delay_s)


def evaluator(
    fn: Any, recorder: MemoryRecorder, lm: Any = None, concurrency: int = 4, **config: Any
) -> Evaluator:
    system = FunctionAgent(fn, instrument_openai=False)
    return Evaluator(
        system,
        ExactMatch(),
        lm or echo_lm(),
        concurrency=concurrency,
        rollouts=RolloutConfig(**config),
        recorder=recorder,
    )


async def run(ev: Evaluator, n: int = 1) -> Any:
    return await ev.evaluate(ev.system.seed_candidate(), examples(n), "val")


async def test_a_good_rollout_walks_the_status_machine() -> None:
    @agent
    async def echo(task: dict[str, Any], lm: Any) -> str:
        return await lm.acall(task["word"])

    recorder = MemoryRecorder()
    result = (await run(evaluator(echo, recorder))).results[0]
    assert result.score == 1.0
    assert result.rollout_status == "succeeded"
    assert result.attempts == 1
    rollout = recorder.rollout(result.rollout_id or "")
    assert recorder.history[rollout.id] == ["queuing", "preparing", "running", "succeeded"]
    assert rollout.score == 1.0
    assert rollout.output == "w0"
    assert rollout.input == {"word": "w0"}
    (attempt,) = recorder.attempts(rollout.id)
    assert attempt.status == "succeeded"
    assert attempt.id == f"{rollout.id}:1"
    assert attempt.finished_at is not None
    names = [s.name for s in recorder.spans(rollout.id)]
    assert names == [sc.ROLLOUT_SPAN, "chat fake"]


async def test_a_failing_attempt_is_retried_and_the_rollout_requeued() -> None:
    tries: dict[str, int] = {}

    @agent
    def flaky(task: dict[str, Any], rollout: Any) -> str:
        tries[rollout.example_id] = tries.get(rollout.example_id, 0) + 1
        if rollout.attempt == 1:
            raise ConnectionError("tool server dropped the connection")
        return str(task["word"])

    recorder = MemoryRecorder()
    result = (await run(evaluator(flaky, recorder, max_attempts=3))).results[0]
    assert result.score == 1.0
    assert result.error is None
    assert result.attempts == 2
    assert tries == {"ex0": 2}
    rid = result.rollout_id or ""
    assert recorder.history[rid] == [
        "queuing", "preparing", "running", "queuing", "preparing", "running", "succeeded",
    ]  # fmt: skip
    first, second = recorder.attempts(rid)
    assert (first.status, second.status) == ("failed", "succeeded")
    assert first.error == "ConnectionError: tool server dropped the connection"
    # The failed attempt's root span records the exception.
    root = recorder.spans(rid, first.id)[0]
    assert root.status == "error"
    assert root.events[0].attributes[sc.EXCEPTION_TYPE] == "ConnectionError"


async def test_attempts_run_out_and_the_rollout_fails_with_a_zero() -> None:
    @agent
    def broken(task: dict[str, Any]) -> str:
        raise ValueError("always broken")

    recorder = MemoryRecorder()
    result = (await run(evaluator(broken, recorder, max_attempts=3))).results[0]
    assert result.score == 0.0
    assert result.rollout_status == "failed"
    assert result.attempts == 3
    assert result.error == "ValueError: always broken"
    assert "always broken" in result.feedback
    statuses = [a.status for a in recorder.attempts(result.rollout_id or "")]
    assert statuses == ["failed", "failed", "failed"]


async def test_statuses_outside_retry_on_are_not_retried() -> None:
    @agent
    async def hangs(task: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "never"

    recorder = MemoryRecorder()
    ev = evaluator(hangs, recorder, max_attempts=3, retry_on=("failed",), timeout_seconds=0.2)
    result = (await run(ev)).results[0]
    assert result.attempts == 1
    assert recorder.attempts(result.rollout_id or "")[0].status == "timeout"


async def test_a_hanging_async_agent_times_out_on_every_attempt() -> None:
    @agent
    async def hangs(task: dict[str, Any]) -> str:
        await asyncio.sleep(30)
        return "never"

    recorder = MemoryRecorder()
    start = time.monotonic()
    result = (await run(evaluator(hangs, recorder, max_attempts=2, timeout_seconds=0.2))).results[0]
    assert time.monotonic() - start < 3.0
    assert result.score == 0.0
    assert result.rollout_status == "failed"
    assert "timeout_seconds=0.2" in (result.error or "")
    statuses = [a.status for a in recorder.attempts(result.rollout_id or "")]
    assert statuses == ["timeout", "timeout"]


async def test_a_hung_sync_agent_is_abandoned_and_its_late_spans_dropped() -> None:
    release = threading.Event()
    finished = threading.Event()

    @agent
    def stuck(task: dict[str, Any]) -> str:
        emit_message("before")
        release.wait(10)  # ignores cancellation: a thread cannot be stopped
        emit_message("after the attempt ended")
        finished.set()
        return "late"

    recorder = MemoryRecorder()
    ev = evaluator(stuck, recorder, timeout_seconds=0.2)
    ev.rollout_maker.grace_s = 0.05
    start = time.monotonic()
    result = (await run(ev)).results[0]
    assert time.monotonic() - start < 3.0
    assert result.rollout_status == "failed"
    release.set()
    assert finished.wait(5)
    texts = [s.attributes.get(sc.MESSAGE_TEXT) for s in recorder.spans(result.rollout_id)]
    assert "before" in texts
    assert "after the attempt ended" not in texts


async def test_a_silent_agent_is_unresponsive_long_before_its_timeout() -> None:
    @agent
    async def silent(task: dict[str, Any]) -> str:
        emit_message("started")
        await asyncio.sleep(30)
        return "never"

    recorder = MemoryRecorder()
    start = time.monotonic()
    ev = evaluator(silent, recorder, timeout_seconds=20, unresponsive_seconds=0.2)
    result = (await run(ev)).results[0]
    assert time.monotonic() - start < 3.0
    (attempt,) = recorder.attempts(result.rollout_id or "")
    assert attempt.status == "unresponsive"
    assert "unresponsive_seconds=0.2" in (attempt.error or "")


async def test_heartbeats_and_slow_lm_calls_keep_an_agent_responsive() -> None:
    @agent
    async def busy(task: dict[str, Any], lm: Any) -> str:
        for _ in range(8):  # 0.4 s of work, with a heartbeat every 0.05 s
            await asyncio.sleep(0.05)
            heartbeat()
        return await lm.acall(task["word"])  # one LM call of 0.5 s

    recorder = MemoryRecorder()
    ev = evaluator(busy, recorder, lm=echo_lm(delay_s=0.5), unresponsive_seconds=0.2)
    result = (await run(ev)).results[0]
    assert result.error is None
    assert result.score == 1.0


async def test_an_agent_that_calls_sys_exit_fails_its_rollout_not_the_job() -> None:
    @agent
    def exits(task: dict[str, Any]) -> str:
        raise SystemExit(3)

    @agent
    async def exits_async(task: dict[str, Any]) -> str:
        raise SystemExit(4)

    for fn, code in ((exits, 3), (exits_async, 4)):
        recorder = MemoryRecorder()
        results = (await run(evaluator(fn, recorder), n=3)).results
        assert [r.rollout_status for r in results] == ["failed"] * 3
        assert f"the agent called sys.exit({code})" in (results[0].error or "")


async def test_one_crashing_example_does_not_disturb_the_others() -> None:
    @agent
    async def sometimes(task: dict[str, Any], lm: Any) -> str:
        if task["word"] == "w2":
            raise RuntimeError("segfault in the tool")
        if task["word"] == "w4":
            await asyncio.sleep(30)
        return await lm.acall(task["word"])

    recorder = MemoryRecorder()
    results = (await run(evaluator(sometimes, recorder, timeout_seconds=0.3), n=6)).results
    assert [r.score for r in results] == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert [a.status for a in recorder.attempts(results[4].rollout_id or "")] == ["timeout"]


async def test_cancelling_the_evaluation_cancels_the_running_rollouts() -> None:
    started = asyncio.Event()

    @agent
    async def slow(task: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(30)
        return "x"

    recorder = MemoryRecorder()
    task = asyncio.ensure_future(run(evaluator(slow, recorder), n=2))
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rollouts = recorder.rollouts()
    assert rollouts
    assert {r.status for r in rollouts} == {"cancelled"}
    for rollout in rollouts:
        assert [a.status for a in recorder.attempts(rollout.id)] == ["failed"]


class JitterLM(FakeLM):
    """Echo with a random delay, so concurrent rollouts interleave."""

    def __init__(self, seed: int) -> None:
        super().__init__(lambda m: m[-1]["content"].upper())
        self.rng = random.Random(seed)

    async def complete(self, messages: Sequence[ChatMessage], **kw: Any) -> Completion:
        await asyncio.sleep(self.rng.uniform(0.0, 0.01))
        return await super().complete(messages, **kw)


async def test_spans_are_ordered_and_complete_under_32_concurrent_rollouts() -> None:
    steps = 3

    @agent
    async def chatty(task: dict[str, Any], lm: Any) -> str:
        reply = ""
        for step in range(steps):
            emit_message(f"step {step}")
            await asyncio.sleep(random.uniform(0.0, 0.005))
            reply = await lm.acall(f"{task['word']} {step}")
            emit_reward(step / steps)
        return reply.split()[0].lower()

    recorder = MemoryRecorder()
    ev = evaluator(chatty, recorder, lm=JitterLM(7), concurrency=32)
    ev.tracing.processor.max_batch = 16
    results = (await run(ev, n=32)).results
    assert [r.score for r in results] == [1.0] * 32
    per_rollout = 1 + steps * 3  # root + (message, chat, reward) per step
    assert recorder.batches < 32 * per_rollout / 4  # written in batches
    for result in results:
        assert result.span_count == per_rollout
        spans = recorder.spans(result.rollout_id)
        assert len(spans) == per_rollout
        assert [s.sequence for s in spans] == list(range(per_rollout))
        root = spans[0]
        assert root.name == sc.ROLLOUT_SPAN
        assert root.parent_id is None
        assert {s.trace_id for s in spans} == {root.trace_id}
        assert all(s.parent_id == root.span_id for s in spans[1:])
        assert all(s.start_time <= s.end_time for s in spans)
        kinds = [s.name.split()[0] for s in spans[1:]]
        assert kinds == [sc.MESSAGE_SPAN, "chat", sc.REWARD_SPAN] * steps
        texts = [s.attributes[sc.MESSAGE_TEXT] for s in spans if s.name == sc.MESSAGE_SPAN]
        assert texts == [f"step {i}" for i in range(steps)]
        word = result.output
        prompts = [s.attributes[sc.GEN_AI_INPUT_MESSAGES] for s in spans if s.name == "chat fake"]
        assert all(word in p for p in prompts)
