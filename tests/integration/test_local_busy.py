"""Three `emery train` jobs at once on the real embedded model (SmolLM2-135M), each with
one decoder slot for two concurrent rollouts and a 1 s ``timeout_s``: rollouts queue for
the slot and decode on cores shared three ways, and none of them times out for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emery.store import SQLiteStore

pytestmark = pytest.mark.integration

CONFIG = """
[job]
name = "busy"
algorithm = "baseline"

[job.budget]
metric_calls = 8

[dataset]
task = "intent"
n_train = 0
n_val = 2
n_test = 0

[lm.task]
model = "local/smollm2-135m"
max_tokens = 12
n_ctx = 1024
n_parallel = 1
n_threads = 1
cache = false

[runtime]
concurrency = 2
timeout_s = 1

[algorithm.baseline]
candidates = [{classify = "Reply with exactly one intent label and nothing else."}]
"""


def test_three_local_jobs_at_once_have_no_rollout_timed_out_for_waiting(tmp_path: Path) -> None:
    folders = [tmp_path / f"job{i}" for i in range(3)]
    jobs = []
    for folder in folders:
        folder.mkdir()
        (folder / "job.toml").write_text(CONFIG)
        jobs.append(
            subprocess.Popen(
                [sys.executable, "-m", "emery", "train", "--json"],
                cwd=folder,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [job.communicate(timeout=300) for job in jobs]

    for folder, job, (stdout, stderr) in zip(folders, jobs, outputs, strict=True):
        assert job.returncode == 0, stderr + stdout[:2000]
        assert json.loads(stdout)["state"] == "succeeded"
        store = SQLiteStore(folder / ".emery" / "emery.db")
        rollouts = store.list_rollouts(limit=None).items
        assert len(rollouts) >= 4  # the seed and the candidate on 2 val examples
        attempts = [a for r in rollouts for a in store.list_attempts(r.id)]
        assert [a.error for a in attempts if a.status == "timeout"] == []
        assert {r.status for r in rollouts} == {"succeeded"}
