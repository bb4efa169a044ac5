"""`emery train` end to end on the real embedded model (SmolLM2-135M) and a SQLite file."""

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
name = "local-smoke"
algorithm = "baseline"

[job.budget]
metric_calls = 20

[dataset]
task = "intent"
n_train = 0
n_val = 3
n_test = 2

[lm.task]
model = "local/smollm2-135m"
max_tokens = 16
n_ctx = 1024

[runtime]
concurrency = 2

[algorithm.baseline]
candidates = [{classify = "Reply with exactly one intent label and nothing else."}]
"""


def emery(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emery", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_train_a_job_on_the_local_model_and_read_it_back(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(CONFIG)
    trained = emery(tmp_path, "train", "--json")
    assert trained.returncode == 0, trained.stderr
    payload = json.loads(trained.stdout)
    assert payload["state"] == "succeeded"
    result = payload["result"]
    assert result["dataset_sizes"] == {"train": 0, "val": 3, "test": 2}
    assert result["budget"]["metric_calls"] == 6  # seed and one candidate on 3 val examples
    assert result["baseline_test"]["n"] == 2
    assert result["usage"]["task"]["prompt_tokens"] > 0
    assert Path(result["files"]["json"]).is_file()
    job_id = payload["job_id"]

    store = SQLiteStore(tmp_path / ".emery" / "emery.db")
    assert store.count_evaluations(job_id) >= 8
    assert store.list_candidates(job_id).total == 2

    report = emery(tmp_path, "report", job_id)
    assert report.returncode == 0, report.stderr
    assert "Best candidate" in report.stdout

    again = emery(tmp_path, "train", "job.toml", "--new", "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["result"]
    assert second["budget"]["metric_calls"] == 0  # every evaluation came from the store
    assert second["best_val"] == result["best_val"]
    assert second["best_test"] == result["best_test"]
