"""``executor = "ray"``: a job whose rollouts are Ray tasks on a small local Ray (started by
the job, bounded to the machine's 2 cores) ends as a local one does."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs

from emery.jobs import run_job
from emery.jobs.engine import JobEngine
from emery.store import RolloutFilter, SpanFilter, SQLiteStore

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'emery[ray]'")

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ray workers import ``jobs_support`` (the models): they inherit PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", js.worker_env()["PYTHONPATH"])
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    yield
    ray.shutdown()


@pytest.mark.usefixtures("local_ray")
def test_a_ray_job_on_a_local_ray_ends_like_a_local_one(tmp_path: Path) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=2, concurrency=4)
    reference_id = rs.new_job(reference, tmp_path / "local", config)
    expected = rs.outcome(reference, run_job(reference, reference_id))

    store = SQLiteStore(tmp_path / "ray.db")
    config = js.search_config(tmp_path / "ray" / ".emery", iterations=2, concurrency=4)
    config["runtime"].update(executor="ray", ray_cpus=2)
    job_id = rs.new_job(store, tmp_path / "ray", config)
    job = run_job(store, job_id)
    assert rs.outcome(store, job) == expected

    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    workers = {a.worker_id for r in rollouts for a in store.list_attempts(r.id)}
    assert workers, "no attempt recorded"
    assert all(str(w).startswith("ray:") for w in workers)
    assert all(int(str(w).rsplit(":", 1)[1]) != os.getpid() for w in workers)
    assert store.list_spans(SpanFilter(job_id=job_id), limit=1).items


@pytest.mark.usefixtures("local_ray")
def test_pausing_a_ray_job_cancels_its_ray_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "60")  # every task model call hangs for a minute
    store = SQLiteStore(tmp_path / "ray.db")
    config = js.search_config(tmp_path / ".emery", iterations=2, concurrency=4)
    config["runtime"].update(executor="ray", ray_cpus=2)
    job_id = rs.new_job(store, tmp_path, config)
    engine = JobEngine(store, job_id)
    seen: dict[str, float] = {}

    def pause_when_running() -> None:
        js.wait_until(
            lambda: store.list_rollouts(RolloutFilter(job_id=job_id, status=["running"])).total,
            timeout=60,
        )
        seen["cpus"] = ray.available_resources().get("CPU", 0)
        seen["at"] = time.monotonic()
        engine.request("pause", "test")

    thread = threading.Thread(target=pause_when_running, daemon=True)
    thread.start()
    run_job(store, job_id, engine=engine)  # Ray wants its driver on the main thread
    thread.join(timeout=5)
    assert seen["cpus"] < 2  # the tasks held the CPUs
    assert time.monotonic() - seen["at"] < 20  # not the minute the model would take
    assert store.get_job(job_id).state == "paused"
    js.wait_until(lambda: ray.available_resources().get("CPU", 0) == 2, timeout=30)
