"""An RL job of `emery train --no-poll` SIGKILLed after its step-2 checkpoint and resumed
with `emery jobs resume`: the steps (and the small GRPO settings) both RL integration tests
share."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from emery.store import SQLiteStore
from emery.training.rl_job import RLResult

from .cli_support import emery_json

SMALL_GRPO = {
    "max_steps": 3,
    "save_steps": 2,  # the checkpoint the tests kill the job after
    "prompts_per_step": 2,
    "num_generations": 2,
    "max_completion_length": 12,
    "learning_rate": 1e-4,
    "threads": 1,
}
"""3 GRPO steps of 2 examples x 2 generations of at most 12 tokens, on one thread."""


@dataclass
class KilledJob:
    job_id: str
    store: SQLiteStore
    store_path: Path
    killed_at: int
    """The last step whose reward was recorded before the kill."""


def kill_after_checkpoint(tmp_path: Path, env: dict[str, str], *, timeout_s: float) -> KilledJob:
    """Start ``tmp_path/job.json`` (an RL job) in the background, SIGKILL its worker once
    checkpoint 2 is on disk, and wait until the job is resumable."""
    store_path = tmp_path / "emery.db"
    train = ["train", "job.json", "--no-poll", "--json", "--store", str(store_path)]
    started = emery_json(train, env, tmp_path)
    job_id, pid = started["job_id"], started["pid"]
    store = SQLiteStore(store_path)
    assert store.get_job(job_id).kind == "rl"
    checkpoint = tmp_path / "work" / "rl" / job_id / "checkpoints" / "checkpoint-2"
    deadline = time.monotonic() + timeout_s
    while not (checkpoint / "trainer_state.json").is_file():
        assert not store.get_job(job_id).terminal, store.get_job(job_id).error
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.2)
    time.sleep(0.5)  # the checkpoint_saved event follows the folder
    os.kill(pid, signal.SIGKILL)
    rewards = store.list_events(job_id, kinds=["train_reward"])
    killed_at = max(e.data["step"] for e in rewards)
    assert killed_at in (2, 3)
    assert all(0.0 <= e.data["reward"] <= 1.0 for e in rewards)
    deadline = time.monotonic() + 10
    while store.get_job(job_id).state != "running" or _alive(pid):
        assert time.monotonic() < deadline, "the killed worker's job is not resumable"
        time.sleep(0.2)
    return KilledJob(job_id, store, store_path, killed_at)


def resume_to_the_end(killed: KilledJob, env: dict[str, str], cwd: Path) -> RLResult:
    """``emery jobs resume`` the killed job: it succeeds from checkpoint 2, runs only step
    3 again, and ends with a tuned model scored on test."""
    resume = ["jobs", "resume", killed.job_id, "--json", "--store", str(killed.store_path)]
    assert emery_json(resume, env, cwd)["state"] == "succeeded"
    result = RLResult.model_validate(killed.store.get_job(killed.job_id).result)
    assert result.training.resumed_from_step == 2
    assert result.training.steps == 3
    events = killed.store.list_events(killed.job_id, kinds=["train_reward"])
    steps = [e.data["step"] for e in events]
    assert steps[: killed.killed_at] == list(range(1, killed.killed_at + 1))
    assert steps[killed.killed_at :] == [3]
    assert result.model == f"local/smollm2-135m+{killed.job_id}"
    assert Path(result.adapter_path).is_file()
    assert result.test is not None
    assert result.test.base.n == result.test.tuned.n == 2
    return result


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child of this process stays a zombie until reaped
    status = Path(f"/proc/{pid}/stat")
    return status.is_file() and status.read_text().split()[2] != "Z"
