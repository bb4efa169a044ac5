"""Runner processes and job comparisons for the ``executor = "runners"`` tests.

Imported as ``runners_support`` (``tests/unit`` is on ``sys.path``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jobs_support as js

from emery.config import parse_config
from emery.core.rollouts import Attempt
from emery.jobs import create_job
from emery.store import JobRecord, RolloutFilter
from emery.store.queue import is_queued_rollout
from emery.store.sql import SqlStore

TOKENS = {"lm_tokens": 900}  # a budget a 4-iteration search runs out of half way


def task_tokens(job: JobRecord) -> tuple[int, int, int]:
    """The task model's (calls, prompt tokens, completion tokens) a job reports."""
    task = ((job.result or {}).get("usage") or {}).get("task") or {}
    return (task.get("calls", 0), task.get("prompt_tokens", 0), task.get("completion_tokens", 0))


def runners_config(folder: Path, *, iterations: int, lease_s: float = 30.0) -> dict[str, Any]:
    config = js.search_config(folder / ".emery", iterations=iterations, concurrency=4)
    config["runtime"].update(executor="runners", lease_s=lease_s)
    return config


def new_job(store: SqlStore, folder: Path, config: dict[str, Any]) -> str:
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def start_runner(store_path: Path | str, *extra: str, **env: str) -> subprocess.Popen[bytes]:
    """``python -m emery runner`` on the store, polling fast, quiet."""
    command = [sys.executable, "-m", "emery", "runner", "--store", str(store_path)]
    return subprocess.Popen(
        [*command, "--poll-s", "0.05", *extra],
        env=js.worker_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextmanager
def runners(store_path: Path | str, n: int, **env: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` runner processes, stopped (SIGTERM, then SIGKILL) on exit."""
    started = [start_runner(store_path, **env) for _ in range(n)]
    try:
        yield started
    finally:
        stop(started)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def outcome(store: SqlStore, job: JobRecord) -> dict[str, Any]:
    """What must not depend on where rollouts ran: the best, the scores, the events."""
    result = job.result or {}
    return {
        "state": job.state,
        "best": (job.best_candidate_id, job.best_score, job.baseline_score),
        "result": {
            key: result.get(key)
            for key in ("best_test", "baseline_test", "best_val", "baseline_val", "stop_reason")
        },
        "events": [
            (e.kind, e.data) for e in store.list_events(job.id) if e.kind not in ("started",)
        ],
    }


def queued_keys(store: SqlStore, job_id: str) -> Counter[tuple[str, str, str]]:
    """(candidate, example, split) of every finished queued rollout of a job."""
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    return Counter(
        (str(r.candidate_id), str(r.example_id), str(r.split))
        for r in rollouts
        if is_queued_rollout(r.metadata) and r.status in ("succeeded", "failed")
    )


def start_job(job_id: str, store: Path | str) -> subprocess.Popen[bytes]:
    """The job run by a job process of its own (``jobs_support.worker_command``)."""
    return subprocess.Popen(
        js.worker_command(job_id, str(store)),
        env=js.worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def running_attempts(store: SqlStore) -> list[Attempt]:
    """Every attempt some worker holds right now."""
    return [
        attempt
        for rollout in store.list_rollouts(limit=None).items
        for attempt in store.list_attempts(rollout.id)
        if attempt.status == "running"
    ]


def kill_holder_then_rescue(
    store: SqlStore,
    job_id: str,
    doomed: subprocess.Popen[bytes],
    rescuer: Callable[[], subprocess.Popen[bytes]],
) -> Attempt:
    """Run the job in a process of its own; once ``doomed`` holds an attempt, SIGKILL it
    and start ``rescuer()``; wait for the job to end (it must exit 0). The attempt held."""
    job = start_job(job_id, store.url)
    started: list[subprocess.Popen[bytes]] = []
    try:
        held = js.wait_until(lambda: running_attempts(store), timeout=60)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
        started.append(rescuer())
        js.wait_until(lambda: store.get_job(job_id).terminal, timeout=120, poll=0.2)
        assert job.wait(timeout=30) == 0
    finally:
        stop([doomed, job, *started])
    return held[0]


def assert_ran_on_runners(store: SqlStore, job_id: str, runners: int) -> None:
    """Every rollout went through the queue once and ran on one of ``runners`` runners
    (both took some; the job none)."""
    runner_ids = {w.id for w in store.list_workers() if w.metadata.get("kind") == "runner"}
    assert len(runner_ids) == runners
    keys = queued_keys(store, job_id)
    assert keys, "no rollout went through the queue"
    assert max(keys.values()) == 1  # each (candidate, example, split) ran once
    ran_by = {
        attempt.worker_id
        for rollout in store.list_rollouts(limit=None).items
        for attempt in store.list_attempts(rollout.id)
    }
    assert ran_by == runner_ids
