"""The crash-safety contract: a job killed with SIGKILL at a random point and resumed ends
exactly like an uninterrupted run, and pays no rollout twice.

With a deterministic LM and a fixed seed, the resumed job has the same best candidate, the
same scores, the same events (its whole log minus the resume marker equals the
uninterrupted log), the same stored evaluations, and its models answered no request twice
beyond the ones in flight at the moment of the kill.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.jobs import create_job, run_job
from emery.jobs.ownership import is_stale
from emery.store import SQLiteStore
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

ITERATIONS = 14
CONCURRENCY = 4


def new_job(store: SqlStore, folder: Path) -> str:
    config = js.search_config(folder / ".emery", iterations=ITERATIONS, concurrency=CONCURRENCY)
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def evaluation_keys(store: SqlStore, job_id: str) -> Counter[tuple[str, str, str]]:
    return Counter(
        (e.result.candidate_id, e.result.example_id, e.result.split or "")
        for e in store.list_evaluations(limit=None).items
        if e.job_id == job_id
    )


def log_of(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.slow  # starts processes: make test runs it, make check does not
@pytest.mark.parametrize("trial", range(2))
def test_a_job_killed_at_a_random_point_resumes_to_the_same_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial: int
) -> None:
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    note = f"random kill point seed {seed}"

    reference_store = SQLiteStore(tmp_path / "reference.db")
    reference_calls = tmp_path / "reference-calls.log"
    monkeypatch.setenv(js.CALL_LOG_ENV, str(reference_calls))
    reference = run_job(reference_store, new_job(reference_store, tmp_path / "reference"))
    assert reference.state == "succeeded"

    path = tmp_path / "killed.db"
    store = SQLiteStore(path)
    job_id = new_job(store, tmp_path / "killed")
    calls = tmp_path / "killed-calls.log"
    worker = subprocess.Popen(
        js.worker_command(job_id, str(path)),
        env=js.worker_env(**{js.DELAY_ENV: "0.03", js.CALL_LOG_ENV: str(calls)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        after = rng.randint(2, 6)
        js.wait_until(
            lambda: (c := store.get_checkpoint(job_id)) is not None and c.number >= after,
            timeout=60,
        )
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        worker.kill()
    killed = store.get_job(job_id)
    assert killed.state == "running", note  # killed mid-run, not finished
    assert is_stale(killed), note
    killed_at = store.get_checkpoint(job_id)
    assert killed_at is not None

    monkeypatch.setenv(js.CALL_LOG_ENV, str(calls))
    resumed = run_job(store, job_id)
    assert resumed.state == "succeeded", note

    # same outcome
    assert (resumed.best_candidate_id, resumed.best_score, resumed.baseline_score) == (
        reference.best_candidate_id,
        reference.best_score,
        reference.baseline_score,
    ), note
    result: dict[str, Any] = resumed.result or {}
    expected: dict[str, Any] = reference.result or {}
    for key in ("best_test", "baseline_test", "best_val", "baseline_val", "stop_reason"):
        assert result[key] == expected[key], (key, note)

    # same events: the log minus the resume marker is the uninterrupted log
    events = store.list_events(job_id)
    markers = [i for i, e in enumerate(events) if e.kind == "resumed"]
    assert len(markers) == 1, note
    assert "recovered" in events[markers[0]].data["reason"]
    after_marker = events[markers[0] + 1 :]
    before_marker = events[: markers[0]]
    assert before_marker[-1].kind == "checkpoint_saved", note
    assert before_marker[-1].data["iteration"] == killed_at.number
    replayed = [(e.kind, e.data) for e in before_marker + after_marker]
    uninterrupted = [(e.kind, e.data) for e in reference_store.list_events(reference.id)]
    assert replayed == uninterrupted, note

    # no rollout paid twice
    keys = evaluation_keys(store, job_id)
    assert keys == evaluation_keys(reference_store, reference.id), note
    assert max(keys.values()) == 1
    spent = store.get_checkpoint(job_id)
    spent_reference = reference_store.get_checkpoint(reference.id)
    assert spent is not None
    assert spent_reference is not None
    assert spent.budget["metric_calls"] == spent_reference.budget["metric_calls"], note
    paid, paid_reference = log_of(calls), log_of(reference_calls)
    assert set(paid) == set(paid_reference), note
    in_flight = CONCURRENCY + 1  # requests sent but not answered when the process died
    assert len(paid_reference) <= len(paid) <= len(paid_reference) + in_flight, note
