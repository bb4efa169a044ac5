"""The rollout queue on every store backend: claims, leases, requeues, results kept once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from store_fixtures import BACKENDS, make_store

from emery.core.rollouts import Rollout, RolloutConfig
from emery.store import NewJob
from emery.store.queue import RESULT_KEY, queue_metadata
from emery.store.records import RolloutEnd, WorkerRecord
from emery.store.sql import SqlStore


@dataclass
class FakeClock:
    """UNIX time that moves only when a test advances it."""

    now: float

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store(request.param, tmp_path)


@pytest.fixture
def clock(store: SqlStore) -> FakeClock:
    """The store's queue clock, advanced by the test instead of sleeping out a lease."""
    fake = FakeClock(time.time())
    store.clock = fake
    return fake


def running_job(store: SqlStore, job_id: str = "job-1") -> str:
    store.create_job(NewJob(id=job_id, name=job_id, algorithm="gepa", config={}))
    store.transition(job_id, "queued")
    store.transition(job_id, "running")
    return job_id


def enqueue(
    store: SqlStore, job_id: str, n: int = 1, *, lease_s: float = 30.0, max_attempts: int = 2
) -> list[str]:
    rollouts = [
        Rollout(
            job_id=job_id,
            candidate_id="c1",
            example_id=f"e{i}",
            split="val",
            config=RolloutConfig(max_attempts=max_attempts),
            metadata=queue_metadata("candidate:c1", 1, lease_s),
        )
        for i in range(n)
    ]
    store.add_rollouts(rollouts)
    return [r.id for r in rollouts]


def finish(store: SqlStore, rollout: Rollout, score: float) -> bool:
    end = RolloutEnd(
        status="succeeded",
        attempt_status="succeeded",
        output=str(score),
        score=score,
        result={"score": score},
    )
    return store.finish_rollout(rollout.id, f"{rollout.id}:{rollout.attempt_count}", end)


def test_a_claim_takes_each_queued_rollout_once_with_a_held_attempt(store: SqlStore) -> None:
    job = running_job(store)
    ids = enqueue(store, job, 3)
    claimed = [store.claim_rollout("w1") for _ in range(4)]
    assert [c.id if c else None for c in claimed] == [*ids, None]
    first = claimed[0]
    assert first is not None
    assert first.status == "running"
    assert first.attempt_count == 1
    attempt = store.list_attempts(first.id)[0]
    assert (attempt.status, attempt.worker_id, attempt.number) == ("running", "w1", 1)
    assert store.heartbeat_attempt(attempt.id)


def test_only_queued_rollouts_of_running_jobs_are_claimed(store: SqlStore) -> None:
    job = running_job(store)
    store.add_rollouts([Rollout(job_id=job, candidate_id="c", example_id="local")])  # not queued
    store.create_job(NewJob(id="paused", name="p", algorithm="gepa", config={}))
    enqueue(store, "paused")
    assert store.claim_rollout("w1") is None
    mine = enqueue(store, job)
    claimed = store.claim_rollout("w1", job_id=job)
    assert claimed is not None
    assert claimed.id == mine[0]


def test_concurrent_claims_never_share_a_rollout(store: SqlStore) -> None:
    job = running_job(store)
    ids = enqueue(store, job, 12)
    taken: list[str] = []
    lock = threading.Lock()

    def claim_all(worker: str) -> None:
        while (rollout := store.claim_rollout(worker)) is not None:
            with lock:
                taken.append(rollout.id)

    threads = [threading.Thread(target=claim_all, args=(f"w{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(ids)


def test_an_expired_lease_requeues_then_fails_when_no_attempt_is_left(
    store: SqlStore, clock: FakeClock
) -> None:
    job = running_job(store)
    (rid,) = enqueue(store, job, lease_s=30, max_attempts=2)
    first = store.claim_rollout("slow")
    assert first is not None
    clock.advance(29)
    assert store.expire_leases() == 0  # still within its lease
    clock.advance(1)
    assert store.expire_leases(job_id=job) == 1
    assert store.get_rollout(rid).status == "queuing"
    assert not store.heartbeat_attempt(f"{rid}:1")  # the slow worker learns it lost the lease
    second = store.claim_rollout("fast")
    assert second is not None
    assert second.attempt_count == 2
    clock.advance(20)
    assert store.heartbeat_attempt(f"{rid}:2")  # a heartbeat renews the lease
    clock.advance(29)
    assert store.expire_leases() == 0
    clock.advance(1)
    assert store.expire_leases() == 1
    failed = store.get_rollout(rid)
    assert failed.status == "failed"
    assert "lease expired" in (failed.error or "")
    assert [a.status for a in store.list_attempts(rid)] == ["unresponsive", "unresponsive"]


def test_a_result_written_twice_is_kept_once(store: SqlStore, clock: FakeClock) -> None:
    job = running_job(store)
    (rid,) = enqueue(store, job, lease_s=30)
    slow = store.claim_rollout("slow")
    clock.advance(30)
    assert store.expire_leases() == 1
    fast = store.claim_rollout("fast")
    assert slow is not None
    assert fast is not None
    assert finish(store, fast, 1.0)
    assert not finish(store, slow, 0.5)  # the late result of the expired lease
    stored = store.get_rollout(rid)
    assert (stored.status, stored.score, stored.metadata[RESULT_KEY]) == (
        "succeeded",
        1.0,
        {"score": 1.0},
    )


def test_a_requeue_needs_the_current_attempt(store: SqlStore) -> None:
    job = running_job(store)
    (rid,) = enqueue(store, job)
    claimed = store.claim_rollout("w1")
    assert claimed is not None
    assert not store.requeue_rollout(rid, f"{rid}:1", 2, attempt_status="failed", error="x")
    assert store.requeue_rollout(rid, f"{rid}:1", 1, attempt_status="failed", error="boom")
    assert store.get_rollout(rid).status == "queuing"
    assert store.list_attempts(rid)[0].status == "failed"


def test_the_workers_list_counts_each_runner_s_finished_attempts(store: SqlStore) -> None:
    job = running_job(store)
    ids = enqueue(store, job, 3)
    for worker in ("w1", "w2"):
        store.register_worker(WorkerRecord(id=worker, host="h", pid=1, metadata={"concurrency": 2}))
    first, second, third = (store.claim_rollout(w) for w in ("w1", "w1", "w2"))
    assert first is not None
    assert second is not None
    assert third is not None
    assert finish(store, first, 1.0)
    assert store.requeue_rollout(second.id, f"{second.id}:1", 1, attempt_status="failed", error="x")
    store.worker_heartbeat("w2", status="busy", job_id=job)
    listed = {w.id: w for w in store.list_workers()}
    assert (listed["w1"].rollouts_done, listed["w1"].rollouts_failed) == (1, 1)
    assert (listed["w2"].rollouts_done, listed["w2"].rollouts_failed) == (0, 0)  # one running
    assert (listed["w2"].status, listed["w2"].job_id) == ("busy", job)
    assert listed["w1"].metadata == {"concurrency": 2}
    assert third.id in ids


def test_a_finish_claims_the_next_rollout_in_the_same_call(store: SqlStore) -> None:
    job = running_job(store)
    first, second = enqueue(store, job, n=2)
    claimed = store.claim_rollout("w")
    assert claimed is not None
    assert claimed.id == first
    ended = RolloutEnd(
        status="succeeded", attempt_status="succeeded", output="1", score=1.0, result={"score": 1.0}
    )
    kept, nxt = store.finish_and_claim(first, f"{first}:1", ended, worker_id="w", job_id=job)
    assert kept
    assert nxt is not None
    assert nxt.id == second
    assert store.get_rollout(first).status == "succeeded"
    assert [a.worker_id for a in store.list_attempts(second)] == ["w"]  # leased to w
    again, last = store.finish_and_claim(first, f"{first}:1", ended, worker_id="w")
    assert (again, last) == (False, None)  # kept once; nothing left to claim
