"""``executor = "runners"`` on PostgreSQL: a job and two ``emery runner`` processes sharing a
PostgreSQL store end as a local job does (skipped without ``EMERY_TEST_POSTGRES_URL``;
``.ci/run`` starts a server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from store_fixtures import make_store

from emery.jobs import run_job
from emery.store import SpanFilter, SQLiteStore
from emery.store.sql import SqlStore

pytestmark = [pytest.mark.usefixtures("random_search_algorithm"), pytest.mark.postgres]


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store("postgres", tmp_path)


def test_a_runners_job_on_postgresql_with_two_runners_ends_like_a_local_one(
    tmp_path: Path, postgres: SqlStore
) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=3, concurrency=4)
    expected = run_job(reference, rs.new_job(reference, tmp_path / "local", config))
    assert expected.state == "succeeded"

    job_id = rs.new_job(postgres, tmp_path / "r", rs.runners_config(tmp_path / "r", iterations=3))
    with rs.runners(postgres.url, 2, **{js.DELAY_ENV: "0.01"}):
        job = run_job(postgres, job_id)
    assert rs.outcome(postgres, job) == rs.outcome(reference, expected)

    rs.assert_ran_on_runners(postgres, job_id, 2)
    assert postgres.list_spans(SpanFilter(job_id=job_id), limit=1).items
