"""An RL job on the real SmolLM2-135M: `emery train --no-poll` runs GRPO in a background
worker on a scripted reward (a completion with a digit scores 1), logs the mean reward of
each step, checkpoints; the SIGKILLed worker's job resumes (`emery jobs resume`) from its
checkpoint step, then writes the GGUF adapter and scores base vs tuned on test."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from emery.store import SQLiteStore
from emery.training.rl_job import RLResult

from .cli_support import emery_json

pytest.importorskip("torch")
pytest.importorskip("trl")

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _config(tmp_path: Path) -> dict[str, Any]:
    """3 GRPO steps of 2 prompts x 2 completions of 12 tokens; a checkpoint at step 2."""
    stage = {
        "name": "count",
        "instruction": "Answer with a number.",
        "messages": [{"template": "{question}"}],
        "parser": {"kind": "raw"},
    }
    return {
        "job": {"type": "rl", "seed": 1},
        "rl": {
            "max_steps": 3,
            "save_steps": 2,
            "prompts_per_step": 2,
            "num_generations": 2,
            "max_completion_length": 12,
            "learning_rate": 1e-4,
            "threads": 1,
        },
        "system": {"kind": "prompt_program", "stages": [stage]},
        "verifier": {"kind": "regex", "pattern": r"\d"},
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m", "max_tokens": 12, "n_ctx": 512}},
        "runtime": {"workdir": str(tmp_path / "work"), "concurrency": 2},
    }


def test_a_sigkilled_rl_job_resumes_from_its_checkpoint_and_is_scored(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps(_config(tmp_path)))
    store_path = tmp_path / "emery.db"
    env = os.environ | {"EMERY_ADAPTER_DIR": str(tmp_path / "adapters")}
    train = ["train", "job.json", "--no-poll", "--json", "--store", str(store_path)]
    started = emery_json(train, env, tmp_path)
    job_id, pid = started["job_id"], started["pid"]
    store = SQLiteStore(store_path)
    assert store.get_job(job_id).kind == "rl"
    checkpoint = tmp_path / "work" / "rl" / job_id / "checkpoints" / "checkpoint-2"
    deadline = time.monotonic() + 240
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
    assert [e.data["iteration"] for e in store.list_events(job_id, kinds=["checkpoint_saved"])][
        :1
    ] == [2]
    deadline = time.monotonic() + 10
    while store.get_job(job_id).state != "running" or _alive(pid):
        assert time.monotonic() < deadline, "the killed worker's job is not resumable"
        time.sleep(0.2)

    resume = ["jobs", "resume", job_id, "--json", "--store", str(store_path)]
    assert emery_json(resume, env, tmp_path)["state"] == "succeeded"
    job = store.get_job(job_id)
    resumed = store.list_events(job_id, kinds=["resumed"])
    assert [e.data["reason"].split(":")[0] for e in resumed] == ["recovered"]
    result = RLResult.model_validate(job.result)
    assert result.training.resumed_from_step == 2
    assert result.training.steps == 3
    steps = [e.data["step"] for e in store.list_events(job_id, kinds=["train_reward"])]
    assert steps[:killed_at] == list(range(1, killed_at + 1))
    assert steps[killed_at:] == [3]
    losses = [e.data["step"] for e in store.list_events(job_id, kinds=["train_loss"])]
    assert losses[-1] == 3
    assert result.training.last_reward is not None
    assert result.model == f"local/smollm2-135m+{job_id}"
    assert Path(result.adapter_path).is_file()
    assert result.test is not None
    assert result.test.base.n == result.test.tuned.n == 2
    print(result.report())  # the measured figures, with -s


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child of this process stays a zombie until reaped
    status = Path(f"/proc/{pid}/stat")
    return status.is_file() and status.read_text().split()[2] != "Z"
