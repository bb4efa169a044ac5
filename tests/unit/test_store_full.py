"""A disk that fills while a step is stored: the step is not recorded, the job pauses with
one line saying why, and a resume once space is back ends as an uninterrupted run does
(no step lost, none stored twice)."""

from __future__ import annotations

import errno
import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from sqlalchemy import event

from emery.config import parse_config
from emery.core.events import CheckpointSaved
from emery.jobs import JobEngine, create_job, run_job
from emery.jobs.engine import store_full_reason
from emery.store import MemoryStore, SQLiteStore
from emery.store.errors import StoreFull
from emery.store.sql.store import SqlStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

ITERATIONS = 4
DEAD_OWNER = f"{socket.gethostname()}:999999999"  # a process that is gone


def _reference(tmp_path: Path) -> dict[str, Any]:
    store = MemoryStore()
    config = parse_config(js.search_config(tmp_path / ".emery", iterations=ITERATIONS))
    job = run_job(store, create_job(store, config, base_dir=tmp_path).id)
    return _summary(store, job.id)


def _summary(store: SqlStore, job_id: str) -> dict[str, Any]:
    job = store.get_job(job_id)
    result = job.result or {}
    checkpoints = [
        e.data["iteration"] for e in store.list_events(job_id) if e.kind == CheckpointSaved.kind
    ]
    return {
        "state": job.state,
        "best": (job.best_candidate_id, job.best_score, job.baseline_score),
        "result": {k: result.get(k) for k in ("best_test", "baseline_test", "best_val")},
        "checkpoints": checkpoints,
        "scores": js.stored_scores(store, job_id),
    }


def _raise_sqlite() -> None:
    raise sqlite3.OperationalError("database or disk is full")


def _raise_os() -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@contextmanager
def _full_after(store: SqlStore, commits: int, fault: Callable[[], None]) -> Iterator[list[int]]:
    """``commit_step`` raises ``fault`` from its ``commits + 1``-th call on, until the
    block ends (space is freed)."""
    calls = [0]
    real = store.commit_step

    def commit_step(job_id: str, write: Any) -> Any:
        calls[0] += 1
        if calls[0] > commits:
            fault()
        return real(job_id, write)

    store.commit_step = commit_step  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        del store.commit_step


@contextmanager
def _real_full_disk_after(store: SQLiteStore, commits: int) -> Iterator[None]:
    """After ``commits`` steps are stored, the SQLite file may not grow (``PRAGMA
    max_page_count``): SQLite's own SQLITE_FULL, "database or disk is full", for every
    write that needs a new page, until the block ends."""

    def cap(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        pages = cursor.execute("PRAGMA page_count").fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count = {pages}")
        cursor.close()

    real = store.commit_step
    calls = [0]

    def commit_step(job_id: str, write: Any) -> Any:
        calls[0] += 1
        if calls[0] == commits + 1:
            store.engine.dispose()
            event.listen(store.engine, "connect", cap)
        return real(job_id, write)

    store.commit_step = commit_step  # type: ignore[method-assign]
    try:
        yield
    finally:
        del store.commit_step
        if event.contains(store.engine, "connect", cap):
            event.remove(store.engine, "connect", cap)
        store.engine.dispose()


def _job(store: SqlStore, tmp_path: Path) -> str:
    config = parse_config(js.search_config(tmp_path / ".emery", iterations=ITERATIONS))
    return create_job(store, config, base_dir=tmp_path).id


@pytest.mark.parametrize("fault", [_raise_sqlite, _raise_os], ids=["sqlite", "oserror"])
def test_a_full_disk_at_a_step_pauses_the_job_and_a_resume_ends_as_an_uninterrupted_run(
    tmp_path: Path, fault: Callable[[], None]
) -> None:
    reference = _reference(tmp_path)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path)
    notes: list[str] = []
    with _full_after(store, 2, fault) as calls:  # start and step 1 stored, step 2 not
        engine = JobEngine(store, job_id, on_note=notes.append, store_retry_s=0)
        paused = run_job(store, job_id, engine=engine)
    assert calls[0] >= 3
    assert paused.state == "paused"
    assert paused.error is None
    assert paused.stop_reason == store_full_reason(job_id)
    assert paused.stop_reason == (
        "the store could not write the step (No space left on device): free space and run"
        f" emery jobs resume {job_id}"
    )
    assert f"paused: {store_full_reason(job_id)}" in notes
    assert store.get_checkpoint(job_id).number == 1  # type: ignore[union-attr]
    resumed = run_job(store, job_id)
    assert _summary(store, job_id) == reference
    assert resumed.state == "succeeded"


def test_sqlite_refusing_to_grow_the_file_stops_the_run_with_one_line_and_a_resume_finishes_it(
    tmp_path: Path,
) -> None:
    """A real SQLITE_FULL: the pause needs a page too, so the run stops with the line and
    leaves the job running; once space is back the resume takes it over."""
    reference = _reference(tmp_path)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path)
    engine = JobEngine(store, job_id, store_retry_s=0)
    engine.owner = DEAD_OWNER  # the process that exits with the line
    with _real_full_disk_after(store, 2), pytest.raises(StoreFull) as raised:
        run_job(store, job_id, engine=engine)
    assert str(raised.value).startswith(store_full_reason(job_id))
    assert store.get_job(job_id).state == "running"
    assert store.get_checkpoint(job_id).number == 1  # type: ignore[union-attr]
    run_job(store, job_id)
    assert _summary(store, job_id) == reference


def test_a_pause_that_cannot_be_written_either_leaves_the_job_running_for_a_takeover(
    tmp_path: Path,
) -> None:
    reference = _reference(tmp_path)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = _job(store, tmp_path)
    real_transition = store.transition
    tries: list[str] = []

    def transition(job_id: str, state: str, **kwargs: Any) -> Any:
        if state == "paused":
            tries.append(state)
            _raise_sqlite()
        return real_transition(job_id, state, **kwargs)

    store.transition = transition  # type: ignore[method-assign]
    engine = JobEngine(store, job_id, store_retry_s=0.01)
    engine.owner = DEAD_OWNER  # the process that exits with the line
    with _full_after(store, 1, _raise_sqlite), pytest.raises(StoreFull) as raised:
        run_job(store, job_id, engine=engine)
    del store.transition
    assert str(raised.value).startswith(store_full_reason(job_id))
    assert "\n" not in str(raised.value)
    assert tries == ["paused", "paused"]  # written once more after the wait
    assert store.get_job(job_id).state == "running"
    run_job(store, job_id)  # emery jobs resume: the gone owner's job is taken over
    assert _summary(store, job_id) == reference
