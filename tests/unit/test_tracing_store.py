"""Rollouts, attempts and spans written to the store by ``StoreRecorder`` and read back."""

from __future__ import annotations

from typing import Any

from emery.core.models import Example
from emery.core.rollouts import Attempt
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.store import MemoryStore, RolloutFilter, StepWrite
from emery.store.records import NewJob
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import RolloutConfig, emit_reward
from emery.tracing import conventions as sc
from emery.tracing.adapters import to_messages
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.verifiers import ExactMatch


@agent
async def retried(task: dict[str, Any], lm: Any, rollout: Any) -> str:
    reply = await lm.acall(task["word"], system="Echo the word.")
    emit_reward(0.5)
    if rollout.attempt == 1:
        raise TimeoutError("the tool timed out")
    return reply


def new_job(store: MemoryStore) -> str:
    job = store.create_job(
        NewJob(id="job-1", name="t", algorithm="baseline", config={"dataset": {"task": "x"}})
    )
    return job.id


async def test_rollouts_attempts_and_spans_land_in_the_store() -> None:
    store = MemoryStore()
    job_id = new_job(store)
    system = FunctionAgent(retried, instrument_openai=False)
    ev = Evaluator(
        system,
        ExactMatch(),
        FakeLM(lambda m: m[-1]["content"]),
        rollouts=RolloutConfig(max_attempts=2, timeout_seconds=5),
        recorder=StoreRecorder(store, job_id),
        job_id=job_id,
    )
    examples = [Example(id=f"e{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(3)]
    result = await ev.evaluate(system.seed_candidate(), examples, "val")
    assert result.scores == [1.0, 1.0, 1.0]

    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id)).items
    assert len(rollouts) == 3
    for stored in rollouts:
        assert stored.status == "succeeded"
        assert stored.attempt_count == 2
        assert stored.config.max_attempts == 2
        assert stored.config.timeout_seconds == 5
        assert stored.score == 1.0
        assert stored.output == stored.input["word"]
        assert stored.split == "val"
        attempts = store.list_attempts(stored.id)
        assert [(a.number, a.status) for a in attempts] == [(1, "failed"), (2, "succeeded")]
        assert attempts[0].error == "TimeoutError: the tool timed out"
        assert attempts[0].id == f"{stored.id}:1"

    first = result.results[0]
    spans = load_spans(store, first.rollout_id or "")
    # Two attempts of (root, chat, reward), numbered per attempt.
    assert [(s.attempt_id.rsplit(":", 1)[1], s.sequence) for s in spans if s.attempt_id] == [
        ("1", 0), ("1", 1), ("1", 2), ("2", 0), ("2", 1), ("2", 2),
    ]  # fmt: skip
    assert [s.name for s in spans] == [sc.ROLLOUT_SPAN, "chat fake", sc.REWARD_SPAN] * 2
    assert spans[0].status == "error"
    assert spans[0].events[0].attributes[sc.EXCEPTION_TYPE] == "TimeoutError"
    assert spans[3].status == "ok"
    second_attempt = [s for s in spans if s.attempt_id == f"{first.rollout_id}:2"]
    assert to_messages(second_attempt) == [
        {"role": "system", "content": "Echo the word."},
        {"role": "user", "content": "w0"},
        {"role": "assistant", "content": "w0"},
    ]


async def test_the_engines_step_rows_do_not_overwrite_recorded_attempts() -> None:
    store = MemoryStore()
    job_id = new_job(store)

    @agent
    async def slow_then_ok(task: dict[str, Any], rollout: Any) -> str:
        if rollout.attempt == 1:
            raise RuntimeError("first try fails")
        return str(task["word"])

    system = FunctionAgent(slow_then_ok, instrument_openai=False)
    ev = Evaluator(
        system,
        ExactMatch(),
        FakeLM(["x"]),
        rollouts=RolloutConfig(max_attempts=2),
        recorder=StoreRecorder(store, job_id),
    )
    result = await ev.run_one(system.seed_candidate(), Example(id="e", input={"word": "w"}), "val")
    rid = result.rollout_id or ""
    # What the engine writes at the end of a step for the same rollout (insert-or-ignore).
    store.commit_step(
        job_id,
        StepWrite(attempts=[Attempt(rollout_id=rid, number=2, status="failed")]),
    )
    assert [a.status for a in store.list_attempts(rid)] == ["failed", "succeeded"]


async def test_a_broken_store_never_fails_a_rollout() -> None:
    class BrokenStore:
        def add_rollouts(self, records: Any) -> None:
            raise OSError("disk full")

        def add_attempt(self, record: Any) -> None:
            raise OSError("disk full")

        def add_spans(self, records: Any) -> None:
            raise OSError("disk full")

    @agent
    def echo(task: dict[str, Any]) -> str:
        return str(task["word"])

    system = FunctionAgent(echo, instrument_openai=False)
    ev = Evaluator(
        system,
        ExactMatch(),
        FakeLM(["x"]),
        recorder=StoreRecorder(BrokenStore()),  # type: ignore[arg-type]
    )
    result = await ev.run_one(
        system.seed_candidate(), Example(id="e", input={"word": "w"}, expected="w")
    )
    assert result.score == 1.0


async def test_a_batch_of_rollouts_is_stored_in_a_few_transactions() -> None:
    class CountingStore(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def add_traces(self, rollouts: Any, attempts: Any, spans: Any) -> None:
            self.calls.append("add_traces")
            super().add_traces(rollouts, attempts, spans)

        def add_rollouts(self, records: Any) -> None:
            self.calls.append("add_rollouts")
            super().add_rollouts(records)

    store = CountingStore()
    job_id = new_job(store)

    @agent
    async def echo(task: dict[str, Any], lm: Any) -> str:
        return str(await lm.acall(task["word"]))

    system = FunctionAgent(echo, instrument_openai=False)
    ev = Evaluator(
        system,
        ExactMatch(),
        FakeLM(lambda m: m[-1]["content"]),
        concurrency=8,
        recorder=StoreRecorder(store, job_id),
        job_id=job_id,
    )
    examples = [Example(id=f"e{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(40)]
    result = await ev.evaluate(system.seed_candidate(), examples, "val")
    assert result.mean == 1.0
    # every row is stored when evaluate returns, in far fewer writes than status changes
    assert 1 <= store.calls.count("add_traces") <= 3
    assert "add_rollouts" not in store.calls
    stored = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    assert len(stored) == 40
    assert {(r.status, r.score) for r in stored} == {("succeeded", 1.0)}
    assert all(len(load_spans(store, r.id)) == 2 for r in stored)  # root + chat
