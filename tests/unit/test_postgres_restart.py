"""PostgreSQL stopped (``pg_ctl stop -m immediate``) and started again in the middle of a
job, of a runner's claims and of OTLP ingest: the job and the runner wait ("store
unavailable, retrying") and go on with no step lost and no rollout scored twice; the
server answers 503 with ``Retry-After``, never 500, while the store is away.

Each test starts a throwaway PostgreSQL server of its own on a free port (``initdb`` and
``pg_ctl`` as ``.ci/run`` runs them; as the ``postgres`` user when run by root), so it
needs the PostgreSQL binaries, not ``EMERY_TEST_POSTGRES_URL``; skipped without them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import runners_support as rs
from fastapi.testclient import TestClient

from emery.config import parse_config
from emery.core.events import CheckpointSaved, IterationCompleted
from emery.jobs import JobEngine, create_job, run_job
from emery.proxy.serving import free_port
from emery.server.api import create_server_app
from emery.store import MemoryStore, PostgresStore, SpanFilter, SQLiteStore
from emery.store.records import RolloutFilter
from emery.store.schema import metadata
from emery.store.sql import SqlStore
from emery.store.waiting import RETRYING, StoreWait

pytest.importorskip("psycopg")
pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("random_search_algorithm")]

OUTAGE_S = 2.0
WAIT = StoreWait(total_s=60, first_s=0.1, max_s=0.5)


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Postgres:
    """A throwaway PostgreSQL server in a folder of its own, stopped and started at will."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="emery-pg-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.dir / "data"), "--auth=trust", "--username=postgres")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off"
        data, log = str(self.dir / "data"), str(self.dir / "server.log")
        self._run("pg_ctl", "-D", data, "-l", log, "-w", "-o", options, "start")

    def stop(self) -> None:
        """Stop at once: every connection is cut, as by a crash (recovery on start)."""
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")

    def restart_after(self, seconds: float) -> None:
        self.stop()
        time.sleep(seconds)
        self.start()

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Postgres]:
    bin_dir = _bin()
    if bin_dir is None:
        pytest.skip("the PostgreSQL binaries (initdb, pg_ctl) are not installed")
    pg = Postgres(bin_dir)
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


@pytest.fixture
def store(server: Postgres) -> Iterator[SqlStore]:
    """A store on the throwaway server, its tables empty."""
    store = PostgresStore(server.url)
    metadata.drop_all(store.engine)
    store.close()
    store = PostgresStore(server.url)
    try:
        yield store
    finally:
        metadata.drop_all(store.engine)
        store.close()


def _summary(store: SqlStore, job_id: str) -> dict[str, Any]:
    """What an interrupted run must share with an uninterrupted one."""
    job = store.get_job(job_id)
    result = job.result or {}
    events = store.list_events(job_id)
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    return {
        "state": job.state,
        "best": (job.best_candidate_id, job.best_score, job.baseline_score),
        "result": {k: result.get(k) for k in ("best_test", "best_val")},
        "checkpoints": [e.data["iteration"] for e in events if e.kind == CheckpointSaved.kind],
        "iterations": [e.data["iteration"] for e in events if e.kind == IterationCompleted.kind],
        "scores": js.stored_scores(store, job_id),
        "scored rollouts": Counter(
            (r.candidate_id, r.example_id, r.split) for r in rollouts if r.score is not None
        ),
    }


def _run_in_thread(store: SqlStore, job_id: str, notes: list[str]) -> tuple[threading.Thread, Any]:
    outcome: dict[str, Any] = {}
    engine = JobEngine(store, job_id, on_note=notes.append, store_wait=WAIT)

    def run() -> None:
        outcome["job"] = run_job(store, job_id, engine=engine)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _restart_mid_job(
    server: Postgres, store: SqlStore, job_id: str, thread: threading.Thread
) -> None:
    """Once a step is stored (and the job still runs), PostgreSQL goes away for a while."""
    js.wait_until(lambda: store.get_checkpoint(job_id) is not None, timeout=60)
    assert thread.is_alive(), "the job ended before PostgreSQL could be stopped"
    server.restart_after(OUTAGE_S)
    thread.join(timeout=120)
    assert not thread.is_alive()


def test_a_job_goes_on_through_a_postgresql_restart_with_every_step_stored_once(
    server: Postgres, store: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = js.search_config(tmp_path / ".emery", iterations=6)
    reference = MemoryStore()
    done = run_job(reference, create_job(reference, parse_config(config), base_dir=tmp_path).id)
    monkeypatch.setenv(js.DELAY_ENV, "0.02")  # a step takes a while: the stop falls mid-job
    job_id = create_job(store, parse_config(config), base_dir=tmp_path).id
    notes: list[str] = []
    thread, outcome = _run_in_thread(store, job_id, notes)
    _restart_mid_job(server, store, job_id, thread)
    assert outcome["job"].state == "succeeded", outcome["job"].stop_reason
    assert _summary(store, job_id) == _summary(reference, done.id)
    assert any(RETRYING in note for note in notes), notes


@pytest.mark.slow  # a runner process starts: 10 to 25 s on a loaded 2-core machine
def test_a_runners_job_and_its_runner_go_on_through_a_postgresql_restart(
    server: Postgres, store: SqlStore, tmp_path: Path
) -> None:
    reference = SQLiteStore(tmp_path / "local.db")
    config = js.search_config(tmp_path / "local" / ".emery", iterations=3, concurrency=4)
    done = run_job(reference, rs.new_job(reference, tmp_path / "local", config))
    job_id = rs.new_job(store, tmp_path / "r", rs.runners_config(tmp_path / "r", iterations=3))
    env = {js.DELAY_ENV: "0.02", "EMERY_STORE_WAIT_S": "60"}
    with rs.runners(server.url, 1, **env) as (runner,):
        notes: list[str] = []
        thread, outcome = _run_in_thread(store, job_id, notes)
        js.wait_until(lambda: rs.queued_keys(store, job_id), timeout=60)  # a claim ran
        _restart_mid_job(server, store, job_id, thread)
        assert runner.poll() is None, "the runner died while PostgreSQL was away"
    assert outcome["job"].state == "succeeded", outcome["job"].stop_reason
    assert rs.outcome(store, outcome["job"]) == rs.outcome(reference, done)
    assert set(rs.queued_keys(store, job_id).values()) == {1}  # each rollout finished once
    rs.assert_ran_on_runners(store, job_id, 1)


def _spans(span_id: str) -> dict[str, Any]:
    """An OTLP/JSON export of one application span."""
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": "chat app",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_the_server_answers_503_with_retry_after_while_postgresql_is_away(
    server: Postgres, store: SqlStore
) -> None:
    app = create_server_app(store)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/traces", json=_spans("00000000000000a1")).status_code == 200
        server.stop()
        try:
            for method, path, body in (
                ("GET", "/api/jobs", None),
                ("POST", "/v1/traces", _spans("00000000000000a2")),
            ):
                answer = client.request(method, path, json=body)
                assert answer.status_code == 503, (path, answer.text)
                assert answer.headers["Retry-After"] == "5"
                assert "store" in answer.json()["detail"]
        finally:
            server.start()
        for _ in range(2):  # the exporter sends the refused batch again, maybe twice
            assert client.post("/v1/traces", json=_spans("00000000000000a2")).status_code == 200
        assert client.get("/api/jobs").status_code == 200
    stored = store.list_spans(SpanFilter(), limit=None).items
    assert sorted(s.span_id for s in stored) == ["00000000000000a1", "00000000000000a2"]
