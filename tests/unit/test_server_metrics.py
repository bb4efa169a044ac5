"""``GET /metrics``: jobs, rollouts, runners and LM usage of the store, in Prometheus' text
format, read back with prometheus_client's own parser."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from server_support import finished_job, random_search_module  # noqa: F401

from emery.core.events import event
from emery.core.rollouts import Rollout
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.store.queue import queue_metadata
from emery.store.records import NewJob, WorkerRecord


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.usefixtures("random_search_module")
def test_metrics_count_what_the_store_holds(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = finished_job(store, tmp_path)
    queued = [
        Rollout(
            job_id=job_id,
            candidate_id="c",
            example_id=f"e{i}",
            split="val",
            metadata=queue_metadata("candidate:c", 1, 30.0),
        )
        for i in range(3)
    ]
    store.add_rollouts(queued)
    store.register_worker(WorkerRecord(id="w1", host="h", pid=1))
    usage = store.get_job(job_id).result["usage"]  # type: ignore[index]

    with TestClient(create_server_app(store, launcher=ThreadLauncher())) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    got = samples(answer.text)
    assert got[("emery_jobs", (("state", "succeeded"),))] == 1
    assert got[("emery_rollouts", (("status", "queuing"),))] == 3
    assert got[("emery_runners", (("status", "idle"),))] == 1
    task = (("model", "python/jobs_support:task_lm"), ("role", "task"))
    assert got[("emery_lm_calls_total", task)] == usage["task"]["calls"] > 0
    prompt = tuple(sorted((*task, ("kind", "prompt"))))
    assert got[("emery_lm_tokens_total", prompt)] == usage["task"]["prompt_tokens"]
    assert got[("emery_lm_rate_limited_total", task)] == 0
    assert got[("emery_lm_rate_limit_wait_seconds_total", task)] == 0.0


def test_a_running_jobs_last_step_is_timed_from_its_events() -> None:
    store = MemoryStore()
    store.create_job(NewJob(id="j-steps0001", name="steps", algorithm="gepa", config={}))
    store.transition("j-steps0001", "queued")
    store.transition("j-steps0001", "running")
    with TestClient(create_server_app(store, launcher=ThreadLauncher())) as client:
        store.append_events("j-steps0001", [event("started", state="running")])
        assert "emery_step_seconds{" not in client.get("/metrics").text  # no step done yet
        time.sleep(0.3)
        store.append_events("j-steps0001", [event("checkpoint_saved", iteration=1)])
        got = samples(client.get("/metrics").text)
    seconds = got[("emery_step_seconds", (("algorithm", "gepa"), ("job", "j-steps0001")))]
    assert 0.3 <= seconds < 10
