"""``POST /api/jobs`` with an ``Idempotency-Key``: a retried request answers the job the
first one made instead of making a second; the key with another body is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import job_config, random_search_module

from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

__all__ = ["random_search_module"]
pytestmark = pytest.mark.usefixtures("random_search_module")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, MemoryStore]]:
    store = MemoryStore()
    app = create_server_app(store, launcher=ThreadLauncher(), allow_code=True)  # fakes
    with TestClient(app) as client:
        yield client, store


def body(tmp_path: Path, name: str = "keyed") -> dict[str, Any]:
    return {"config": job_config(tmp_path), "name": name, "start": False}


def test_a_retried_request_answers_the_first_job(
    served: tuple[TestClient, MemoryStore], tmp_path: Path
) -> None:
    client, store = served
    headers = {"Idempotency-Key": "retry-me-1"}
    first = client.post("/api/jobs", json=body(tmp_path), headers=headers)
    again = client.post("/api/jobs", json=body(tmp_path), headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert store.list_jobs().total == 1


def test_the_key_with_another_body_is_a_conflict(
    served: tuple[TestClient, MemoryStore], tmp_path: Path
) -> None:
    client, store = served
    headers = {"Idempotency-Key": "k-2"}
    first = client.post("/api/jobs", json=body(tmp_path), headers=headers)
    other = client.post("/api/jobs", json=body(tmp_path, name="other"), headers=headers)
    assert other.status_code == 409
    assert other.json()["detail"] == (
        f"Idempotency-Key 'k-2' was used for another request (it made job {first.json()['id']}):"
        " send a new key for a new job"
    )
    assert store.list_jobs().total == 1


def test_without_a_key_each_request_makes_a_job(
    served: tuple[TestClient, MemoryStore], tmp_path: Path
) -> None:
    client, store = served
    for _ in range(2):
        assert client.post("/api/jobs", json=body(tmp_path)).status_code == 201
    assert store.list_jobs().total == 2


def test_the_first_binding_of_a_key_wins_and_goes_with_its_job() -> None:
    store = MemoryStore()
    assert store.keyed_job("k") is None
    assert store.bind_key("k", "h1", "j-first") == ("j-first", "h1")
    assert store.bind_key("k", "h1", "j-late") == ("j-first", "h1")  # a concurrent request
    assert store.keyed_job("k") == ("j-first", "h1")
