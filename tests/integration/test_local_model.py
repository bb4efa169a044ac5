"""The real embedded model (SmolLM2-135M via llama.cpp) and a real SQLite cache file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emery.config import parse_config
from emery.jobs import evaluate_config

pytestmark = pytest.mark.integration

MODEL = "local/smollm2-135m"


def _config(workdir: Path) -> dict[str, object]:
    return {
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 0, "n_test": 5},
        "lm": {"task": {"model": MODEL, "max_tokens": 48, "n_ctx": 1024}},
        "runtime": {"workdir": str(workdir), "concurrency": 4},
    }


async def test_evaluates_builtin_task_and_reruns_from_cache(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path / ".emery"))

    first = await evaluate_config(config, split="test")

    assert first.summary.n == 5
    assert len(first.results) == 5
    task = first.usage["task"]
    assert task.calls == 5
    assert task.cache_hits == 0
    assert task.prompt_tokens > 0
    assert task.completion_tokens > 0
    for result in first.results:
        assert 0.0 <= result.score <= 1.0
        assert result.calls
        assert result.calls[0].reply.strip()
    assert (tmp_path / ".emery" / "lm_cache.db").is_file()

    second = await evaluate_config(config, split="test")

    assert second.usage["task"].cache_hits == 5
    assert second.usage["task"].prompt_tokens == 0
    assert [r.score for r in second.results] == [r.score for r in first.results]
    assert [r.calls[0].reply for r in second.results] == [r.calls[0].reply for r in first.results]


def test_cli_eval_on_local_model_writes_result(tmp_path: Path) -> None:
    output = tmp_path / "result.json"
    config = tmp_path / "job.toml"
    config.write_text(
        f"""
[dataset]
task = "intent"
n_train = 0
n_val = 0
n_test = 5

[lm.task]
model = "{MODEL}"
max_tokens = 24
n_ctx = 1024

[runtime]
workdir = "{tmp_path / ".emery"}"
"""
    )
    completed = subprocess.run(
        [sys.executable, "-m", "emery", "eval", str(config), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(output.read_text())
    assert report["summary"]["n"] == 5
    assert len(report["results"]) == 5
    assert "intent" in completed.stdout
