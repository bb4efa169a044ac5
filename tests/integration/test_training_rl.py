"""An RL job on the real SmolLM2-135M: `emery train --no-poll` runs GRPO in a background
worker on a scripted reward (a completion with a digit scores 1), logs the mean reward of
each step, checkpoints; the SIGKILLed worker's job resumes (`emery jobs resume`) from its
checkpoint step, then writes the GGUF adapter and scores base vs tuned on test."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .rl_kill_support import SMALL_GRPO, kill_after_checkpoint, resume_to_the_end

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
        "rl": dict(SMALL_GRPO),
        "system": {"kind": "prompt_program", "stages": [stage]},
        "verifier": {"kind": "regex", "pattern": r"\d"},
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m", "max_tokens": 12, "n_ctx": 512}},
        "runtime": {"workdir": str(tmp_path / "work"), "concurrency": 2},
    }


def test_a_sigkilled_rl_job_resumes_from_its_checkpoint_and_is_scored(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps(_config(tmp_path)))
    env = os.environ | {"EMERY_ADAPTER_DIR": str(tmp_path / "adapters")}
    killed = kill_after_checkpoint(tmp_path, env, timeout_s=240)
    store, job_id = killed.store, killed.job_id
    saved = store.list_events(job_id, kinds=["checkpoint_saved"])
    assert [e.data["iteration"] for e in saved][:1] == [2]

    result = resume_to_the_end(killed, env, tmp_path)
    resumed = store.list_events(job_id, kinds=["resumed"])
    assert [e.data["reason"].split(":")[0] for e in resumed] == ["recovered"]
    losses = [e.data["step"] for e in store.list_events(job_id, kinds=["train_loss"])]
    assert losses[-1] == 3
    assert result.training.last_reward is not None
    print(result.report())  # the measured figures, with -s
