"""Who runs a job when several starts, pauses and resumes come at once: a job process reserves
the job before any work (``ownership.reserve_job``), so a second job process exits before it
does any; a pause while a job process starts stops that job process, and a resume before its claim
hands the job back to it instead of starting another (issue 50, item 1)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

import emery.jobs.engine as engine_module
from emery.config import parse_config
from emery.jobs import JobBusy, create_job, pause_job
from emery.jobs.engine import JobEngine
from emery.jobs.manage import queued_for_run
from emery.jobs.ownership import queued_runs_only
from emery.server.launcher import resume
from emery.store import MemoryStore, SQLiteStore
from emery.store.records import JobRecord
from emery.store.sql import SqlStore
from emery.store.states import IllegalTransition, OwnershipLost

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

FIRST, SECOND = "worker-a.example:101", "worker-b.example:202"
"""Owners on other hosts: alive while their heartbeat is fresh, as a process elsewhere."""


def new_job(store: SqlStore, folder: Path, iterations: int = 3) -> str:
    config = js.search_config(folder / ".emery", iterations=iterations)
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def engine(store: SqlStore, job_id: str, owner: str) -> JobEngine:
    """The run of ``job_id`` as the job process ``owner`` would make it."""
    run = JobEngine(store, job_id, poll_s=0.02)
    run.owner = owner
    return run


@dataclass
class Builds:
    """Who built a run (the work a job process does first); ``hold`` keeps the first builder
    inside until ``go`` is set. ``active``: the workers between their build and their end."""

    hold: bool = True
    delay_s: float = 0.0
    built: list[str] = field(default_factory=list)
    inside: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    active: set[str] = field(default_factory=set)
    most_active: int = 0

    def wrap(self, build: Callable[..., Any]) -> Callable[..., Any]:
        def building(*args: Any, **kwargs: Any) -> Any:
            name = threading.current_thread().name
            with self.lock:
                self.built.append(name)
                self.active.add(name)
                self.most_active = max(self.most_active, len(self.active))
                first = len(self.built) == 1
            if self.hold and first:
                self.inside.set()
                assert self.go.wait(30)
            time.sleep(self.delay_s)  # a job process starting up takes a while
            return build(*args, **kwargs)

        return building

    def ended(self) -> None:
        with self.lock:
            self.active.discard(threading.current_thread().name)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Builds]:
    seen = Builds()
    monkeypatch.setattr(engine_module, "build_runtime", seen.wrap(engine_module.build_runtime))
    stop = engine_module.stop_job

    def stopped(*args: Any, **kwargs: Any) -> Any:  # the job is out of this job process's hands
        try:
            return stop(*args, **kwargs)
        finally:
            seen.ended()

    monkeypatch.setattr(engine_module, "stop_job", stopped)
    yield seen
    seen.go.set()


def start(run: JobEngine, name: str, results: dict[str, Any]) -> threading.Thread:
    def main() -> None:
        try:
            results[name] = asyncio.run(run.run())
        except Exception as exc:
            results[name] = exc

    thread = threading.Thread(target=main, name=name)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_second_worker_exits_before_any_work(kind: str, tmp_path: Path, builds: Builds) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "emery.db")
    job_id = new_job(store, tmp_path)
    store.transition(job_id, "queued")  # as a resume leaves it for the job process it starts
    results: dict[str, Any] = {}
    first = start(engine(store, job_id, FIRST), "first", results)
    assert builds.inside.wait(30)
    with pytest.raises(JobBusy, match=f"process {FIRST} is starting it"):
        asyncio.run(engine(store, job_id, SECOND).run())
    builds.go.set()
    first.join(60)
    assert builds.built == ["first"]  # the second built nothing
    assert results["first"].state == "succeeded"
    assert [e.kind for e in store.list_events(job_id, kinds=["started", "resumed"])] == ["started"]


class Recorder:
    """A launcher that only records what it was asked to start."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, store: SqlStore, job_id: str) -> None:
        self.launched.append(job_id)


def test_a_resume_while_a_paused_worker_starts_hands_the_job_back(
    tmp_path: Path, builds: Builds
) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path)
    store.transition(job_id, "queued")
    results: dict[str, Any] = {}
    first = start(engine(store, job_id, FIRST), "first", results)
    assert builds.inside.wait(30)
    assert pause_job(store, job_id, wait_s=0).state == "paused"
    launcher = Recorder()
    answer = resume(store, launcher, job_id)
    assert (answer.state, answer.owner, launcher.launched) == ("queued", FIRST, [])
    with pytest.raises(IllegalTransition, match=f"already queued: process {FIRST} is starting"):
        resume(store, launcher, job_id)
    builds.go.set()
    first.join(60)
    assert results["first"].state == "succeeded"


def test_a_pause_while_a_worker_starts_keeps_the_job_paused(tmp_path: Path, builds: Builds) -> None:
    store = MemoryStore()
    job_id = new_job(store, tmp_path)
    store.transition(job_id, "queued")
    results: dict[str, Any] = {}
    first = start(engine(store, job_id, FIRST), "first", results)
    assert builds.inside.wait(30)
    assert pause_job(store, job_id, wait_s=0).state == "paused"
    builds.go.set()
    first.join(60)
    assert isinstance(results["first"], JobBusy)
    assert "was paused before its run started" in str(results["first"])
    job = store.get_job(job_id)
    assert (job.state, job.owner) == ("paused", None)
    assert not store.list_events(job_id, kinds=["started"])
    launcher = Recorder()
    assert resume(store, launcher, job_id).state == "queued"
    assert launcher.launched == [job_id]  # nobody holds it now: this resume starts a run


class Workers:
    """Starts each run in a thread of its own, as a job process of its own would run
    it (an owner of its own); remembers how each ended."""

    def __init__(self, builds: Builds) -> None:
        self.builds = builds
        self.numbers = itertools.count(1)
        self.threads: list[threading.Thread] = []
        self.ended: dict[str, Any] = {}

    def launch(self, store: SqlStore, job_id: str) -> None:
        queued_for_run(store, job_id)
        number = next(self.numbers)
        run = engine(store, job_id, f"worker-{number}.example:{number}")
        name = f"worker-{number}"

        def main() -> None:
            try:
                with queued_runs_only():
                    self.ended[name] = asyncio.run(run.run()).state
            except Exception as exc:
                self.ended[name] = f"{type(exc).__name__}: {exc}"
            finally:
                self.builds.ended()

        thread = threading.Thread(target=main, name=name)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in list(self.threads):
            thread.join(60)


def test_twelve_pauses_and_resumes_at_once_leave_one_worker(
    tmp_path: Path, builds: Builds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.01")
    builds.hold, builds.delay_s = False, 0.2
    store = MemoryStore()
    job_id = new_job(store, tmp_path, iterations=6)
    workers = Workers(builds)
    store.transition(job_id, "queued")
    workers.launch(store, job_id)
    js.wait_until(lambda: store.get_job(job_id).state == "running")
    assert pause_job(store, job_id, wait_s=30).state == "paused"  # the burst finds it paused
    barrier = threading.Barrier(12)
    answers: list[str] = []

    def ask(action: str) -> None:
        barrier.wait(10)
        try:
            if action == "pause":
                job: JobRecord = pause_job(store, job_id, wait_s=0)
            else:
                job = resume(store, workers, job_id)
            answers.append(f"{action}: {job.state}")
        except IllegalTransition as exc:
            answers.append(f"{action} refused: {exc}")

    askers = [
        threading.Thread(target=ask, args=("pause" if n % 2 else "resume",)) for n in range(12)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(30)
    assert len(answers) == 12
    refused = [answer for answer in answers if "refused" in answer]
    reasons = ("already", "a pause request came first")
    resumes = [answer for answer in refused if answer.startswith("resume")]
    assert all(any(why in answer for why in reasons) for answer in resumes), "\n".join(answers)
    deadline = time.monotonic() + 60
    while not store.get_job(job_id).terminal and time.monotonic() < deadline:
        if store.get_job(job_id).state == "paused":
            with contextlib.suppress(IllegalTransition):  # it moved meanwhile
                resume(store, workers, job_id)
        time.sleep(0.05)
    workers.join()
    assert store.get_job(job_id).state == "succeeded", workers.ended
    assert builds.most_active == 1, workers.ended  # never two workers at work at once
    losers = [how for how in workers.ended.values() if how != "succeeded" and how != "paused"]
    assert all(how.startswith("JobBusy") for how in losers), workers.ended


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_store_hands_a_job_over_only_as_the_caller_read_it(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "emery.db")
    job_id = new_job(store, tmp_path)
    reserved = store.swap_owner(job_id, FIRST, state="created", expect_owner=None)
    assert reserved is not None
    assert (reserved.owner, reserved.state) == (FIRST, "created")
    assert reserved.heartbeat_at is not None
    assert store.swap_owner(job_id, SECOND, state="created", expect_owner=None) is None
    assert store.swap_owner(job_id, SECOND, state="queued", expect_owner=FIRST) is None
    with pytest.raises(OwnershipLost):
        store.transition(job_id, "queued", expect=["created"], expect_owner=SECOND)
    job, _ = store.transition(job_id, "queued", expect=["created"], expect_owner=FIRST)
    assert (job.state, job.owner) == ("queued", FIRST)
    released = store.swap_owner(job_id, None, state="queued", expect_owner=FIRST)
    assert released is not None
    assert (released.owner, released.heartbeat_at) == (None, None)
    store.transition(job_id, "running", fields={"owner": "gone:1", "heartbeat_at": 0.0})
    with pytest.raises(OwnershipLost):
        store.take_over(job_id, owner=SECOND, expect_owner="someone else:2", reason="x")
    taken, [event] = store.take_over(job_id, owner=SECOND, expect_owner="gone:1", reason="x")
    assert (taken.owner, event.kind) == (SECOND, "resumed")
