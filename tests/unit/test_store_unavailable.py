"""A store that is away for a while (``StoreUnavailable``) at a step's commit: the job waits
with "store unavailable, retrying" and goes on, every step stored once; a commit whose
answer was lost after the store had written it is not stored twice; a store that stays
away pauses the job with one line, and a resume ends as an uninterrupted run does."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from sqlalchemy.exc import OperationalError

from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.core.events import CheckpointSaved, Event, IterationCompleted
from emery.jobs import JobEngine, create_job, run_job
from emery.jobs.engine import store_away_reason
from emery.store import MemoryStore, SQLiteStore
from emery.store.errors import StoreUnavailable, store_unavailable
from emery.store.records import StepWrite
from emery.store.sql.store import SqlStore
from emery.store.waiting import RETRYING, StoreWait, WaitingStore, wait_out

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

ITERATIONS = 4
QUICK = StoreWait(total_s=0.2, first_s=0.01, max_s=0.05)


def _away() -> OperationalError:
    """What psycopg's dropped connection looks like through SQLAlchemy."""
    return OperationalError(
        "COMMIT", {}, Exception("server closed the connection unexpectedly"), False
    )


def _summary(store: SqlStore, job_id: str) -> dict[str, Any]:
    job = store.get_job(job_id)
    result = job.result or {}
    events = store.list_events(job_id)
    return {
        "state": job.state,
        "best": (job.best_candidate_id, job.best_score, job.baseline_score),
        "result": {k: result.get(k) for k in ("best_test", "baseline_test", "best_val")},
        "checkpoints": [e.data["iteration"] for e in events if e.kind == CheckpointSaved.kind],
        "iterations": [e.data["iteration"] for e in events if e.kind == IterationCompleted.kind],
        "scores": js.stored_scores(store, job_id),
    }


def _job(store: SqlStore, tmp_path: Path) -> str:
    config = parse_config(js.search_config(tmp_path / ".emery", iterations=ITERATIONS))
    return create_job(store, config, base_dir=tmp_path).id


def _reference(tmp_path: Path) -> dict[str, Any]:
    store = MemoryStore()
    return _summary(store, run_job(store, _job(store, tmp_path / "reference")).id)


def _commit_fails(
    store: SqlStore, fails: Callable[[int, bool], bool], *, after_write: bool = False
) -> list[int]:
    """``commit_step``'s call n (1-based) raises a dropped connection when ``fails(n, done)``
    (``done``: some earlier call failed); ``after_write``: the store writes it first (the
    answer to the COMMIT was lost)."""
    calls: list[int] = []
    real = store.commit_step

    def commit_step(job_id: str, write: StepWrite) -> list[Event]:
        calls.append(len(calls) + 1)
        failing = fails(len(calls), len(calls) > 1 and calls[-2] < 0)
        if failing and after_write:
            real(job_id, write)
        if failing:
            calls[-1] = -calls[-1]
            raise StoreUnavailable("cannot connect to the store: connection refused") from _away()
        return real(job_id, write)

    store.commit_step = commit_step  # type: ignore[method-assign]
    return calls


def test_the_wait_grows_to_its_bound_and_other_errors_pass_at_once() -> None:
    wait = StoreWait(total_s=12, first_s=0.5, max_s=4)
    assert list(wait.delays()) == [0.5, 1, 2, 4, 4, 0.5]
    assert list(StoreWait(total_s=0).delays()) == []

    slept: list[float] = []
    tries = iter([_away(), _away(), None])

    def call() -> str:
        error = next(tries)
        if error is not None:
            raise error
        return "ok"

    lines: list[str] = []
    assert wait_out(call, wait, on_wait=lines.append, sleep=slept.append) == "ok"
    assert slept == [0.5, 1]
    assert [line.split(" in ")[0] for line in lines] == [RETRYING, RETRYING]

    def broken() -> None:
        raise sqlite3.IntegrityError("UNIQUE constraint failed")

    with pytest.raises(sqlite3.IntegrityError):
        wait_out(broken, wait, sleep=slept.append)
    assert slept == [0.5, 1]  # no wait for an error that does not pass by itself

    def always() -> None:
        raise _away()

    with pytest.raises(StoreUnavailable) as raised:
        wait_out(always, StoreWait(total_s=1, first_s=0.5), sleep=lambda _: None)
    assert str(raised.value) == (
        "the store was unavailable for 1 s: server closed the connection unexpectedly"
    )


@pytest.mark.parametrize(
    "message",
    [
        "FATAL:  the database system is not yet accepting connections",
        "FATAL:  the database system is starting up",
        "server closed the connection unexpectedly",
        "consuming input failed: the connection is lost",
    ],
)
def test_what_postgresql_says_while_it_restarts_is_a_store_away(message: str) -> None:
    error = OperationalError("SELECT 1", {}, Exception(f"connection failed: {message}"), False)
    assert store_unavailable(error)
    assert not store_unavailable(
        OperationalError("SELECT 1", {}, Exception('database "x" does not exist'), False)
    )


def test_the_wait_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMERY_STORE_WAIT_S", "30")
    assert StoreWait.from_env().total_s == 30
    monkeypatch.setenv("EMERY_STORE_WAIT_S", "soon")
    with pytest.raises(ConfigError, match="EMERY_STORE_WAIT_S must be a number of seconds"):
        StoreWait.from_env()


def test_the_same_write_sent_twice_is_stored_once(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = _job(store, tmp_path)
    store.transition(job_id, "queued")
    store.transition(job_id, "running", fields={"owner": "me"})
    write = StepWrite(
        events=[Event.of(CheckpointSaved(iteration=0))], expect_owner="me", write_id="w1"
    )
    first = store.commit_step(job_id, write)
    again = store.commit_step(job_id, write)
    assert [e.seq for e in again] == [e.seq for e in first]
    assert [e.kind for e in store.list_events(job_id)].count(CheckpointSaved.kind) == 1
    other = store.commit_step(job_id, write.model_copy(update={"write_id": "w2"}))
    assert other[0].seq == (first[0].seq or 0) + 1  # another write is stored


@pytest.mark.parametrize("after_write", [False, True], ids=["not-written", "answer-lost"])
def test_a_store_away_at_a_commit_is_waited_out_and_every_step_is_stored_once(
    tmp_path: Path, after_write: bool
) -> None:
    reference = _reference(tmp_path)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path)
    calls = _commit_fails(store, lambda n, _: n in (3, 4, 5), after_write=after_write)
    notes: list[str] = []
    engine = JobEngine(store, job_id, on_note=notes.append, store_wait=QUICK)
    job = run_job(store, job_id, engine=engine)
    assert job.state == "succeeded"
    assert [n < 0 for n in calls[:6]] == [False, False, True, True, True, False]
    waits = [note for note in notes if RETRYING in note]
    assert len(waits) == 3
    assert waits[0].startswith(f"job {job_id}: {RETRYING} in 0.01 s")
    assert _summary(store, job_id) == reference
    checkpoints = Counter(_summary(store, job_id)["checkpoints"])
    assert set(checkpoints.values()) == {1}


def test_a_store_that_stays_away_pauses_the_job_with_one_line_and_a_resume_finishes_it(
    tmp_path: Path,
) -> None:
    reference = _reference(tmp_path)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path)
    _commit_fails(store, lambda n, _: n >= 3)  # start and step 1 stored, then never
    notes: list[str] = []
    engine = JobEngine(store, job_id, on_note=notes.append, store_wait=QUICK, store_retry_s=0)
    paused = run_job(store, job_id, engine=engine)
    del store.commit_step
    assert paused.state == "paused"
    reason = store_away_reason(
        job_id, "the store was unavailable for 0 s: cannot connect to the store: connection refused"
    )
    assert paused.stop_reason == reason
    assert "\n" not in reason
    assert reason.endswith(f"run emery jobs resume {job_id} once the store is back")
    assert f"paused: {reason}" in notes
    assert store.get_checkpoint(job_id).number == 1  # type: ignore[union-attr]
    run_job(store, job_id)
    assert _summary(store, job_id) == reference


def test_a_waiting_store_passes_attributes_and_can_try_once() -> None:
    store = MemoryStore()
    waiting = WaitingStore(store, QUICK)
    assert waiting.url == "memory://"
    assert waiting.list_jobs().total == 0
    waiting.waiting = False
    seen: list[int] = []

    def flaky() -> None:
        seen.append(1)
        raise StoreUnavailable("away")

    store.flaky = flaky  # type: ignore[attr-defined]
    with pytest.raises(StoreUnavailable, match="away"):
        waiting.flaky()
    assert seen == [1]


def test_a_training_jobs_writes_wait_out_a_store_away(caplog: pytest.LogCaptureFixture) -> None:
    """The training engine's store (and so its trainer's) waits as the search engine's
    does: an event written while the store is away is stored once, after the wait."""
    from emery.core.events import event
    from emery.jobs.training_engine import TrainingEngine
    from emery.store.records import NewJob

    store = MemoryStore()
    store.create_job(NewJob(id="j-train0001", name="sft", kind="sft", algorithm="sft", config={}))
    real, failures = store.append_events, [2]

    def append_events(job_id: str, events: list[Event]) -> list[Event]:
        if failures[0]:
            failures[0] -= 1
            raise StoreUnavailable("the store is away (a test)")
        return real(job_id, events)

    store.append_events = append_events  # type: ignore[method-assign]
    engine = TrainingEngine(store, "j-train0001", trainer=None, store_wait=QUICK)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="emery.jobs.training_engine"):
        engine._add(event("train_loss", step=1, loss=0.5))
    stored = store.list_events("j-train0001", kinds=["train_loss"])
    assert [e.data["loss"] for e in stored] == [0.5]
    assert failures == [0]
    assert RETRYING in caplog.text
