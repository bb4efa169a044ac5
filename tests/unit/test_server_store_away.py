"""While the store is away (a dropped PostgreSQL connection, a lock held past the busy
timeout, a full disk) the server answers 503 with ``Retry-After``, never 500; a store
failure that is not about availability keeps its own status."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from emery.server.api import create_server_app
from emery.server.errors import RETRY_AFTER_FULL_S, RETRY_AFTER_S
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.store.errors import store_errors

URL = "postgresql+psycopg://emery:secret@db.example/emery"


class _Dropped(Exception):
    """psycopg's OperationalError for a connection the server closed (its sqlstate)."""

    sqlstate = "08006"


def _through_store(orig: Exception) -> Callable[..., Any]:
    """A store method failing as the store's own transactions do (``store_errors``)."""

    def method(*args: Any, **kwargs: Any) -> Any:
        with store_errors(URL):
            raise OperationalError("SELECT 1", {}, orig)

    return method


def _raw(orig: Exception, invalidated: bool = False) -> Callable[..., Any]:
    """A store method failing with SQLAlchemy's own error (outside ``store_errors``)."""

    def method(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("SELECT 1", {}, orig, connection_invalidated=invalidated)

    return method


@pytest.fixture
def app_store(tmp_path: Path) -> Iterator[tuple[TestClient, MemoryStore]]:
    store = MemoryStore()
    launcher = ThreadLauncher()
    app = create_server_app(store, launcher=launcher, base_dir=tmp_path)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, store
    launcher.join()


AWAY = {
    "dropped": _through_store(_Dropped("server closed the connection unexpectedly")),
    "refused": _through_store(Exception('connection to server at "db" failed: Connection refused')),
    "shutting-down": _through_store(Exception("FATAL: the database system is shutting down")),
    "locked": _through_store(sqlite3.OperationalError("database is locked")),
    "raw-invalidated": _raw(Exception("SSL SYSCALL error: EOF detected"), invalidated=True),
    "raw-terminating": _raw(Exception("terminating connection due to administrator command")),
}


@pytest.mark.parametrize("failure", list(AWAY.values()), ids=list(AWAY))
def test_a_store_that_is_away_is_a_503_with_retry_after(
    app_store: tuple[TestClient, MemoryStore], failure: Callable[..., Any]
) -> None:
    client, store = app_store
    store.list_jobs = failure  # type: ignore[method-assign]
    response = client.get("/api/jobs")
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    detail = response.json()["detail"]
    assert "\n" not in detail
    assert "secret" not in detail
    assert "Traceback" not in response.text


def test_a_full_disk_is_a_503_with_a_longer_retry_after(
    app_store: tuple[TestClient, MemoryStore],
) -> None:
    client, store = app_store
    store.list_jobs = _through_store(  # type: ignore[method-assign]
        sqlite3.OperationalError("database or disk is full")
    )
    response = client.get("/api/jobs")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_FULL_S)
    assert "the disk is full" in response.json()["detail"]


@pytest.mark.parametrize(
    "failure",
    [
        _through_store(sqlite3.OperationalError("no such table: jobs")),
        _raw(sqlite3.OperationalError("no such column: nope")),
    ],
    ids=["store-error", "raw"],
)
def test_a_store_failure_that_is_not_about_availability_is_no_503(
    app_store: tuple[TestClient, MemoryStore], failure: Callable[..., Any]
) -> None:
    client, store = app_store
    store.list_jobs = failure  # type: ignore[method-assign]
    response = client.get("/api/jobs")
    assert response.status_code != 503
    assert "Retry-After" not in response.headers
