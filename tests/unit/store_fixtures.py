"""The store backends every store test runs against: in-memory, SQLite file and PostgreSQL.

PostgreSQL runs when ``EMERY_TEST_POSTGRES_URL`` points at a server (``.ci/run`` starts
one); each test gets empty tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from emery.store import MemoryStore, PostgresStore, SQLiteStore
from emery.store.schema import metadata
from emery.store.sql import SqlStore

POSTGRES_ENV = "EMERY_TEST_POSTGRES_URL"
BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set (.ci/run starts a PostgreSQL server)")
    return url


def make_store(kind: str, tmp_path: Path) -> Iterator[SqlStore]:
    """A fresh, empty store of ``kind``; cleaned up afterwards."""
    if kind == "memory":
        store: SqlStore = MemoryStore()
    elif kind == "sqlite":
        store = SQLiteStore(tmp_path / "store" / "emery.db")
    else:
        store = PostgresStore(postgres_url())
        metadata.drop_all(store.engine)
        store.close()
        store = PostgresStore(postgres_url())
    try:
        yield store
    finally:
        if kind == "postgres":
            metadata.drop_all(store.engine)
        store.close()
