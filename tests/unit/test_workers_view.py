"""The fleet: ``emery workers`` and ``GET /api/workers`` list the runners a store has seen,
with their status, concurrency, current job and finished attempts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input_support import run_cli
from fastapi.testclient import TestClient

from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import SQLiteStore
from emery.store.records import WorkerRecord


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    store.register_worker(
        WorkerRecord(
            id="host-a:17:abc123",
            host="host-a",
            pid=17,
            metadata={"kind": "runner", "executor": "runner", "concurrency": 4},
        )
    )
    store.worker_heartbeat("host-a:17:abc123", status="busy", job_id="j-1")
    store.close()
    return path


def test_emery_workers_lists_them(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["workers", "--store", str(store_path), "--json"]) == 0
    (worker,) = json.loads(capsys.readouterr().out)["workers"]
    assert (worker["id"], worker["status"], worker["job_id"]) == ("host-a:17:abc123", "busy", "j-1")
    assert worker["metadata"]["concurrency"] == 4
    assert (worker["rollouts_done"], worker["rollouts_failed"]) == (0, 0)
    assert run_cli(["workers", "--store", str(store_path)]) == 0
    table = capsys.readouterr().out
    assert "host-a:17:abc123" in table
    assert "busy" in table
    assert " s ago" in table


def test_an_empty_fleet_says_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["workers", "--store", str(tmp_path / "new.db")]) == 0
    assert "emery runner --store" in capsys.readouterr().out


def test_the_api_lists_them(store_path: Path) -> None:
    store = SQLiteStore(store_path)
    app = create_server_app(store, launcher=ThreadLauncher())
    with TestClient(app) as client:
        answer = client.get("/api/workers")
    store.close()
    assert answer.status_code == 200
    (worker,) = answer.json()["workers"]
    assert (worker["host"], worker["pid"], worker["status"]) == ("host-a", 17, "busy")
