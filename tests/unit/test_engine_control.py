"""Pause, resume and cancel from another process, against a job running in a job process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.jobs import cancel_job, create_job, pause_job, run_job
from emery.store import MemoryStore, SQLiteStore
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def new_job(store: SqlStore, folder: Path, **options: Any) -> str:
    config = js.search_config(folder / ".emery", **options)
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def start_worker(path: Path, job_id: str, delay: str = "0.03") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        js.worker_command(job_id, str(path)),
        env=js.worker_env(**{js.DELAY_ENV: delay}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def checkpoint_at_least(store: SqlStore, job_id: str, number: int) -> bool:
    checkpoint = store.get_checkpoint(job_id)
    return checkpoint is not None and checkpoint.number >= number


@pytest.mark.slow
def test_a_pause_from_another_process_stops_the_engine_quickly(tmp_path: Path) -> None:
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = new_job(store, tmp_path / "run", iterations=12)
    worker = start_worker(path, job_id)
    try:
        js.wait_until(lambda: checkpoint_at_least(store, job_id, 1))
        started = time.perf_counter()
        job = pause_job(store, job_id, wait_s=20)
        latency = time.perf_counter() - started
        assert job.state == "paused"
        assert latency < 3.0
        assert worker.wait(timeout=30) == 0
    finally:
        worker.kill()
    events = store.list_events(job_id)
    assert (events[-1].kind, events[-1].data["reason"]) == ("paused", "pause requested")
    assert store.get_job(job_id).requested_action is None
    reference_store = MemoryStore()
    reference = run_job(reference_store, new_job(reference_store, tmp_path / "ref", iterations=12))
    resumed = run_job(store, job_id)
    assert resumed.state == "succeeded"
    assert (resumed.best_candidate_id, resumed.best_score) == (
        reference.best_candidate_id,
        reference.best_score,
    )
    assert next(e.kind for e in store.list_events(job_id, since=events[-1].seq or 0)) == "resumed"


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_a_cancel_from_another_process_keeps_what_was_stored(tmp_path: Path) -> None:
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = new_job(store, tmp_path, iterations=12)
    worker = start_worker(path, job_id)
    try:
        js.wait_until(lambda: checkpoint_at_least(store, job_id, 2))
        job = cancel_job(store, job_id, wait_s=20)
        assert job.state == "cancelled"
        assert worker.wait(timeout=30) == 1  # `jobs run` exits 1 for a cancelled job
    finally:
        worker.kill()
    assert len(store.job_candidates(job_id)) >= 3
    assert store.count_evaluations(job_id) > 0
    assert store.get_checkpoint(job_id) is not None


@pytest.mark.slow
def test_the_cli_steers_a_job_running_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = new_job(store, tmp_path, iterations=12)
    worker = start_worker(path, job_id, delay="0.2")  # outlasts a CLI start on a busy machine

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "emery", *args, "--store", str(path)],
            env=js.worker_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    try:
        js.wait_until(lambda: checkpoint_at_least(store, job_id, 1))
        paused = cli("jobs", "pause", job_id)
        assert paused.returncode == 0, paused.stderr
        assert f"job {job_id} paused after" in paused.stdout
        assert worker.wait(timeout=30) == 0
        again = cli("jobs", "resume", job_id[:6], "--stream-format", "none")
        assert again.returncode == 2  # random_search is registered in the test process only
        assert "unknown algorithm 'random_search'" in again.stderr
        assert store.get_job(job_id).state == "paused"  # a failed resume loses nothing
        cancelled = cli("jobs", "cancel", job_id)
        assert cancelled.returncode == 0
        assert f"job {job_id} cancelled" in cancelled.stdout
    finally:
        worker.kill()


def test_pausing_a_queued_job_and_cancelling_an_abandoned_one(tmp_path: Path) -> None:
    store = MemoryStore()
    queued = new_job(store, tmp_path)
    store.transition(queued, "queued")
    assert pause_job(store, queued).state == "paused"
    abandoned = new_job(store, tmp_path)
    store.transition(abandoned, "queued")
    store.transition(abandoned, "running", fields={"owner": "gone:1", "heartbeat_at": 0.0})
    job = cancel_job(store, abandoned)
    assert job.state == "cancelled"
    assert "was gone" in (store.list_events(abandoned)[-1].data["reason"] or "")


@pytest.mark.parametrize("action", [pause_job, cancel_job])
def test_steering_a_finished_job_is_refused(tmp_path: Path, action: Any) -> None:
    store = MemoryStore()
    job = run_job(store, new_job(store, tmp_path, iterations=1))
    with pytest.raises(Exception, match="has already succeeded"):
        action(store, job.id)
