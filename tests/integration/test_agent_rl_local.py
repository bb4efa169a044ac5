"""An RL job on a function agent with two LM calls per episode, on the real SmolLM2-135M:
`emery train --no-poll` runs groups of episodes on the local model (the policy served as its
llama.cpp LoRA, token capture on) and GRPO steps over every call, checkpoints; the SIGKILLed
worker's job resumes (`emery jobs resume`) from its checkpoint step, then writes the GGUF
adapter and scores base vs tuned on test."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from emery.store import SQLiteStore
from emery.store.records import RolloutFilter
from emery.tracing.store_recorder import load_spans
from emery.training.rl_job import RLResult

from .cli_support import emery_json

pytest.importorskip("torch")
pytest.importorskip("peft")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

AGENT = '''
from emery.systems.function_agent import agent


@agent
def solve(task, lm):
    """Two calls: a thought, then the answer."""
    thought = lm("Question: " + task["question"] + "\\nThink in one short sentence.")
    return lm("Question: " + task["question"] + "\\nThought: " + thought + "\\nAnswer:")
'''


def _config(tmp_path: Path) -> dict[str, Any]:
    """3 GRPO steps of 2 examples x 2 episodes x 2 calls of 12 tokens; a checkpoint at 2."""
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
        "system": {"kind": "function_agent", "agent": "two_calls:solve"},
        "verifier": {"kind": "regex", "pattern": r"\d"},
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        # one llama.cpp thread: two spin on a busy 2-core machine (8 calls: 122 s against 9)
        "lm": {
            "task": {"model": "local/smollm2-135m", "max_tokens": 12, "n_ctx": 512, "n_threads": 1}
        },
        "runtime": {"workdir": str(tmp_path / "work"), "concurrency": 2},
    }


def test_an_rl_job_on_a_two_call_agent_trains_resumes_and_is_scored(tmp_path: Path) -> None:
    (tmp_path / "two_calls.py").write_text(AGENT)
    (tmp_path / "job.json").write_text(json.dumps(_config(tmp_path)))
    store_path = tmp_path / "emery.db"
    env = os.environ | {"EMERY_ADAPTER_DIR": str(tmp_path / "adapters")}
    train = ["train", "job.json", "--no-poll", "--json", "--store", str(store_path)]
    started = emery_json(train, env, tmp_path)
    job_id, pid = started["job_id"], started["pid"]
    store = SQLiteStore(store_path)
    assert store.get_job(job_id).kind == "rl"
    checkpoint = tmp_path / "work" / "rl" / job_id / "checkpoints" / "checkpoint-2"
    deadline = time.monotonic() + 300
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
    assert rewards[0].data["kl"] == 0.0  # the adapter starts at zero: the policy is the base
    deadline = time.monotonic() + 10
    while store.get_job(job_id).state != "running" or _alive(pid):
        assert time.monotonic() < deadline, "the killed worker's job is not resumable"
        time.sleep(0.2)

    resume = ["jobs", "resume", job_id, "--json", "--store", str(store_path)]
    assert emery_json(resume, env, tmp_path)["state"] == "succeeded"
    result = RLResult.model_validate(store.get_job(job_id).result)
    assert result.training.resumed_from_step == 2
    assert result.training.steps == 3
    steps = [e.data["step"] for e in store.list_events(job_id, kinds=["train_reward"])]
    assert steps[:killed_at] == list(range(1, killed_at + 1))
    assert steps[killed_at:] == [3]
    # every episode is a stored rollout of the job with both calls' tokens on its spans
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id, split="train"), limit=100).items
    assert len(rollouts) >= 3 * 2 * 2
    spans = load_spans(store, rollouts[0].id)
    chats = [s for s in spans if "emery.lm.completion_token_ids" in s.attributes]
    assert len(chats) == 2
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
    status = Path(f"/proc/{pid}/stat")
    return status.is_file() and status.read_text().split()[2] != "Z"
