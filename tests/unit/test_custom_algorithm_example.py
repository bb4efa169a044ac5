"""``examples/custom_algorithm``: an algorithm named by ``module:attr`` trains, pauses,
resumes in a new CLI process (which rebuilds it from the stored config) and reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jobs_support as js
import pytest

from emery.store import SQLiteStore

EXAMPLE = js.REPO / "examples" / "custom_algorithm"
SCRIPTED = [
    "--set",
    "lm.task.model=python/jobs_support:careful_task_lm",
    "--set",
    "lm.proposer.model=python/jobs_support:reflection_lm",
    "--set",
    "algorithm.best_of_k.rounds=6",
    "--set",
    "job.budget.metric_calls=400",
]


def env(**extra: str) -> dict[str, str]:
    """The scripted models (``tests/unit``) and the example's module are importable."""
    base = js.worker_env(**extra)
    return {**base, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), base["PYTHONPATH"]])}


def emery(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emery", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_the_example_trains_pauses_resumes_and_reports_from_the_cli(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "job.toml", tmp_path / "job.toml")
    train = subprocess.Popen(
        [sys.executable, "-m", "emery", "train", "job.toml", *SCRIPTED, "--stream-format", "none"],
        cwd=tmp_path,
        env=env(**{js.DELAY_ENV: "0.2"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = tmp_path / ".emery" / "emery.db"

    def checkpointed() -> str | None:
        """The job's id once it has a checkpoint; a failure if ``train`` ended before."""
        if train.poll() is not None:
            pytest.fail(f"emery train ended early: {train.communicate()[1]}")
        jobs = SQLiteStore(db).list_jobs().items if db.exists() else []
        return jobs[0].id if jobs and SQLiteStore(db).get_checkpoint(jobs[0].id) else None

    try:
        job_id = js.wait_until(checkpointed, timeout=60)
        paused = emery(tmp_path, "jobs", "pause", job_id)
        assert paused.returncode == 0, paused.stderr
        train.communicate(timeout=60)
    finally:
        train.kill()
    store = SQLiteStore(db)
    job = store.get_job(job_id)
    assert job.state == "paused"
    assert job.algorithm == "best_of_k:SPEC"
    rounds_at_pause = store.get_checkpoint(job_id).state["iteration"]
    assert rounds_at_pause < 6

    resumed = emery(tmp_path, "jobs", "resume", job_id, "--stream-format", "none")
    assert resumed.returncode == 0, resumed.stderr
    assert store.get_job(job_id).state == "succeeded"

    reported = emery(tmp_path, "report", job_id, "--json")
    assert reported.returncode == 0, reported.stderr
    report = json.loads(reported.stdout)
    assert (report["algorithm"], report["stop_reason"]) == ("best_of_k:SPEC", "6 rounds done")
    assert report["best_val"] > report["baseline_val"]
    assert "carefully" in report["best_candidate"]["components"]["solve"]
    operations = {c["operation"] for c in report["top_candidates"]}
    assert "best_of_k" in operations


def test_the_example_imports_only_emery_plugin() -> None:
    """A plug-in needs nothing of emery's inner modules: ``emery.plugin`` is its surface."""
    import ast

    source = (js.REPO / "examples" / "custom_algorithm" / "best_of_k.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    assert {name for name in imported if name.split(".")[0] == "emery"} == {"emery.plugin"}
