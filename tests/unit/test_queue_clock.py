"""Leases by the store's clock, not the runner's (issue 50, item 3): on PostgreSQL two
runners whose machine clocks differ by minutes agree on every lease, because the queue
stamps claims and heartbeats with the database's time (skipped without
``EMERY_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import pytest
from sqlalchemy import event
from store_fixtures import make_store
from test_store_queue import enqueue, running_job

from emery.jobs.ownership import owner_alive
from emery.store.backends import PostgresStore
from emery.store.records import RolloutEnd
from emery.store.sql import SqlStore

pytestmark = pytest.mark.postgres

SKEW_S = 300.0  # one runner's clock five minutes behind


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store("postgres", tmp_path)


def test_a_runner_whose_clock_is_behind_keeps_its_lease(postgres: SqlStore) -> None:
    behind = PostgresStore(postgres.url)
    job_id = running_job(postgres)
    enqueue(postgres, job_id, lease_s=30.0)
    skewed = lambda: time.time() - SKEW_S  # noqa: E731
    try:
        with patch("emery.store.sql.base.now", skewed):  # the lagging runner's machine
            claimed = behind.claim_rollout("lagging-runner")
            assert claimed is not None
            assert behind.heartbeat_attempt(f"{claimed.id}:1")
        # another runner, on time, looks for dead leases: this one is seconds old
        assert postgres.expire_leases() == 0
        attempts = postgres.list_attempts(claimed.id)
        assert [a.status for a in attempts] == ["running"]
        assert abs(attempts[0].heartbeat_at.timestamp() - time.time()) < 60  # type: ignore[union-attr]
    finally:
        behind.close()


def test_a_job_owner_whose_clock_is_behind_stays_alive(postgres: SqlStore) -> None:
    """A job owner's heartbeats are stamped and aged by the database's clock: a reader on
    time does not take the job of an owner whose machine is five minutes behind."""
    behind = PostgresStore(postgres.url)
    job_id = running_job(postgres)
    try:
        with patch("emery.store.sql.base.now", lambda: time.time() - SKEW_S):
            postgres.swap_owner(job_id, "far:1", state="running", expect_owner=None)
            behind.heartbeat(job_id, "far:1")
        read = postgres.get_job(job_id)
        assert read.heartbeat_age_s is not None
        assert read.heartbeat_age_s < 60
        assert owner_alive(read)
    finally:
        behind.close()


def test_queue_calls_read_the_clock_within_their_own_statements(postgres: SqlStore) -> None:
    """A claim, heartbeat, finish (with its next claim), requeue, withdrawal and lease scan
    send no query for the time alone, and stamp by the database's clock: a finish and the
    claim it makes share their transaction's time."""
    job_id = running_job(postgres)
    first, second, third = enqueue(postgres, job_id, 3)
    sent: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        sent.append(" ".join(statement.split()).upper())

    event.listen(postgres.engine, "before_cursor_execute", seen)
    skewed = lambda: time.time() - SKEW_S  # noqa: E731
    with patch("emery.store.sql.base.now", skewed):  # this machine's clock is not used
        claimed = postgres.claim_rollout("w", job_id=job_id)
        assert claimed is not None
        assert claimed.id == first
        assert postgres.heartbeat_attempt(f"{first}:1")
        end = RolloutEnd(status="succeeded", attempt_status="succeeded", score=1.0)
        kept, nxt = postgres.finish_and_claim(first, f"{first}:1", end, worker_id="w")
        assert kept
        assert nxt is not None
        assert nxt.id == second
        assert postgres.requeue_rollout(
            second, f"{second}:1", 1, attempt_status="failed", error="x"
        )
        assert postgres.expire_leases() == 0
        assert postgres.withdraw_rollouts([third], error="withdrawn") == 1
    event.remove(postgres.engine, "before_cursor_execute", seen)
    clock = "EXTRACT(EPOCH FROM NOW())"
    alone = [s for s in sent if s.startswith("SELECT") and " FROM " not in s.replace(clock, "")]
    assert alone == []
    assert any(clock in s for s in sent if s.startswith("UPDATE"))
    finished = postgres.get_rollout(first).finished_at
    started = postgres.list_attempts(second)[0].started_at
    assert finished is not None
    assert started is not None
    assert finished == started  # one transaction, one time
    assert abs(finished.timestamp() - time.time()) < 60  # the database's, not the skewed one
    withdrawn = postgres.get_rollout(third).finished_at
    assert withdrawn is not None
    assert abs(withdrawn.timestamp() - time.time()) < 60
