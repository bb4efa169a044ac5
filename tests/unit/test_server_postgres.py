"""Two ``emery server`` processes on one PostgreSQL store: a job created through one is
seen, paused, resumed, followed and cancelled through the other.

Runs when ``EMERY_TEST_POSTGRES_URL`` is set (``.ci/run`` starts a PostgreSQL server).
Jobs run in the servers' job processes with the scripted models of ``jobs_support``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jobs_support as js
import pytest
from store_fixtures import postgres_url

from emery.proxy.serving import free_port
from emery.store import PostgresStore
from emery.store.schema import metadata

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def url() -> Iterator[str]:
    """The test PostgreSQL with empty tables (dropped again afterwards)."""
    address = postgres_url()
    store = PostgresStore(address)
    metadata.drop_all(store.engine)
    store.close()
    yield address
    store = PostgresStore(address)
    metadata.drop_all(store.engine)
    store.close()


def start_server(store_url: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``emery server`` on a free port in its own process; its base URL once it answers."""
    folder.mkdir()
    port = free_port()
    log = folder / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "emery",
                "server",
                "--port",
                str(port),
                "--store",
                store_url,
                "--allow-code",
            ],
            cwd=folder,
            env=js.worker_env(**{js.DELAY_ENV: "0.05"}),  # workers inherit it: time to steer
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{base}/health", timeout=2).json()["store"].startswith("postgresql"):
                return process, base
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"emery server on {base} did not start: {log.read_text()[-2000:]}")


@pytest.fixture
def servers(url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Clients of two server processes on the same PostgreSQL store."""
    started: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        started += [start_server(url, tmp_path / name) for name in ("a", "b")]
        with (
            httpx.Client(base_url=started[0][1], timeout=60) as first,
            httpx.Client(base_url=started[1][1], timeout=60) as second,
        ):
            yield first, second
            for job in first.get("/api/jobs").json()["jobs"]:  # no worker outlives the test
                if job["state"] in ("created", "queued", "running", "paused"):
                    first.post(f"/api/jobs/{job['id']}/cancel", params={"wait": 30})
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=30)


def state_of(client: httpx.Client, job_id: str) -> str:
    answer = client.get(f"/api/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    state: str = answer.json()["state"]
    return state


def post(client: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    answer = client.post(path, params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def kinds_after(client: httpx.Client, job_id: str, since: int) -> list[str]:
    answer = client.get(f"/api/jobs/{job_id}/events", params={"since": since})
    return [event["kind"] for event in answer.json()["events"]]


def stream_end(client: httpx.Client, job_id: str) -> tuple[list[int], dict[str, Any]]:
    """The sequence numbers of a job's SSE stream and its ``end`` event's data."""
    seqs: list[int] = []
    kind = ""
    with client.stream("GET", f"/api/jobs/{job_id}/events/stream") as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                if kind == "end":
                    return seqs, data
                seqs.append(data["seq"])
    raise AssertionError("the stream ended without an end event")


def test_a_job_made_through_one_server_is_steered_through_another(
    servers: tuple[httpx.Client, httpx.Client], tmp_path: Path
) -> None:
    first, second = servers
    config = js.search_config(tmp_path / "run", algorithm="gepa", budget={"metric_calls": 4000})
    created = first.post("/api/jobs", json={"config": config, "name": "shared"})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]

    seen = second.get("/api/jobs", params={"name": "shared"}).json()
    assert [job["id"] for job in seen["jobs"]] == [job_id]
    js.wait_until(lambda: state_of(second, job_id) == "running", timeout=60)
    js.wait_until(lambda: second.get(f"/api/jobs/{job_id}/candidates").json()["candidates"])

    assert post(second, f"/api/jobs/{job_id}/pause", wait=30)["state"] == "paused"
    assert state_of(first, job_id) == "paused"
    paused_at = first.get(f"/api/jobs/{job_id}/events").json()["events"][-1]["seq"]

    assert post(second, f"/api/jobs/{job_id}/resume")["state"] in ("queued", "running")
    js.wait_until(lambda: "resumed" in kinds_after(first, job_id, paused_at), timeout=60)
    assert state_of(first, job_id) == "running"
    assert post(first, f"/api/jobs/{job_id}/cancel", wait=30)["state"] == "cancelled"

    seqs, end = stream_end(second, job_id)
    assert end["state"] == "cancelled"
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = kinds_after(first, job_id, 0)
    assert kinds.index("paused") < kinds.index("resumed") < kinds.index("cancelled")
    assert first.get(f"/api/jobs/{job_id}").json() == second.get(f"/api/jobs/{job_id}").json()
