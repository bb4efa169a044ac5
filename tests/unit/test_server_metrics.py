"""``GET /metrics``: jobs, rollouts, runners and LM usage of the store, in Prometheus' text
format, read back with prometheus_client's own parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from server_support import finished_job, random_search_module  # noqa: F401

from emery.core.rollouts import Rollout
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.store.queue import queue_metadata
from emery.store.records import WorkerRecord


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
