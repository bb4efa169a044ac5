"""An RL job on a two-call function agent whose episodes run on a local Ray (``executor =
"ray"``, one CPU), on the real SmolLM2-135M: each episode runs in a Ray worker that rebuilt
the job from its stored config and sampled from the policy of its step (step 2's written as
``policy-2.gguf``), its tokens recorded; the job trains both steps and writes its adapter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emery.store import SQLiteStore
from emery.store.records import RolloutFilter
from emery.tracing.store_recorder import load_spans

from .test_agent_rl_local import AGENT, _config

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'emery[ray]'")

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("ray")]


def test_an_agent_rl_job_runs_its_episodes_on_ray(tmp_path: Path) -> None:
    (tmp_path / "two_calls.py").write_text(AGENT)
    config = _config(tmp_path)
    config["rl"] |= {"max_steps": 2, "evaluate": False}
    config["runtime"] |= {"executor": "ray", "ray_cpus": 1}
    (tmp_path / "job.json").write_text(json.dumps(config))
    store_path = tmp_path / "emery.db"
    env = os.environ | {
        "EMERY_ADAPTER_DIR": str(tmp_path / "adapters"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    command = [sys.executable, "-m", "emery", "train", "job.json", "--store", str(store_path)]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    store = SQLiteStore(store_path)
    job = store.list_jobs().items[0]
    assert job.state == "succeeded"
    rollouts = store.list_rollouts(RolloutFilter(job_id=job.id), limit=None).items
    assert sorted({r.example_id.split("@")[1][0] for r in rollouts}) == ["1", "2"]
    assert len(rollouts) == 2 * 2 * 2  # steps x examples x episodes
    for rollout in rollouts:
        attempt = store.list_attempts(rollout.id)[-1]
        assert (attempt.worker_id or "").startswith("ray:")  # not the job's process
        spans = load_spans(store, rollout.id, attempt.id)
        chats = [s for s in spans if s.attributes.get("emery.lm.completion_token_ids")]
        assert len(chats) == 2
    run = tmp_path / "work" / "rl" / job.id
    assert (run / "policy-2.gguf").is_file()  # step 2's policy, as the workers read it
    assert [e.data["step"] for e in store.list_events(job.id, kinds=["train_reward"])] == [1, 2]
