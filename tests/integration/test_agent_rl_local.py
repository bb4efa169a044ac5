"""An RL job on a function agent with two LM calls per episode, on the real SmolLM2-135M:
`emery train --no-poll` runs groups of episodes on the local model (the policy served as its
llama.cpp LoRA, token capture on) and GRPO steps over every call, checkpoints; the SIGKILLed
worker's job resumes (`emery jobs resume`) from its checkpoint step, then writes the GGUF
adapter and scores base vs tuned on test."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from emery.store.records import RolloutFilter
from emery.tracing.store_recorder import load_spans

from .rl_kill_support import SMALL_GRPO, kill_after_checkpoint, resume_to_the_end

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
        "rl": dict(SMALL_GRPO),
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
    env = os.environ | {"EMERY_ADAPTER_DIR": str(tmp_path / "adapters")}
    killed = kill_after_checkpoint(tmp_path, env, timeout_s=300)
    store, job_id = killed.store, killed.job_id
    rewards = store.list_events(job_id, kinds=["train_reward"])
    assert rewards[0].data["kl"] == 0.0  # the adapter starts at zero: the policy is the base

    result = resume_to_the_end(killed, env, tmp_path)
    # every episode is a stored rollout of the job with both calls' tokens on its spans
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id, split="train"), limit=100).items
    assert len(rollouts) >= 3 * 2 * 2
    spans = load_spans(store, rollouts[0].id)
    chats = [s for s in spans if "emery.lm.completion_token_ids" in s.attributes]
    assert len(chats) == 2
    print(result.report())  # the measured figures, with -s
