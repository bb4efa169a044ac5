"""``emery server`` answers what a client gets wrong with a 4xx, creates every job kind as
``emery train`` does, and lets one of several concurrent resumes launch a run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import Served, job_config, random_search_module, served
from test_server_otlp import a_rollout, export, span, stored, to_otlp_json

from emery.jobs import manage
from emery.server.api import create_server_app
from emery.server.launcher import ProcessLauncher
from emery.store import SQLiteStore
from emery.store.records import NewJob

__all__ = ["random_search_module", "served"]


def refused(served: Served, body: bytes | dict[str, Any], status: int = 400) -> str:
    """The one-line JSON error ``POST /api/jobs`` answers ``body`` with; nothing stored."""
    before = served.store.list_jobs().total
    if isinstance(body, dict):
        response = served.client.post("/api/jobs", json=body)
    else:
        response = served.client.post(
            "/api/jobs", content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == status, response.text
    detail: str = response.json()["detail"]
    assert "\n" not in detail
    assert served.store.list_jobs().total == before
    return detail


def test_a_config_nested_too_deeply_is_a_400(served: Served) -> None:
    config = job_config(served.workdir / "deep")
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(300):
        deep = {"a": deep}
    config["algorithm"]["gepa"] = {"extra": deep}  # settings of another algorithm: unread
    detail = refused(served, {"config": config})
    assert detail.startswith("config: algorithm.gepa.extra.a.a.a.…")
    assert "nested over 64 levels" in detail


def test_a_lone_surrogate_in_a_job_name_is_a_400(served: Served) -> None:
    config = job_config(served.workdir / "surrogate")
    config["job"]["name"] = "NAME"

    def body(**fields: Any) -> bytes:
        return json.dumps({"config": config, **fields}).replace("NAME", "x\\ud800").encode()

    assert "config: job.name is not valid unicode" in refused(served, body())
    config["job"]["name"] = "fine"
    headers = {"Content-Type": "application/json"}
    as_field = served.client.post("/api/jobs", content=body(name="NAME"), headers=headers)
    assert as_field.status_code == 422  # the body's own name field: its schema refuses it
    assert as_field.json()["detail"][0]["loc"] == ["body", "name"]


def test_a_span_sequence_past_the_store_s_integers_is_rejected_not_a_500(served: Served) -> None:
    rollout_id, attempt_id = a_rollout(served)
    ids = {"emery.rollout.id": rollout_id, "emery.attempt.id": attempt_id}
    trace = bytes.fromhex("22222222222222222222222222222222")
    huge = export(span(trace, bytes.fromhex("0000000000000011"), **ids, emery_sequence=2**63 - 1))
    answer = served.client.post("/v1/traces", json=json.loads(to_otlp_json(huge)))
    assert answer.status_code == 200, answer.text
    rejected = answer.json()["partialSuccess"]
    assert rejected["rejectedSpans"] == "1"
    assert "emery.sequence must be from 0 to 1073741824" in rejected["errorMessage"]
    later = export(span(trace, bytes.fromhex("0000000000000012"), **ids))
    answer = served.client.post("/v1/traces", json=json.loads(to_otlp_json(later)))
    assert answer.status_code == 200, answer.text
    assert [s.span_id for s in stored(served, trace)] == ["0000000000000012"]


def training_config(served: Served, kind: str, **section: Any) -> dict[str, Any]:
    return {
        "job": {"type": kind},
        kind: section,
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 1, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m"}},
        "runtime": {"workdir": str(served.workdir / "training")},
    }


@pytest.fixture
def model_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The base model of training jobs counts as installed."""
    from emery.training import job, rl_job

    for module in (job, rl_job):
        monkeypatch.setattr(module, "installed_path", lambda name: tmp_path / f"{name}.gguf")


def created(served: Served, config: dict[str, Any]) -> dict[str, Any]:
    response = served.client.post("/api/jobs", json={"config": config, "start": False})
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    served.store.delete_job(job["id"])
    return job


def test_sft_and_rl_configs_create_training_jobs(served: Served, model_installed: None) -> None:
    sft = created(served, training_config(served, "sft", source_job=served.job_id))
    assert (sft["kind"], sft["algorithm"], sft["state"]) == ("sft", "sft", "created")
    rl = created(served, training_config(served, "rl", max_steps=2))
    assert (rl["kind"], rl["algorithm"]) == ("rl", "rl")


def test_a_training_job_s_checks_are_the_cli_s(
    served: Served, model_installed: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    unknown = training_config(served, "sft", source_job="j-nosuchjob")
    assert "no job 'j-nosuchjob'" in refused(served, {"config": unknown})
    missing = training_config(served, "sft", data="nope.jsonl")
    assert "nope.jsonl" in refused(served, {"config": missing})
    monkeypatch.undo()  # the model is not installed after all
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "models"))
    config = training_config(served, "sft", source_job=served.job_id)
    assert "emery models pull smollm2-135m" in refused(served, {"config": config})


def test_of_six_concurrent_resumes_one_launches_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[list[str]] = []

    class Worker:
        pid = 4242

        def __init__(self, args: list[str], **_: Any) -> None:
            spawned.append(args)

    monkeypatch.setattr(manage.subprocess, "Popen", Worker)
    store = SQLiteStore(tmp_path / "emery.db")
    store.create_job(
        NewJob(id="j-paused0001", name="p", algorithm="gepa", config={}, base_dir=str(tmp_path))
    )
    store.transition("j-paused0001", "queued")
    store.transition("j-paused0001", "paused")
    app = create_server_app(store, launcher=ProcessLauncher(), base_dir=tmp_path)
    start = threading.Barrier(6)
    statuses: list[int] = []

    def resume() -> None:
        start.wait()
        statuses.append(client.post("/api/jobs/j-paused0001/resume").status_code)

    with TestClient(app) as client:
        threads = [threading.Thread(target=resume) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(statuses) == [200, 409, 409, 409, 409, 409]
    assert len(spawned) == 1
    assert store.get_job("j-paused0001").state == "queued"
