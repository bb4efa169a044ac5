"""The scale benchmark's ``emery-http`` side (issue 49): the runner workload through
``HttpQueue`` against a server's ``/api/queue``, and its check that killed runners leave no
rollout scored twice."""

from __future__ import annotations

import sys
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "scale"))

from emery_http_side import HttpSide, kill_check
from workload import run_runners

from emery.server.api import create_server_app
from emery.store import MemoryStore
from emery.workers.http_queue import HttpQueue


def side_over(store: MemoryStore) -> HttpSide:
    app = create_server_app(store)
    return HttpSide(store, lambda: HttpQueue("http://testserver", client=TestClient(app)))


def test_runner_threads_take_every_rollout_over_http() -> None:
    store = MemoryStore()
    side = side_over(store)
    got = run_runners(side, 4, 20)
    assert got["rollouts_per_s"] > 0
    assert len(side.queues) == 4  # one HttpQueue per runner thread
    assert store.list_rollouts(limit=None).total == 20


def test_killed_runners_leave_every_rollout_kept_once() -> None:
    store = MemoryStore()
    got = kill_check(side_over(store), kills=4, rollouts=40, runners=4, lease_s=0.5)
    assert got["ok"], got
    assert got["killed"] == 4
    assert got["kept_twice"] == 0
    assert got["kept_never"] == 0
    assert got["unresponsive_attempts"] >= got["abandoned"] == 2
    assert got["late_finish_kept"] <= got["finished_late"] == 2
