"""``executor = "ray"``: a job whose rollouts are Ray tasks, or run on a pool of Ray actors,
on a small local Ray (started by the job, bounded to the machine's 2 cores) ends as a local
one does, retries the rollout of a worker killed mid-rollout and counts its tokens."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import runners_support as rs

from emery.jobs import run_job
from emery.jobs.engine import JobEngine
from emery.store import RolloutFilter, SpanFilter, SQLiteStore

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'emery[ray]'")

# One xdist worker runs them all (``--dist loadgroup``): two local Rays at once on 2 cores
# would each get half the machine they are bounded to.
pytestmark = [
    pytest.mark.usefixtures("random_search_algorithm"),
    pytest.mark.slow,
    pytest.mark.xdist_group("ray"),
]


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
    live = store.list_rollouts(RolloutFilter(job_id=job_id, status=["preparing", "running"]))
    assert live.total == 0  # the cancelled rollouts ended "cancelled", none left running
    js.wait_until(lambda: ray.available_resources().get("CPU", 0) == 2, timeout=30)


def ray_config(folder: Path, **runtime: Any) -> dict[str, Any]:
    config = js.search_config(folder / ".emery", iterations=1, n=(3, 4, 2), concurrency=4)
    config["runtime"].update(max_attempts=2, **runtime)
    return config


@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize("actors", [None, 2], ids=["tasks", "actors"])
def test_a_ray_worker_killed_mid_rollout_is_retried_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actors: int | None
) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    reference_id = rs.new_job(reference, tmp_path / "local", ray_config(tmp_path / "local"))
    expected = rs.outcome(reference, run_job(reference, reference_id))
    monkeypatch.setenv(js.DELAY_ENV, "2")  # a rollout runs long enough to be seen running
    store = SQLiteStore(tmp_path / "ray.db")
    config = ray_config(tmp_path / "ray", executor="ray", ray_cpus=2, ray_actors=actors)
    job_id = rs.new_job(store, tmp_path / "ray", config)
    killed: dict[str, str] = {}

    def kill_a_worker() -> None:
        running = js.wait_until(lambda: _running_attempts(store, job_id), timeout=90)
        killed["rollout"] = running[0].rollout_id
        os.kill(int(str(running[0].worker_id).rsplit(":", 1)[1]), signal.SIGKILL)

    thread = threading.Thread(target=kill_a_worker, daemon=True)
    thread.start()
    job = run_job(store, job_id)
    thread.join(timeout=5)
    assert rs.outcome(store, job) == expected
    rollout = store.get_rollout(killed["rollout"])
    assert rollout.status == "succeeded"
    attempts = store.list_attempts(rollout.id)
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert "Ray worker running it was lost" in (attempts[0].error or "")
    assert attempts[0].worker_id != attempts[1].worker_id
    stuck = store.list_rollouts(RolloutFilter(job_id=job_id, status=["preparing", "running"]))
    assert stuck.total == 0


def _running_attempts(store: SQLiteStore, job_id: str) -> list[Any]:
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id, status=["running"])).items
    return [a for r in rollouts for a in store.list_attempts(r.id) if a.status == "running"]


@pytest.mark.usefixtures("local_ray")
def test_a_ray_job_on_an_actor_pool_reuses_two_actors(tmp_path: Path) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    reference_id = rs.new_job(reference, tmp_path / "local", ray_config(tmp_path / "local"))
    expected = rs.outcome(reference, run_job(reference, reference_id))
    store = SQLiteStore(tmp_path / "ray.db")
    config = ray_config(tmp_path / "ray", executor="ray", ray_cpus=2, ray_actors=2)
    job_id = rs.new_job(store, tmp_path / "ray", config)
    job = run_job(store, job_id)
    assert rs.outcome(store, job) == expected
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    workers = [a.worker_id for r in rollouts for a in store.list_attempts(r.id)]
    assert len(workers) > 4  # many rollouts ...
    assert len(set(workers)) == 2  # ... on the two actors, each built once
    assert all(int(str(w).rsplit(":", 1)[1]) != os.getpid() for w in workers)
    # the job's end stops its actors: their CPUs are free again
    js.wait_until(lambda: ray.available_resources().get("CPU", 0) == 2, timeout=30)


@pytest.mark.usefixtures("local_ray")
def test_a_token_budget_stops_a_ray_job_as_it_stops_a_local_one(tmp_path: Path) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=4, budget=rs.TOKENS)
    reference_id = rs.new_job(reference, tmp_path / "local", config)
    expected = run_job(reference, reference_id)
    assert str((expected.result or {}).get("stop_reason")).startswith("lm_tokens")

    store = SQLiteStore(tmp_path / "ray.db")
    config = js.search_config(tmp_path / "ray" / ".emery", iterations=4, budget=rs.TOKENS)
    config["runtime"].update(executor="ray", ray_cpus=2)
    job = run_job(store, rs.new_job(store, tmp_path / "ray", config))
    assert rs.outcome(store, job) == rs.outcome(reference, expected)
    assert rs.task_tokens(job) == rs.task_tokens(expected)
