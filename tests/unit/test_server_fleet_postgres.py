"""A team's deployment in processes of its own: ``emery server`` on PostgreSQL, a job
submitted by ``emery train --server`` from another process, two ``emery runner --server``
processes with only a runner key, one SIGKILLed mid-rollout: the job succeeds with every
(candidate, example, split) scored once, and the same submission again (same idempotency
key) answers the same job (skipped without ``EMERY_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from store_fixtures import make_store
from test_fleet_faults import start_server
from test_runner_over_http import ADMIN, free_port, http_runner

from emery.store.sql import SqlStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store("postgres", tmp_path)


def train(config: Path, url: str, key: str) -> subprocess.Popen[bytes]:
    """``emery train CONFIG --server URL --idempotency-key KEY --json`` in its own process."""
    command = [sys.executable, "-m", "emery", "train", str(config), "--server", url]
    return subprocess.Popen(
        [*command, "--idempotency-key", key, "--json"],
        env=js.worker_env(EMERY_API_KEY=ADMIN),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def test_a_job_submitted_to_a_server_on_postgresql_survives_a_killed_runner(
    tmp_path: Path, postgres: SqlStore
) -> None:
    config = js.search_config(tmp_path / ".emery", algorithm="baseline", settings={})
    config["runtime"].update(executor="runners", lease_s=3.0, max_attempts=2)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    port = free_port()
    server = start_server(postgres.url, port, allow_code=True)
    url = f"http://127.0.0.1:{port}"
    doomed = http_runner(url, **{js.DELAY_ENV: "30"})  # holds the first rollout it takes
    submitted = train(path, url, "team-run-1")
    rescuer = None
    try:
        held = js.wait_until(lambda: rs.running_attempts(postgres), timeout=120)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
        rescuer = http_runner(url)
        out, _ = submitted.communicate(timeout=180)
        assert submitted.returncode == 0
        first = json.loads(out)
        assert first["state"] == "succeeded"
        again = train(path, url, "team-run-1")
        out, _ = again.communicate(timeout=60)
        assert json.loads(out)["job_id"] == first["job_id"]
    finally:
        rs.stop([p for p in (doomed, submitted, rescuer, server) if p is not None])
    assert postgres.list_jobs().total == 1
    attempts = postgres.list_attempts(held[0].rollout_id)  # type: ignore[attr-defined]
    assert [a.status for a in attempts] == ["unresponsive", "succeeded"]
    keys = rs.queued_keys(postgres, first["job_id"])
    assert keys
    assert max(keys.values()) == 1
