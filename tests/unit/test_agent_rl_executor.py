"""Agent RL episodes on the job's executor: the groups of a step go to the executor, a
worker rebuilt from the job's stored config (``workers.runner.build_job_work``) samples
each call from the policy of its episode's step, and the rows are read back from the
store. Scripted models (the local model's place taken by ``FakeLM``), no torch."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from jobs_support import gold

from emery.config import parse_config
from emery.core.errors import EmeryError
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Rollout
from emery.evaluation.executor import Done, RolloutHost
from emery.jobs.training_engine import TrainingEngine
from emery.lm import FakeLM
from emery.store import SQLiteStore
from emery.store.protocol import Store
from emery.store.records import NewJob
from emery.systems.function_agent import agent
from emery.training import agent_episodes as episodes_module
from emery.training import agent_policy, agent_rl, rl_job
from emery.training.agent_episodes import AgentEpisodes
from emery.training.agent_policy import parse_episode, policy_gguf
from emery.training.trainer import TrainingHooks
from emery.workers.queue_executor import QueueExecutor
from emery.workers.runner import RolloutWorker, build_job_work


@agent
def plan_then_answer(task: dict[str, Any], lm: Any) -> str:
    """Two LM calls; the verifier scores the answer."""
    plan: str = lm(f"plan for {task['question']}")
    answer: str = lm(f"{plan}; answer: {task['question']}")
    return answer


def _config(tmp_path: Path, **runtime: Any) -> dict[str, Any]:
    return {
        "job": {"type": "rl", "seed": 2},
        "rl": {"max_steps": 3, "prompts_per_step": 2, "num_generations": 3},
        "system": {
            "kind": "function_agent",
            "agent": "test_agent_rl_executor:plan_then_answer",
            "instrument_openai": False,  # importing openai costs ~2 s; the agent calls lm
        },
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m"}},
        "verifier": {"kind": "numeric"},
        "runtime": {"workdir": str(tmp_path / "work"), **runtime},
    }


def _job(store: Store, tmp_path: Path, **runtime: Any) -> str:
    config = _config(tmp_path, **runtime)
    store.create_job(
        NewJob(
            id="j-agent",
            name="agent-rl",
            kind="rl",
            algorithm="rl",
            config=config,
            resolved_config=config,
            base_dir=str(tmp_path),
        )
    )
    return "j-agent"


class Policies:
    """Stands in for the local model in workers: which (step, LoRA) each step model was
    built with; answers alternate right and wrong, so groups have variance."""

    def __init__(self) -> None:
        self.built: list[tuple[int, Path | None]] = []

    def __call__(self, lm: Any, seed: int, step: int, lora: Path | None) -> FakeLM:
        self.built.append((step, lora))
        right = itertools.cycle([True, False])

        def reply(messages: Any) -> str:
            text = str(messages[-1]["content"])
            if text.startswith("plan"):
                return "think it over"
            answer = gold(text.split("; answer: ", 1)[1])
            return f"Answer: {answer if next(right) else -1}"

        return FakeLM(reply)


@pytest.fixture
def policies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Policies:
    """Workers' step models scripted; the job writes a stub GGUF for each step's policy."""
    built = Policies()
    monkeypatch.setattr(agent_policy, "step_model", built)
    monkeypatch.setattr(episodes_module, "installed_path", lambda name: tmp_path / "base.gguf")
    monkeypatch.setattr(rl_job, "installed_path", lambda name: tmp_path / "base.gguf")

    def write_gguf(adapter: Path, base: Path, target: Path) -> int:
        target.write_text(f"lora of {adapter.name}")
        return 1

    monkeypatch.setattr(episodes_module, "write_gguf_adapter", write_gguf)
    return built


class WorkerExecutor:
    """A remote executor in miniature: each episode runs on a worker's evaluator rebuilt
    from the job's stored config (as a Ray worker's is), in a rollout the job made."""

    chunk = None

    def __init__(self, store: Store, job_id: str) -> None:
        self.work = build_job_work(store, job_id, "worker-1", queued=False)
        self.received: list[list[str]] = []

    def lanes(self, concurrency: int) -> int:
        return 1

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        self.received.append([example.id for example in examples])
        for index, example in enumerate(examples):
            rollout: Rollout = host.rollout_maker.new_rollout(candidate, example, split)
            result = await self.work.evaluator.run_one(candidate, example, split, rollout=rollout)
            done(index, result)

    def close(self) -> None:
        self.work.close()


def _never(policy: Path | None, step: int) -> Any:
    raise AssertionError("the job process must not load a model: its episodes run elsewhere")


def _episodes(store: Store, tmp_path: Path, job_id: str, executor: Any) -> AgentEpisodes:
    config = parse_config(_config(tmp_path))
    episodes = rl_job.agent_episodes(store, config, tmp_path, job_id, executor)
    assert episodes is not None
    episodes.model = _never
    return episodes


def test_a_step_sends_its_groups_to_the_executor_and_reads_the_rows_back(
    tmp_path: Path, policies: Policies
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path, executor="runners")
    executor = WorkerExecutor(store, job_id)
    episodes = _episodes(store, tmp_path, job_id, executor)
    drawn = [example.id for example in episodes.draw(1)]
    rows = episodes.rows(1, None)
    assert executor.received == [[f"{e}@1.{n}" for e in drawn for n in range(3)]]
    assert policies.built == [(1, None)]  # step 1: the base model, in the worker
    assert len(rows) == 2 * 3 * 2  # examples x episodes x calls
    assert {row.group_id for row in rows} == set(drawn)
    assert all(row.completion_token_ids and row.completion_logprobs for row in rows)
    assert {row.reward for row in rows} == {0.0, 1.0}


def test_a_later_step_samples_from_its_policy_written_for_the_workers(
    tmp_path: Path, policies: Policies
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path, executor="runners")
    executor = WorkerExecutor(store, job_id)
    episodes = _episodes(store, tmp_path, job_id, executor)
    adapter = tmp_path / "policy"
    episodes.rows(2, adapter)
    lora = policy_gguf(episodes.run_dir, 2)
    assert policies.built == [(2, lora)]
    assert lora.read_text() == "lora of policy"
    episodes.rows(3, adapter)
    assert not lora.exists()  # the older step's policy is removed
    assert policies.built[-1] == (3, policy_gguf(episodes.run_dir, 3))


def test_a_worker_that_cannot_see_the_policy_stops_the_step_in_one_line(
    tmp_path: Path, policies: Policies, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path, executor="runners")
    executor = WorkerExecutor(store, job_id)
    episodes = _episodes(store, tmp_path, job_id, executor)
    monkeypatch.setattr(episodes, "write_policy", lambda step, policy: None)  # not shared
    with pytest.raises(EmeryError, match="every one of step 2's 6 episodes failed") as caught:
        episodes.rows(2, tmp_path / "policy")
    assert "policy-2.gguf is not here" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert policies.built == []


def test_a_runner_finds_the_example_of_an_episode(tmp_path: Path, policies: Policies) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    work = build_job_work(store, _job(store, tmp_path), "w")
    first = next(iter(work.examples.values()))
    rollout = Rollout(job_id="j-agent", example_id=f"{first.id}@4.2", split="train")
    episode = work.example(rollout)
    assert (episode.id, episode.input, episode.expected) == (
        f"{first.id}@4.2",
        first.input,
        first.expected,
    )
    assert parse_episode(episode.id) == (first.id, 4, 2)
    with pytest.raises(EmeryError, match=r"no train example 'nothing@4\.2'"):
        work.example(rollout.model_copy(update={"example_id": "nothing@4.2"}))


def _run_runner(path: Path, stop: threading.Event) -> None:
    worker = RolloutWorker(SQLiteStore(path), job_id="j-agent", concurrency=2, poll_s=0.01)

    async def until_stopped() -> None:
        task = asyncio.ensure_future(worker.run())
        while not stop.is_set():
            await asyncio.sleep(0.01)
        worker.stop()
        await task

    asyncio.run(until_stopped())


def test_on_runners_a_repeated_step_takes_its_finished_episodes_again(
    tmp_path: Path, policies: Policies
) -> None:
    """The queue path end to end: the episodes are claimed by a runner (rebuilt from the
    stored job); a resumed job repeating the step gets the same rows without new episodes."""
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = _job(store, tmp_path, executor="runners")
    store.transition(job_id, "queued")
    store.transition(job_id, "running")  # runners claim the rollouts of running jobs
    stop = threading.Event()
    runner = threading.Thread(target=_run_runner, args=(path, stop))
    runner.start()
    try:
        queue = QueueExecutor(store, job_id=job_id, lease_s=30.0, poll_s=0.01, runner_wait_s=10)
        first = _episodes(store, tmp_path, job_id, queue).rows(1, None)
        again = QueueExecutor(SQLiteStore(path), job_id=job_id, lease_s=30.0, runner_wait_s=10)
        repeated = _episodes(SQLiteStore(path), tmp_path, job_id, again).rows(1, None)
    finally:
        stop.set()
        runner.join(timeout=30)
    assert len(first) == 12
    assert [row.model_dump() for row in repeated] == [row.model_dump() for row in first]
    assert len(store.list_rollouts().items) == 6  # the repeat ran no episode again
    assert policies.built == [(1, None)]


def test_the_engine_gives_an_rl_job_its_executor_only_when_it_runs_elsewhere(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    engine = TrainingEngine(store, "j-agent", rl_job_kind())
    remote = engine._rollout_executor(parse_config(_config(tmp_path, executor="runners")))
    assert isinstance(remote, QueueExecutor)
    assert engine._rollout_executor(parse_config(_config(tmp_path))) is None
    sft = _config(tmp_path, executor="runners") | {"job": {"type": "sft"}}
    sft["sft"] = {"data": "chats.jsonl"}
    del sft["rl"]
    assert engine._rollout_executor(parse_config(sft)) is None


def rl_job_kind() -> Any:
    from emery.jobs.training_kinds import RL

    return RL


def test_the_rl_trainer_runs_its_episodes_on_the_executor_its_hooks_carry(
    tmp_path: Path, policies: Policies, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path, executor="runners")
    executor = WorkerExecutor(store, job_id)
    trained: list[Any] = []

    def trainer(base: Any, settings: Any, source: AgentEpisodes, run_dir: Path, **kw: Any) -> Any:
        source.model = _never
        trained.extend(source.rows(1, None))
        return None, None

    monkeypatch.setattr(agent_rl, "train_agent_rl", trainer)
    hooks = TrainingHooks(lambda *a: None, lambda step: None, lambda: None, executor=executor)
    rl_job.train_rl_job(store, parse_config(_config(tmp_path)), tmp_path, job_id, hooks)
    assert len(executor.received) == 1  # the step's episodes went to the executor
    assert len(trained) == 12
