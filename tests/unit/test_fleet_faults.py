"""Faults a fleet meets (issue 50, item 3): the server SIGKILLed under its runners and
started again, and a runner frozen (SIGSTOP) past its lease and then thawed. Each job
ends as a local one does, with every (candidate, example, split) scored once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from test_runner_over_http import ADMIN, RUNNER, free_port, http_runner, listening
from test_runners import ITERATIONS, local_reference

from emery.store import SQLiteStore

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("random_search_algorithm")]


def start_server(
    store: Path | str, port: int, *, allow_code: bool = False
) -> subprocess.Popen[bytes]:
    """``emery server`` on ``store`` (a path or URL) with an API key and a runner key."""
    env = js.worker_env(EMERY_API_KEY=ADMIN, EMERY_RUNNER_KEY=RUNNER)
    command = [sys.executable, "-m", "emery", "server", "--store", str(store)]
    process = subprocess.Popen(
        [*command, "--port", str(port), *(["--allow-code"] if allow_code else [])],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    js.wait_until(lambda: listening(port), timeout=60, poll=0.1)
    return process


def test_the_server_killed_under_its_runners_and_restarted(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS, lease_s=15.0)
    job_id = rs.new_job(store, tmp_path / "r", config)
    port = free_port()
    server = start_server(path, port)
    url = f"http://127.0.0.1:{port}"
    runners = [http_runner(url, **{js.DELAY_ENV: "0.2"}) for _ in range(2)]
    job = rs.start_job(job_id, path)
    try:
        js.wait_until(lambda: rs.running_attempts(store), timeout=60)
        os.kill(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        # down for its restart (a few seconds, less than a lease): the runners' claims,
        # heartbeats and finishes wait and are sent again
        server = start_server(path, port)
        js.wait_until(lambda: store.get_job(job_id).terminal, timeout=180, poll=0.2)
        assert job.wait(timeout=30) == 0
        assert all(r.poll() is None for r in runners), "a runner gave up on the server"
    finally:
        rs.stop([job, server, *runners])
    assert max(rs.queued_keys(store, job_id).values()) == 1
    finished = store.get_job(job_id)
    assert rs.outcome(store, finished) == rs.outcome(reference, reference.get_job(reference_id))


def test_a_runner_frozen_past_its_lease_is_not_counted_twice(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS, lease_s=2.0)
    config["runtime"]["max_attempts"] = 2
    job_id = rs.new_job(store, tmp_path / "r", config)
    frozen = rs.start_runner(path, **{js.DELAY_ENV: "3"})  # holds its first rollout 3 s
    job = rs.start_job(job_id, path)
    thawed = False
    rescuer = None
    try:
        held = js.wait_until(lambda: rs.running_attempts(store), timeout=60)
        os.kill(frozen.pid, signal.SIGSTOP)
        rescuer = rs.start_runner(path)
        lost = held[0]
        js.wait_until(
            lambda: len(store.list_attempts(lost.rollout_id)) > 1,  # type: ignore[attr-defined]
            timeout=60,
        )
        os.kill(frozen.pid, signal.SIGCONT)  # it wakes with a result it no longer owns
        thawed = True
        js.wait_until(lambda: store.get_job(job_id).terminal, timeout=120, poll=0.2)
        assert job.wait(timeout=30) == 0
    finally:
        if not thawed:
            os.kill(frozen.pid, signal.SIGCONT)
        rs.stop([p for p in (frozen, job, rescuer) if p is not None])
    attempts = store.list_attempts(lost.rollout_id)  # type: ignore[attr-defined]
    assert attempts[0].status == "unresponsive"
    assert attempts[0].worker_id != attempts[-1].worker_id
    assert max(rs.queued_keys(store, job_id).values()) == 1
    finished = store.get_job(job_id)
    assert rs.outcome(store, finished) == rs.outcome(reference, reference.get_job(reference_id))
