"""The store backends every store test runs against: in-memory, SQLite file and PostgreSQL.

PostgreSQL runs when ``EMERY_TEST_POSTGRES_URL`` points at a server (``.ci/run`` starts
one); each test gets empty tables. Under pytest-xdist each worker has a database of its own
on that server (``emery_test_gw0``, ...), so workers never drop each other's tables.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

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
    """The test server's database for this test process (skips without a server)."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set (.ci/run starts a PostgreSQL server)")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return worker_database(url, worker) if worker else url


@functools.cache
def worker_database(url: str, worker: str) -> str:
    """``url`` with its database replaced by one for xdist ``worker``, created if missing."""
    base = make_url(url).set(drivername="postgresql+psycopg")
    name = f"{base.database}_{worker}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as connection:
            exists = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if exists is None:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


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
