"""The store: jobs and their state machine, events, checkpoints, the atomic step commit,
candidates, evaluations and queries, on every backend."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from store_fixtures import BACKENDS, make_store

from emery.core.errors import ConfigError
from emery.core.events import Event, event
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Lineage
from emery.store import (
    JOB_STATES,
    JOB_TRANSITIONS,
    CheckpointRecord,
    EvaluationFilter,
    EvaluationRecord,
    IllegalTransition,
    JobFilter,
    NewJob,
    NotFound,
    OwnershipLost,
    SchemaError,
    SQLiteStore,
    StepWrite,
    schema,
)
from emery.store.migrate import ensure_schema
from emery.store.schema import SCHEMA_VERSION, metadata
from emery.store.sql import SqlStore

PATHS: dict[str, list[str]] = {
    "created": [],
    "queued": ["queued"],
    "running": ["queued", "running"],
    "paused": ["queued", "running", "paused"],
    "succeeded": ["queued", "running", "succeeded"],
    "failed": ["failed"],
    "cancelled": ["cancelled"],
}


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store(request.param, tmp_path)


def new_job(store: SqlStore, job_id: str = "job-1", **fields: Any) -> str:
    data: dict[str, Any] = {
        "id": job_id,
        "name": fields.pop("name", job_id),
        "algorithm": "gepa",
        "config": {"dataset": {"task": "word_problems"}},
        **fields,
    }
    store.create_job(NewJob(**data))
    return job_id


def drive(store: SqlStore, job_id: str, state: str) -> None:
    for target in PATHS[state]:
        store.transition(job_id, target)


def result(candidate: Candidate, example: str, score: float, split: str = "val") -> ExampleResult:
    return ExampleResult(
        candidate_id=candidate.id,
        example_id=example,
        split=split,  # type: ignore[arg-type]
        output={"answer": example},
        score=score,
        feedback=f"feedback {example}",
    )


def evaluation(
    candidate: Candidate, example: str, score: float, scope: str = "scope-a", split: str = "val"
) -> EvaluationRecord:
    return EvaluationRecord(
        scope=scope, example_hash=f"h-{example}", result=result(candidate, example, score, split)
    )


SEED = Candidate(components={"solve": "Answer the question."})
CHILD = SEED.derive(
    components={"solve": "Think, then answer."},
    lineage=Lineage(parents=(SEED.id,), generation=1, operation="mutate", iteration=0),
)


def test_a_new_job_is_created_with_its_first_event(store: SqlStore) -> None:
    new_job(store, system_name="program", metadata={"team": "a"})
    job = store.get_job("job-1")
    assert (job.state, job.kind, job.algorithm, job.system_name) == (
        "created",
        "optimize",
        "gepa",
        "program",
    )
    assert job.metadata == {"team": "a"}
    assert job.last_seq == 1
    [created] = store.list_events("job-1")
    assert (created.kind, created.seq, created.data["state"]) == ("created", 1, "created")
    assert created.at is not None


def test_every_job_transition_is_allowed_or_refused(store: SqlStore) -> None:
    for number, (current, target) in enumerate(
        (a, b) for a in JOB_STATES for b in JOB_STATES if a != b
    ):
        job_id = new_job(store, f"job-{number}")
        drive(store, job_id, current)
        if target in JOB_TRANSITIONS[current]:
            job, [stored] = store.transition(job_id, target)
            assert job.state == target
            assert stored.data["state"] == target
        else:
            before = store.get_job(job_id)
            with pytest.raises(IllegalTransition, match=f"is {current}: it cannot become"):
                store.transition(job_id, target)
            after = store.get_job(job_id)
            assert (after.state, after.last_seq) == (current, before.last_seq)


def test_transitions_stamp_times_and_clear_requests(store: SqlStore) -> None:
    new_job(store)
    drive(store, "job-1", "running")
    running = store.get_job("job-1")
    assert running.started_at is not None
    assert running.finished_at is None
    assert store.set_requested_action("job-1", "pause", only_state="running")
    assert not store.set_requested_action("job-1", "cancel", only_state="paused")
    assert store.get_job("job-1").requested_action == "pause"
    job, _ = store.transition("job-1", "cancelled", reason="stop")
    assert job.finished_at is not None
    assert job.requested_action is None
    with pytest.raises(IllegalTransition, match="not running"):
        store.transition("job-1", "paused", expect=["running"])


def test_running_resumed_keeps_the_first_start_time(store: SqlStore) -> None:
    new_job(store)
    drive(store, "job-1", "paused")
    first = store.get_job("job-1").started_at
    job, [resumed] = store.transition("job-1", "running", event_kind="resumed", reason="again")
    assert job.started_at == first
    assert (resumed.kind, resumed.data) == ("resumed", {"state": "running", "reason": "again"})


def raw(kind: str, **data: Any) -> Event:
    """An event of a kind no payload model claims: the store keeps any kind as it is."""
    return Event(kind=kind, data=data)


def test_events_have_a_sequence_per_job_and_can_be_tailed(store: SqlStore) -> None:
    new_job(store, "job-a")
    new_job(store, "job-b")
    stored = store.append_events("job-a", [raw("x.one", n=1), raw("x.two", n=2)])
    store.append_events("job-b", [raw("x.one", n=9)])
    assert [e.seq for e in stored] == [2, 3]
    assert [e.seq for e in store.list_events("job-b")] == [1, 2]
    assert [e.kind for e in store.list_events("job-a", since=1)] == ["x.one", "x.two"]
    assert [e.data for e in store.list_events("job-a", since=2)] == [{"n": 2}]
    assert [e.seq for e in store.list_events("job-a", kinds=["x.two", "created"])] == [1, 3]
    assert [e.seq for e in store.list_events("job-a", limit=1)] == [1]


def test_concurrent_appends_get_distinct_consecutive_numbers(store: SqlStore) -> None:
    new_job(store)
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for index in range(15):
                store.append_events("job-1", [raw("tick", writer=name, index=index)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    seqs = [e.seq for e in store.list_events("job-1")]
    assert seqs == list(range(1, 62))
    assert store.get_job("job-1").last_seq == 61


def step_write(owner: str | None = "me", **extra: Any) -> StepWrite:
    return StepWrite(
        events=[event("candidate_evaluated", candidate_id=SEED.id, split="val", score=0.5, n=2)],
        candidates=[SEED, CHILD],
        evaluations=[evaluation(SEED, "e1", 1.0), evaluation(SEED, "e2", 0.0)],
        checkpoint=CheckpointRecord(
            job_id="job-1", number=3, state={"iteration": 3}, budget={"metric_calls": 2}, usage={}
        ),
        job_fields={"best_candidate_id": SEED.id, "best_score": 0.5},
        expect_owner=owner,
        **extra,
    )


def running_job(store: SqlStore) -> None:
    new_job(store)
    drive(store, "job-1", "running")
    store.update_job("job-1", owner="me")


def test_a_step_is_stored_whole(store: SqlStore) -> None:
    running_job(store)
    stored = store.commit_step("job-1", step_write())
    assert [e.seq for e in stored] == [4]
    checkpoint = store.get_checkpoint("job-1")
    assert checkpoint is not None
    assert checkpoint.number == 3
    assert checkpoint.state == {"iteration": 3}
    assert [c.id for c in store.job_candidates("job-1")] == [SEED.id, CHILD.id]
    assert len(store.load_evaluations("scope-a")) == 2
    job = store.get_job("job-1")
    assert (job.best_candidate_id, job.best_score, job.last_seq) == (SEED.id, 0.5, 4)
    assert job.heartbeat_at is not None


def test_a_failing_step_writes_nothing(store: SqlStore) -> None:
    running_job(store)
    store.commit_step("job-1", step_write())
    broken = step_write()
    broken.events.append(Event(kind="broken", data={"value": object()}))
    broken.candidates = [CHILD.derive(components={"solve": "new"}, lineage=Lineage())]
    broken.evaluations = [evaluation(CHILD, "e9", 1.0)]
    broken.checkpoint = CheckpointRecord(
        job_id="job-1", number=4, state={"iteration": 4}, budget={}, usage={}
    )
    with pytest.raises(Exception):  # noqa: B017, PT011 - the driver's serialization error
        store.commit_step("job-1", broken)
    checkpoint = store.get_checkpoint("job-1")
    assert checkpoint is not None
    assert checkpoint.number == 3
    assert len(store.job_candidates("job-1")) == 2
    assert len(store.load_evaluations("scope-a")) == 2
    assert store.get_job("job-1").last_seq == 4


def test_a_step_from_a_process_that_lost_the_job_is_refused(store: SqlStore) -> None:
    running_job(store)
    with pytest.raises(OwnershipLost):
        store.commit_step("job-1", step_write(owner="someone else"))
    assert store.get_checkpoint("job-1") is None
    assert store.job_candidates("job-1") == []
    assert store.get_job("job-1").last_seq == 3


def test_the_final_step_moves_the_job_and_records_its_state_last(store: SqlStore) -> None:
    running_job(store)
    stored = store.commit_step(
        "job-1", step_write(final_state="succeeded", final_reason="budget spent")
    )
    assert [e.kind for e in stored] == ["candidate_evaluated", "succeeded"]
    assert stored[-1].data == {"state": "succeeded", "reason": "budget spent"}
    job = store.get_job("job-1")
    assert job.state == "succeeded"
    assert job.finished_at is not None
    with pytest.raises(OwnershipLost):
        store.commit_step("job-1", step_write(final_state="failed"))


def test_take_over_needs_the_owner_the_caller_saw(store: SqlStore) -> None:
    running_job(store)
    with pytest.raises(OwnershipLost):
        store.take_over("job-1", owner="new", expect_owner="not me", reason="x")
    job, [resumed] = store.take_over("job-1", owner="new", expect_owner="me", reason="crashed")
    assert job.owner == "new"
    assert resumed.kind == "resumed"
    assert resumed.data == {"state": "running", "reason": "crashed"}
    assert store.heartbeat("job-1", "new").heartbeat_at is not None


def test_evaluations_are_a_cache_keyed_by_scope_candidate_example_split(store: SqlStore) -> None:
    store.add_evaluations([evaluation(SEED, "e1", 1.0), evaluation(SEED, "e2", 0.0)])
    store.add_evaluations(
        [
            evaluation(SEED, "e1", 0.0),  # same key: the first result stays
            evaluation(SEED, "e1", 0.5, split="train"),
            evaluation(SEED, "e1", 0.25, scope="scope-b"),
        ]
    )
    by_key = {
        (r.result.example_id, r.result.split): r.result.score
        for r in store.load_evaluations("scope-a")
    }
    assert by_key == {("e1", "val"): 1.0, ("e2", "val"): 0.0, ("e1", "train"): 0.5}
    [other] = store.load_evaluations("scope-b")
    assert other.result.score == 0.25
    assert other.example_hash == "h-e1"
    loaded = store.load_evaluations("scope-a")[0].result
    assert loaded.output == {"answer": "e1"}
    assert loaded.feedback == "feedback e1"


def test_evaluations_can_be_filtered_sorted_and_paged(store: SqlStore) -> None:
    records = [evaluation(SEED, f"e{i}", i / 10) for i in range(7)]
    records[3].result.error = "boom"
    store.add_evaluations(records)
    page = store.list_evaluations(
        EvaluationFilter(scope="scope-a", min_score=0.2), sort="-score", limit=2, offset=1
    )
    assert page.total == 5
    assert [r.result.example_id for r in page.items] == ["e5", "e4"]
    errors = store.list_evaluations(EvaluationFilter(errors_only=True))
    assert [r.result.example_id for r in errors.items] == ["e3"]
    with pytest.raises(Exception, match="cannot sort by 'colour'"):
        store.list_evaluations(sort="colour")


def test_candidates_are_listed_best_first_with_their_scores(store: SqlStore) -> None:
    new_job(store)
    store.update_job("job-1", eval_scope="scope-a")
    third = CHILD.derive(components={"solve": "Third."}, lineage=Lineage(operation="manual"))
    store.add_candidates("job-1", [SEED, CHILD, third, SEED])
    store.add_evaluations(
        [
            evaluation(SEED, "e1", 1.0),
            evaluation(SEED, "e2", 0.0),
            evaluation(CHILD, "e1", 1.0),
            evaluation(CHILD, "e2", 1.0),
            evaluation(CHILD, "e3", 1.0, split="train"),
        ]
    )
    page = store.list_candidates("job-1")
    assert [(c.id, c.score, c.n) for c in page.items] == [
        (CHILD.id, 1.0, 2),
        (SEED.id, 0.5, 2),
        (third.id, None, 0),
    ]
    assert page.items[0].candidate.lineage.parents == (SEED.id,)
    top = store.list_candidates("job-1", limit=1)
    assert top.total == 3
    assert [c.id for c in top.items] == [CHILD.id]
    train = store.list_candidates("job-1", split="train")
    assert (train.items[0].id, train.items[0].n) == (CHILD.id, 1)
    oldest = store.list_candidates("job-1", sort="ordinal")
    assert [c.ordinal for c in oldest.items] == [0, 1, 2]
    assert store.get_candidate("job-1", CHILD.id[:6]) == CHILD
    with pytest.raises(NotFound):
        store.get_candidate("job-1", "zzzz")


def test_jobs_can_be_filtered_sorted_paged_and_found_by_prefix(store: SqlStore) -> None:
    for index in range(5):
        new_job(
            store,
            f"j-{index:02d}",
            name=f"run{index % 2}",
            system_name="sys-a" if index < 3 else "sys-b",
            algorithm="gepa" if index % 2 else "mipro",
        )
    drive(store, "j-01", "running")
    page = store.list_jobs(JobFilter(system_name="sys-a"), sort="-created_at", limit=2)
    assert page.total == 3
    assert [j.id for j in page.items] == ["j-02", "j-01"]
    assert [j.id for j in store.list_jobs(JobFilter(state=["running"])).items] == ["j-01"]
    assert store.list_jobs(JobFilter(algorithm="gepa")).total == 2
    assert [j.id for j in store.list_jobs(sort="created_at", offset=3).items] == ["j-03", "j-04"]
    assert store.resolve_job_id("j-03") == "j-03"
    assert store.resolve_job_id("run1") == "j-03"
    with pytest.raises(NotFound, match="several"):
        store.resolve_job_id("j-0")
    with pytest.raises(NotFound, match="no job"):
        store.resolve_job_id("nope")
    with pytest.raises(NotFound):
        store.get_job("nope")


def test_deleting_a_job_keeps_the_evaluation_cache(store: SqlStore) -> None:
    running_job(store)
    store.commit_step("job-1", step_write())
    store.delete_job("job-1")
    with pytest.raises(NotFound):
        store.get_job("job-1")
    assert store.list_events("job-1") == []
    assert len(store.load_evaluations("scope-a")) == 2


def test_another_programs_database_is_refused_and_left_as_it_was(store: SqlStore) -> None:
    metadata.drop_all(store.engine)
    with store.engine.begin() as conn:
        conn.execute(text("CREATE TABLE jobs (id INTEGER PRIMARY KEY, title VARCHAR(20))"))
        conn.execute(text("CREATE TABLE app_users (id INTEGER PRIMARY KEY)"))
    try:
        with pytest.raises(SchemaError, match=r"not an emery store.*app_users, jobs"):
            ensure_schema(store.engine)
        with store.engine.connect() as conn:
            assert sorted(inspect(conn).get_table_names()) == ["app_users", "jobs"]
    finally:
        with store.engine.begin() as conn:
            conn.execute(text("DROP TABLE jobs"))
            conn.execute(text("DROP TABLE app_users"))
    assert ensure_schema(store.engine) == SCHEMA_VERSION  # an empty database becomes a store


def test_a_sqlite_file_of_another_program_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, title TEXT)")
        db.execute("INSERT INTO jobs (title) VALUES ('mine')")
    before = path.read_bytes()
    with pytest.raises(SchemaError, match=re.escape(f"the store {path} is not an emery store")):
        SQLiteStore(path)
    assert path.read_bytes() == before  # not even switched to WAL mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_schema_version_that_is_not_a_number_is_one_error(store: SqlStore) -> None:
    version = schema.meta.c.key == "schema_version"
    with store.engine.begin() as conn:
        conn.execute(schema.meta.update().where(version).values(value="two"))
    try:
        with pytest.raises(SchemaError, match=r"schema version 'two' .* is not a number"):
            ensure_schema(store.engine)
    finally:
        with store.engine.begin() as conn:
            conn.execute(schema.meta.update().where(version).values(value=str(SCHEMA_VERSION)))


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_an_empty_id_matches_nothing(store: SqlStore, blank: str) -> None:
    new_job(store)
    store.add_candidates("job-1", [SEED])
    with pytest.raises(ConfigError, match="job id is empty"):
        store.resolve_job_id(blank)
    with pytest.raises(ConfigError, match="candidate id is empty"):
        store.get_candidate("job-1", blank)
