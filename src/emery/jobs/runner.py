"""``emery runner``: a process that runs queued rollouts of ``executor = "runners"`` jobs.

A runner registers in the store's worker table, then each of its ``concurrency`` slots
claims the oldest queued rollout of a running job (a lease on its next attempt), runs that
one attempt with the job's system, task model and verifier (rebuilt from the job's stored
config, once per job), stores its spans, and writes the result. A heartbeat thread renews
the leases it holds; a runner that dies or stalls loses them after the rollout's
``lease_s`` and any runner or the job puts the rollout back in the queue. A retriable
failed attempt with attempts left is requeued rather than retried in place, so another
runner may take it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import cast

from emery.core.models import Split
from emery.core.results import ExampleResult
from emery.core.rollouts import Rollout
from emery.jobs.runner_work import Heartbeats, JobWork, build_job_work, fetch_candidate
from emery.store.protocol import Store
from emery.store.queue import DEFAULT_LEASE_S, LEASE_KEY
from emery.store.records import WorkerRecord

log = logging.getLogger(__name__)


def runner_id() -> str:
    """A worker id: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class RolloutWorker:
    """Claims and runs queued rollouts until stopped, idle for ``idle_exit_s`` or done with
    ``max_rollouts``; ``job_id`` limits it to one job."""

    def __init__(
        self,
        store: Store,
        *,
        worker_id: str | None = None,
        job_id: str | None = None,
        concurrency: int = 1,
        poll_s: float = 0.2,
        idle_exit_s: float | None = None,
        max_rollouts: int | None = None,
        heartbeat_s: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.worker_id = worker_id or runner_id()
        self.job_id = job_id
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.idle_exit_s = idle_exit_s
        self.max_rollouts = max_rollouts
        self.beats = Heartbeats(store, self.worker_id, heartbeat_s or DEFAULT_LEASE_S / 6)
        self.ran = 0
        self.kept = 0
        self._jobs: dict[str, JobWork] = {}
        self._broken: dict[str, str] = {}
        self._stopping = False
        self._last_work = time.monotonic()

    def stop(self) -> None:
        """Finish the rollouts in hand, claim no more."""
        self._stopping = True

    async def run(self) -> int:
        """Run until stopped; returns how many rollouts this runner ran."""
        self.store.register_worker(
            WorkerRecord(
                id=self.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                metadata={"kind": "runner", "job_id": self.job_id},
            )
        )
        self.beats.start()
        try:
            await asyncio.gather(*(self._slot() for _ in range(self.concurrency)))
        finally:
            self.beats.stop()
            for work in self._jobs.values():
                work.close()
            self.store.worker_heartbeat(self.worker_id, status="stopped")
        return self.ran

    def _done(self) -> bool:
        if self._stopping:
            return True
        if self.max_rollouts is not None and self.ran >= self.max_rollouts:
            return True
        idle = time.monotonic() - self._last_work
        return self.idle_exit_s is not None and idle >= self.idle_exit_s

    async def _slot(self) -> None:
        while not self._done():
            self.store.expire_leases()
            rollout = self.store.claim_rollout(self.worker_id, job_id=self.job_id)
            if rollout is None:
                await asyncio.sleep(self.poll_s)
                continue
            self.ran += 1
            await self._execute(rollout)
            self._last_work = time.monotonic()

    async def _execute(self, rollout: Rollout) -> None:
        """Run the claimed attempt of ``rollout`` and report how it ended."""
        number = rollout.attempt_count
        attempt_id = f"{rollout.id}:{number}"
        self.beats.hold(attempt_id, lease_of(rollout))
        try:
            work = self._work(str(rollout.job_id))
            candidate = fetch_candidate(self.store, rollout)
            example = work.example(rollout)
        except Exception as exc:  # a rollout this runner cannot run: fail it, once
            self.beats.release(attempt_id)
            self._fail(rollout, attempt_id, f"{type(exc).__name__}: {exc}")
            return
        before = rollout.model_copy(update={"status": "queuing", "attempt_count": number - 1})
        try:
            result = await work.evaluator.run_one(
                candidate, example, as_split(rollout.split), rollout=before
            )
        finally:
            self.beats.release(attempt_id)
        attempt = work.recorder.attempt(attempt_id)
        status = attempt.status if attempt is not None else "failed"
        retriable = status in rollout.config.retry_on and number < rollout.config.max_attempts
        if status != "succeeded" and retriable:
            error = (attempt.error if attempt is not None else None) or result.error or status
            self.store.requeue_rollout(
                rollout.id, attempt_id, number, attempt_status=status, error=error
            )
            return
        self._finish(rollout, attempt_id, status, result)

    def _finish(
        self, rollout: Rollout, attempt_id: str, status: str, result: ExampleResult
    ) -> None:
        kept = self.store.finish_rollout(
            rollout.id,
            attempt_id,
            status=result.rollout_status or ("succeeded" if result.error is None else "failed"),
            attempt_status=status,
            error=result.error,
            output=result.output,
            score=result.score,
            result=result.model_dump(mode="json"),
        )
        self.kept += int(kept)
        if not kept:
            log.info("rollout %s already had a result: this one was dropped", rollout.id)

    def _fail(self, rollout: Rollout, attempt_id: str, error: str) -> None:
        log.warning("rollout %s cannot run here: %s", rollout.id, error)
        result = ExampleResult(
            candidate_id=rollout.candidate_id or "",
            example_id=rollout.example_id or "",
            split=as_split(rollout.split),
            feedback=f"The run failed: {error}",
            error=error,
            failure="error",
            rollout_id=rollout.id,
            rollout_status="failed",
            attempts=rollout.attempt_count,
        )
        self._finish(rollout, attempt_id, "failed", result)

    def _work(self, job_id: str) -> JobWork:
        """The job's live objects, built on its first rollout (a job that cannot be built
        here fails every rollout with the same reason)."""
        if job_id in self._broken:
            raise RuntimeError(self._broken[job_id])
        work = self._jobs.get(job_id)
        if work is None:
            try:
                work = build_job_work(self.store, job_id, self.worker_id)
            except Exception as exc:
                self._broken[job_id] = f"{type(exc).__name__}: {exc}"
                raise
            self._jobs[job_id] = work
        return work


def as_split(value: str | None) -> Split | None:
    """A stored split name as a ``Split`` (None for none or an unknown name)."""
    return cast(Split, value) if value in ("train", "val", "test") else None


def lease_of(rollout: Rollout) -> float:
    """The lease of a queued rollout, in seconds."""
    return float(rollout.metadata.get(LEASE_KEY) or DEFAULT_LEASE_S)
