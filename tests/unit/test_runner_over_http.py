"""``emery runner --server URL``: runners with no database address, only a runner key,
claim and finish rollouts through a running server's ``/api/queue`` with the guarantees of
runners on the database; the runner key reaches nothing else."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from fastapi.testclient import TestClient
from test_runners import ITERATIONS, local_reference

from emery.core.errors import ConfigError, EmeryError
from emery.jobs import run_job
from emery.server.api import create_server_app
from emery.store import MemoryStore, SQLiteStore
from emery.workers.http_queue import HttpQueue

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

ADMIN, RUNNER = "admin-key", "runner-key"


def test_a_runner_key_reaches_the_queue_and_nothing_else() -> None:
    app = create_server_app(MemoryStore(), api_key=ADMIN, runner_key=RUNNER)
    with TestClient(app) as client:
        as_runner = {"Authorization": f"Bearer {RUNNER}"}
        claim = {"worker_id": "w1"}
        assert client.post("/api/queue/claim", json=claim, headers=as_runner).json() == {
            "rollout": None
        }
        refused = client.get("/api/jobs", headers=as_runner)
        assert refused.status_code == 403
        assert "/api/queue" in refused.json()["detail"]
        assert client.post("/api/queue/claim", json=claim).status_code == 401
        admin = client.post("/api/queue/claim", json=claim, headers={"X-API-Key": ADMIN})
        assert admin.status_code == 200
        assert client.get("/api/jobs", headers={"X-API-Key": ADMIN}).status_code == 200


def test_a_runner_key_without_an_api_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs an API key"):
        create_server_app(MemoryStore(), runner_key=RUNNER)


def test_a_refused_key_is_one_line_naming_the_setting() -> None:
    app = create_server_app(MemoryStore(), api_key=ADMIN, runner_key=RUNNER)
    with TestClient(app) as client:
        queue = HttpQueue("http://testserver", key="wrong", client=client, patience_s=0)
        with pytest.raises(EmeryError, match=r"401.*EMERY_RUNNER_KEY"):
            queue.claim_rollout("w1")


def test_a_server_that_stays_away_is_one_line_after_the_patience() -> None:
    queue = HttpQueue(f"http://127.0.0.1:{free_port()}", key=RUNNER, patience_s=1.0)
    with pytest.raises(EmeryError, match=r"cannot reach .* \(for 1 s\)"):
        queue.claim_rollout("w1")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(store_path: Path) -> Iterator[str]:
    """``emery server`` on the store, with an API key and a runner key; its URL."""
    port = free_port()
    env = js.worker_env(EMERY_API_KEY=ADMIN, EMERY_RUNNER_KEY=RUNNER)
    command = [sys.executable, "-m", "emery", "server", "--store", str(store_path)]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        js.wait_until(lambda: listening(port), timeout=60, poll=0.1)
        yield url
    finally:
        rs.stop([process])


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def http_runner(url: str, **env: str) -> subprocess.Popen[bytes]:
    """``emery runner --server URL`` with the runner key only (no store, no API key)."""
    clean = {k: v for k, v in js.worker_env(**env).items() if k not in ("EMERY_STORE",)}
    clean.pop("EMERY_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "emery", "runner", "--server", url, "--poll-s", "0.05"],
        env={**clean, "EMERY_RUNNER_KEY": RUNNER},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_a_job_on_two_runners_over_http_ends_like_a_local_one(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS)
    job_id = rs.new_job(store, tmp_path / "r", config)
    with server(path) as url:
        started = [http_runner(url, **{js.DELAY_ENV: "0.01"}) for _ in range(2)]
        try:
            job = run_job(store, job_id)
        finally:
            rs.stop(started)
    assert rs.outcome(store, job) == rs.outcome(reference, reference.get_job(reference_id))
    rs.assert_ran_on_runners(store, job_id, 2)


@pytest.mark.slow
def test_a_runner_over_http_killed_with_a_lease_loses_it_to_another(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS, lease_s=3.0)
    config["runtime"]["max_attempts"] = 2
    job_id = rs.new_job(store, tmp_path / "r", config)
    with server(path) as url:
        doomed = http_runner(url, **{js.DELAY_ENV: "30"})  # holds its first rollout
        held = rs.kill_holder_then_rescue(store, job_id, doomed, lambda: http_runner(url))
    attempts = store.list_attempts(held.rollout_id)
    assert [a.status for a in attempts] == ["unresponsive", "succeeded"]
    assert attempts[0].worker_id != attempts[1].worker_id
    assert max(rs.queued_keys(store, job_id).values()) == 1
    finished = store.get_job(job_id)
    assert rs.outcome(store, finished) == rs.outcome(reference, reference.get_job(reference_id))
