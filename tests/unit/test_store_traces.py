"""The store's rollouts, attempts, spans, resources, workers and systems; schema versions;
store locations; SQLite specifics (WAL, writers in several processes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from store_fixtures import BACKENDS, make_store

from emery.core.errors import ConfigError
from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.store import (
    IllegalTransition,
    MemoryStore,
    NewJob,
    NotFound,
    RolloutFilter,
    SchemaError,
    SpanFilter,
    SQLiteStore,
    WorkerRecord,
    open_store,
)
from emery.store import migrate as migrations
from emery.store.schema import SCHEMA_VERSION
from emery.store.sql import SqlStore


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store(request.param, tmp_path)


def rollout(rollout_id: str, **fields: object) -> Rollout:
    config = RolloutConfig(max_attempts=3, timeout_seconds=5.0, unresponsive_seconds=2.0)
    return Rollout.model_validate(
        {
            "id": rollout_id,
            "job_id": "job-1",
            "candidate_id": "c1",
            "example_id": "e1",
            "split": "val",
            "config": config,
            **fields,
        }
    )


def test_rollouts_follow_their_status_machine(store: SqlStore) -> None:
    store.add_rollouts([rollout("ro-1"), rollout("ro-2", candidate_id="c2")])
    assert store.get_rollout("ro-1").status == "queuing"
    store.update_rollout("ro-1", status="preparing")
    running = store.update_rollout("ro-1", status="running")
    assert running.started_at is not None
    requeued = store.update_rollout("ro-1", status="queuing")  # a retriable failure
    assert requeued.status == "queuing"
    store.update_rollout("ro-1", status="running")
    done = store.update_rollout("ro-1", status="succeeded", score=0.75, output={"a": 1})
    assert (done.score, done.output, done.finished_at is not None) == (0.75, {"a": 1}, True)
    with pytest.raises(IllegalTransition, match="rollout ro-1 is succeeded"):
        store.update_rollout("ro-1", status="running")
    with pytest.raises(NotFound):
        store.update_rollout("ro-x", status="running")
    page = store.list_rollouts(RolloutFilter(job_id="job-1", status=["queuing"]))
    assert [r.id for r in page.items] == ["ro-2"]
    assert store.list_rollouts(RolloutFilter(candidate_id="c1")).items[0].config.max_attempts == 3


def test_attempts_count_on_their_rollout_and_heartbeat(store: SqlStore) -> None:
    store.add_rollouts([rollout("ro-1")])
    first = store.add_attempt(Attempt(rollout_id="ro-1", number=1))
    assert first.started_at is not None
    store.update_attempt("ro-1:1", status="running")
    failed = store.update_attempt("ro-1:1", status="timeout", error="took too long")
    assert failed.finished_at is not None
    assert failed.error == "took too long"
    with pytest.raises(IllegalTransition):
        store.update_attempt("ro-1:1", status="running")
    store.add_attempt(Attempt(rollout_id="ro-1", number=2, worker_id="w"))
    beat = store.update_attempt("ro-1:2")
    assert beat.heartbeat_at is not None
    assert beat.status == "preparing"
    assert [a.number for a in store.list_attempts("ro-1")] == [1, 2]
    assert store.get_rollout("ro-1").attempt_count == 2


def span(span_id: str, *, attempt: str = "ro-1:1", **fields: object) -> SpanRecord:
    return SpanRecord.model_validate(
        {
            "trace_id": "t" * 32,
            "span_id": span_id,
            "name": f"span {span_id}",
            "start_time": 100.0,
            "end_time": 101.0,
            "attributes": {"gen_ai.request.model": "fake"},
            "events": [{"name": "reward", "time": 100.5, "attributes": {"value": 1.0}}],
            "rollout_id": "ro-1",
            "attempt_id": attempt,
            **fields,
        }
    )


def test_spans_are_numbered_per_attempt_and_queried(store: SqlStore) -> None:
    store.add_spans([span("a1"), span("a2"), span("b1", attempt="ro-1:2")])
    store.add_spans([span("a3"), span("a1")])  # a1 again: ignored
    page = store.list_spans(SpanFilter(attempt_id="ro-1:1"))
    assert [(s.span_id, s.sequence) for s in page.items] == [("a1", 0), ("a2", 1), ("a3", 2)]
    assert page.items[0].events[0].attributes == {"value": 1.0}
    assert [s.span_id for s in store.list_spans(SpanFilter(rollout_id="ro-1")).items] == [
        "a1",
        "a2",
        "a3",
        "b1",
    ]
    later = store.list_spans(SpanFilter(attempt_id="ro-1:1", since_seq=0), limit=1, offset=1)
    assert (later.total, [s.span_id for s in later.items]) == (2, ["a3"])
    store.add_spans([span("c1", sequence=7, attempt="ro-1:3")])
    assert store.list_spans(SpanFilter(attempt_id="ro-1:3")).items[0].sequence == 7


def test_a_batch_of_live_trace_rows_is_written_in_one_call(store: SqlStore) -> None:
    store.add_traces(
        [rollout("ro-1", status="running", attempt_count=1)],
        [Attempt(rollout_id="ro-1", number=1, status="running")],
        [span("a1")],
    )
    # the next batch replaces the rows it carries again and appends its spans
    store.add_traces(
        [rollout("ro-1", status="succeeded", attempt_count=1, score=1.0), rollout("ro-2")],
        [Attempt(rollout_id="ro-1", number=1, status="succeeded")],
        [span("a2"), span("a1")],
    )
    store.add_traces([], [], [])
    done = store.get_rollout("ro-1")
    assert (done.status, done.score, done.attempt_count) == ("succeeded", 1.0, 1)
    assert store.get_rollout("ro-2").status == "queuing"
    assert [a.status for a in store.list_attempts("ro-1")] == ["succeeded"]
    spans = store.list_spans(SpanFilter(attempt_id="ro-1:1")).items
    assert [(s.span_id, s.sequence) for s in spans] == [("a1", 0), ("a2", 1)]


def test_resources_are_versioned(store: SqlStore) -> None:
    first = store.put_resource("prompts", {"solve": "v1"}, kind="prompt_set")
    second = store.put_resource("prompts", {"solve": "v2"}, kind="prompt_set", job_id="j")
    assert (first.version, second.version) == (1, 2)
    assert store.get_resource("prompts").content == {"solve": "v2"}
    assert store.get_resource("prompts", 1).content == {"solve": "v1"}
    assert [r.version for r in store.list_resources("prompts")] == [1, 2]
    with pytest.raises(NotFound):
        store.get_resource("prompts", 3)


def test_workers_and_systems_are_registered(store: SqlStore) -> None:
    store.register_worker(WorkerRecord(id="host:1", host="host", pid=1))
    store.worker_heartbeat("host:1", status="busy", job_id="job-1")
    [worker] = store.list_workers()
    assert (worker.status, worker.job_id) == ("busy", "job-1")
    first = store.register_system(name="prog", kind="prompt_program", version="v1", config={})
    again = store.register_system(name="prog", kind="prompt_program", version="v1", config={})
    store.register_system(name="prog", kind="prompt_program", version="v2", config=None)
    assert first == again
    assert [s.version for s in store.list_systems("prog")] == ["v1", "v2"]


def test_a_new_store_records_its_schema_version(store: SqlStore) -> None:
    with store.engine.connect() as conn:
        assert migrations.stored_version(conn) == SCHEMA_VERSION
        tables = set(inspect(conn).get_table_names())
    assert {
        "systems",
        "jobs",
        "job_events",
        "checkpoints",
        "candidates",
        "evaluations",
        "rollouts",
        "attempts",
        "spans",
        "resources",
        "workers",
    } <= tables


def test_an_older_schema_is_migrated_and_a_newer_one_refused(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_job(NewJob(id="keep", name="keep", algorithm="gepa", config={}))

    def add_notes(conn: object) -> None:
        conn.execute(text("CREATE TABLE migration_notes (note VARCHAR(20))"))  # type: ignore[attr-defined]

    monkeypatch.setitem(migrations.MIGRATIONS, SCHEMA_VERSION, add_notes)
    assert migrations.ensure_schema(store.engine, target=SCHEMA_VERSION + 1) == SCHEMA_VERSION + 1
    with store.engine.connect() as conn:
        assert inspect(conn).has_table("migration_notes")
        assert migrations.stored_version(conn) == SCHEMA_VERSION + 1
    assert store.get_job("keep").name == "keep"  # data survives the migration
    with pytest.raises(SchemaError, match="newer emery"):
        migrations.ensure_schema(store.engine)
    with pytest.raises(SchemaError, match="no migration"):
        migrations.ensure_schema(store.engine, target=SCHEMA_VERSION + 2)
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE migration_notes"))


def test_store_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_store("memory://"), MemoryStore)
    by_path = open_store(tmp_path / "a" / "emery.db")
    assert isinstance(by_path, SQLiteStore)
    assert by_path.path == tmp_path / "a" / "emery.db"
    by_url = open_store(f"sqlite:///{tmp_path}/b.db")
    assert isinstance(by_url, SQLiteStore)
    assert by_url.path == tmp_path / "b.db"
    monkeypatch.setenv("EMERY_STORE", str(tmp_path / "env.db"))
    assert open_store().url.endswith("env.db")  # type: ignore[union-attr]
    monkeypatch.delenv("EMERY_STORE")
    monkeypatch.chdir(tmp_path)
    default = open_store()
    assert isinstance(default, SQLiteStore)
    assert default.path.resolve() == (tmp_path / ".emery" / "emery.db").resolve()
    with pytest.raises(ConfigError, match="unknown store"):
        open_store("mysql://x")


def test_the_sqlite_file_uses_wal_and_waits_for_locks(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000


WRITER = textwrap.dedent(
    """
    import sys
    from emery.core.events import Event
    from emery.store import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    for index in range(40):
        data = {"writer": sys.argv[2], "index": index}
        store.append_events("job-1", [Event(kind="tick", data=data)])
    """
)


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_processes_writing_one_sqlite_file_never_collide(tmp_path: Path) -> None:
    path = tmp_path / "emery.db"
    SQLiteStore(path).create_job(NewJob(id="job-1", name="j", algorithm="gepa", config={}))
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{i}"]) for i in range(3)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    events = SQLiteStore(path).list_events("job-1")
    assert [e.seq for e in events] == list(range(1, 122))
    for name in ("p0", "p1", "p2"):
        mine = [e.data["index"] for e in events if e.data.get("writer") == name]
        assert mine == list(range(40))
