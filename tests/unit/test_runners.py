"""``executor = "runners"``: jobs whose rollouts run on ``emery runner`` processes end as
local ones do, survive a runner killed with a lease and a job killed mid-batch."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import jobs_support as js
import pytest
import runners_support as rs
from bad_input_support import one_error_line, run_cli

from emery.core.errors import ConfigError
from emery.jobs import run_job
from emery.store import MemoryStore, RolloutFilter, SpanFilter, SQLiteStore
from emery.store.sql import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

ITERATIONS = 3


def local_reference(tmp_path: Path) -> tuple[SqlStore, str]:
    store = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=ITERATIONS, concurrency=4)
    job_id = rs.new_job(store, tmp_path / "local", config)
    assert run_job(store, job_id).state == "succeeded"
    return store, job_id


@pytest.mark.slow
def test_a_runners_job_on_two_runner_processes_ends_like_a_local_one(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS)
    job_id = rs.new_job(store, tmp_path / "r", config)
    with rs.runners(path, 2, **{js.DELAY_ENV: "0.01"}):
        job = run_job(store, job_id)
    assert rs.outcome(store, job) == rs.outcome(reference, reference.get_job(reference_id))

    rs.assert_ran_on_runners(store, job_id, 2)
    spans = store.list_spans(SpanFilter(job_id=job_id), limit=5).items
    assert spans, "the runners stored no spans"
    assert {s.attempt_id for s in spans} <= {f"{s.rollout_id}:1" for s in spans}


@pytest.mark.slow
def test_a_runner_killed_with_a_lease_loses_it_to_another(tmp_path: Path) -> None:
    reference, reference_id = local_reference(tmp_path)
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=ITERATIONS, lease_s=3.0)
    config["runtime"]["max_attempts"] = 2
    job_id = rs.new_job(store, tmp_path / "r", config)
    doomed = rs.start_runner(path, **{js.DELAY_ENV: "30"})  # holds its first rollout
    lost = rs.kill_holder_then_rescue(store, job_id, doomed, lambda: rs.start_runner(path))
    attempts = store.list_attempts(lost.rollout_id)
    assert [a.status for a in attempts] == ["unresponsive", "succeeded"]
    assert attempts[0].worker_id == lost.worker_id != attempts[1].worker_id
    assert "lease expired" in (attempts[0].error or "")
    assert max(rs.queued_keys(store, job_id).values()) == 1
    finished = store.get_job(job_id)
    assert rs.outcome(store, finished) == rs.outcome(reference, reference.get_job(reference_id))


@pytest.mark.slow
def test_a_job_killed_with_rollouts_in_flight_resumes_exactly(tmp_path: Path) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=6)
    job_id = rs.new_job(store, tmp_path / "r", config)
    reference_id = rs.new_job(reference, tmp_path / "local6", _local(config))
    assert run_job(reference, reference_id).state == "succeeded"
    with rs.runners(path, 2, **{js.DELAY_ENV: "0.05"}):
        worker = subprocess.Popen(
            js.worker_command(job_id, str(path)),
            env=js.worker_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            js.wait_until(lambda: (c := store.get_checkpoint(job_id)) and c.number >= 2, 90)
            js.wait_until(lambda: _in_flight(store, job_id), timeout=30, poll=0.01)
            os.kill(worker.pid, signal.SIGKILL)
            killed_at = time.time()
            assert worker.wait(timeout=30) == -signal.SIGKILL
        finally:
            rs.stop([worker])
        js.wait_until(lambda: not _in_flight(store, job_id), timeout=30)  # runners finish
        assert store.get_job(job_id).state == "running"
        resumed = run_job(store, job_id)
    assert resumed.state == "succeeded"
    late = [
        r
        for r in store.list_rollouts(limit=None).items
        if r.finished_at is not None and r.finished_at.timestamp() > killed_at
    ]
    assert late, "no rollout finished after the kill"
    assert max(rs.queued_keys(store, job_id).values()) == 1  # none run twice
    events = [e for e in rs.outcome(store, resumed)["events"] if e[0] != "resumed"]
    expected = rs.outcome(reference, reference.get_job(reference_id))
    assert rs.outcome(store, resumed)["best"] == expected["best"]
    assert rs.outcome(store, resumed)["result"] == expected["result"]
    assert events == expected["events"]


def _local(config: dict[str, object]) -> dict[str, object]:
    runtime = dict(config["runtime"])  # type: ignore[call-overload]
    runtime.update(executor="local", workdir=str(Path(str(runtime["workdir"])) / "local"))
    return {**config, "runtime": runtime}


def _in_flight(store: SqlStore, job_id: str) -> bool:
    page = store.list_rollouts(RolloutFilter(job_id=job_id, status=["queuing", "running"]))
    return page.total > 0


@pytest.mark.slow
def test_a_token_budget_stops_a_runners_job_as_it_stops_a_local_one(tmp_path: Path) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=4, budget=rs.TOKENS)
    expected = run_job(reference, rs.new_job(reference, tmp_path / "local", config))
    assert str((expected.result or {}).get("stop_reason")).startswith("lm_tokens")

    path = tmp_path / "runners.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path / "r", iterations=4)
    config["job"]["budget"] = rs.TOKENS
    job_id = rs.new_job(store, tmp_path / "r", config)
    with rs.runners(path, 2):
        job = run_job(store, job_id)
    assert rs.outcome(store, job) == rs.outcome(reference, expected)
    assert rs.task_tokens(job) == rs.task_tokens(expected)
    assert rs.task_tokens(job)[1] > 0


def test_a_runners_job_on_a_memory_store_fails_with_one_clear_line(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = rs.new_job(store, tmp_path, rs.runners_config(tmp_path, iterations=1))
    with pytest.raises(ConfigError, match=r"needs a store other processes can open"):
        run_job(store, job_id)
    assert store.get_job(job_id).state == "failed"


def test_a_runners_job_without_a_runner_says_so_then_fails_after_runner_wait_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "lonely.db"
    store = SQLiteStore(path)
    config = rs.runners_config(tmp_path, iterations=1)
    config["runtime"]["runner_wait_s"] = 0.4
    job_id = rs.new_job(store, tmp_path, config)
    with caplog.at_level(logging.WARNING, logger="emery.workers.queue_executor"):
        job = run_job(store, job_id)
    command = f"emery runner --store {path}"
    waiting = [r.getMessage() for r in caplog.records if "waiting for a runner" in r.getMessage()]
    assert len(waiting) == 1
    assert command in waiting[0]
    assert job.state == "failed"
    assert "no runner claimed a rollout of this job in 0.4 s" in str(job.error)
    assert command in str(job.error)


def test_a_runner_refuses_a_store_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    assert run_cli(["runner", "--store", str(missing), "--idle-exit-s", "0"]) != 0
    assert f"no store at {missing}" in one_error_line(capsys.readouterr().err)
    assert not missing.exists()
