"""``emery runner``: a process that runs queued rollouts of ``executor = "runners"`` jobs.

A runner registers in the store's worker table, then each of its ``concurrency`` slots
claims the oldest queued rollout of a running job (a lease on its next attempt), runs that
one attempt with the job's system, task model and verifier (rebuilt from the job's stored
config, once per job), stores its spans, and writes the result. A heartbeat thread renews
the leases it holds; a runner that dies or stalls loses them after the rollout's
``lease_s`` and any runner or the job puts the rollout back in the queue. A retriable
failed attempt with attempts left is requeued rather than retried in place, so another
runner may take it. A store that is away for now (PostgreSQL restarting) is waited out
(``store.waiting``: every claim, result and requeue sent again for up to
``EMERY_STORE_WAIT_S``, each wait a "store unavailable, retrying" warning); they are
conditional updates, so one whose connection dropped after the store had written it is
not applied twice.

What it rebuilds per job (``build_job_work``: the job's system, data, verifier and task
model from its stored config, an evaluator whose spans go to the job's store) is also what
the Ray executor's workers run a rollout with. For an RL job on an agent the rollouts are
its episodes and the task model samples each from the policy of its step
(``training.agent_policy``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from emery.config.evaluation_scope import evaluation_scope
from emery.config.loading import job_config
from emery.config.resolve import open_cache, resolve_job, resolve_lm
from emery.core.errors import EmeryError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.evaluation.evaluator import Evaluator
from emery.lm.cache import ResponseCache
from emery.lm.provider_errors import ProviderStop
from emery.store.protocol import RolloutQueue
from emery.store.queue import DEFAULT_LEASE_S, LEASE_KEY, RESOURCE_KEY, VERSION_KEY
from emery.store.records import RolloutEnd, WorkerRecord
from emery.store.waiting import StoreWait, waiting_store
from emery.tracing.store_recorder import StoreRecorder
from emery.training.agent_policy import episode_lm, episode_of
from emery.training.rl_job import runs_agent_episodes
from emery.verifiers.judge import uses_judge, with_judge

log = logging.getLogger(__name__)

TICK_S = 0.05
PROVIDER_STOP_PAUSE_S = 5.0  # after a provider refused or kept a call waiting too long


class QueueRecorder:
    """Spans go to the job's store; rollout and attempt rows belong to the queue protocol
    (claims, leases, results), so they are only remembered here, never written (``rows``:
    written as a local job writes them, for executors without a queue)."""

    def __init__(self, inner: StoreRecorder, *, rows: bool = False) -> None:
        self.inner = inner
        self.rows = rows
        self._attempts: dict[str, Attempt] = {}
        self._lock = threading.Lock()

    def save_rollout(self, rollout: Rollout) -> None:
        if self.rows:
            self.inner.save_rollout(rollout)

    def save_attempt(self, attempt: Attempt) -> None:
        if self.rows:
            self.inner.save_attempt(attempt)
            return
        with self._lock:
            self._attempts[attempt.id] = attempt.model_copy()

    def add_spans(self, spans: Sequence[SpanRecord]) -> None:
        self.inner.add_spans(spans)

    def flush(self) -> None:
        self.inner.flush()

    def attempt(self, attempt_id: str) -> Attempt | None:
        """The last state this runner saw of an attempt, popped."""
        with self._lock:
            return self._attempts.pop(attempt_id, None)


@dataclass
class JobWork:
    """One job's live objects in a runner."""

    job_id: str
    examples: dict[tuple[str, str], Example]
    evaluator: Evaluator
    recorder: QueueRecorder
    cache: ResponseCache | None
    episodes: bool = False
    """An agent RL job: its rollouts are episodes of its examples (``<example>@<step>.<n>``)."""

    def example(self, rollout: Rollout) -> Example:
        split, example_id = rollout.split or "", rollout.example_id or ""
        example = self.examples.get((split, example_id))
        if example is None and self.episodes:
            example = episode_of(self.examples, split, example_id)
        if example is None:
            raise EmeryError(
                f"job {self.job_id} has no {rollout.split} example {rollout.example_id!r}"
                " in this runner's copy of its dataset"
            )
        return example

    def close(self) -> None:
        self.recorder.flush()
        if self.cache is not None:
            self.cache.close()


def build_job_work(
    store: RolloutQueue, job_id: str, worker_id: str, *, queued: bool = True
) -> JobWork:
    """Rebuild a job's system, dataset, verifier and task model from its stored config;
    refuse a job made from Python objects or whose evaluation scope differs here."""
    job = store.get_job(job_id)
    if job.metadata.get("in_process_inputs"):
        raise EmeryError(
            f"job {job_id} was created from Python objects: runners can only run jobs"
            " described by their config"
        )
    config = job_config(job)
    base_dir = Path(job.base_dir or ".")
    resolved = resolve_job(config, base_dir).checked()
    dataset, system, verifier = resolved.dataset, resolved.system, resolved.verifier
    scope = evaluation_scope(config, system, verifier, dataset=dataset)
    if job.eval_scope is not None and scope != job.eval_scope:
        raise EmeryError(
            f"job {job_id}'s system, task model or verifier differ in this runner"
            " (another version of the code or config?): its results would not be comparable"
        )
    cache = open_cache(config, base_dir)
    episodes = runs_agent_episodes(config, system)
    lm = (
        episode_lm(config, base_dir, job_id)  # sampled from the policy of each episode's step
        if episodes
        else resolve_lm(config.lm.task, cache=cache)
    )
    if uses_judge(verifier):
        judge = resolve_lm(config.lm.for_role("judge"), role="judge", cache=cache)
        verifier = with_judge(verifier, judge)
    # queued: rollout and attempt rows belong to the queue; else recorded as a local job does
    recorder = QueueRecorder(StoreRecorder(store, job_id, worker_id=worker_id), rows=not queued)
    evaluator = Evaluator(
        system,
        verifier,
        lm,
        concurrency=1,
        rollouts=RolloutConfig.from_runtime(config.runtime),
        recorder=recorder,
        job_id=job_id,
    )
    examples = {
        (split, example.id): example
        for split in ("train", "val", "test")
        for example in dataset.split(split)
    }
    return JobWork(job_id, examples, evaluator, recorder, cache, episodes=episodes)


def fetch_candidate(store: RolloutQueue, rollout: Rollout) -> Candidate:
    """The candidate a queued rollout names, from its versioned resource."""
    name = rollout.metadata.get(RESOURCE_KEY)
    version = rollout.metadata.get(VERSION_KEY)
    if not isinstance(name, str):
        raise EmeryError(f"rollout {rollout.id} names no candidate resource")
    record = store.get_resource(name, int(version) if version is not None else None)
    candidate = Candidate.model_validate(record.content)
    if candidate.id != rollout.candidate_id:
        raise EmeryError(
            f"resource {name} v{record.version} holds candidate {candidate.id[:12]},"
            f" not {str(rollout.candidate_id)[:12]}"
        )
    return candidate


class Heartbeats:
    """A thread renewing the leases of the attempts this runner holds and the worker row,
    every ``period_s``: a rollout that blocks the event loop does not lose its lease."""

    def __init__(self, store: RolloutQueue, worker_id: str, period_s: float) -> None:
        self.store = store
        self.worker_id = worker_id
        self.period_s = period_s
        self._held: dict[str, str | None] = {}  # attempt id -> its job
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="emery-runner-beat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def hold(self, attempt_id: str, lease_s: float, job_id: str | None = None) -> None:
        """Keep ``attempt_id`` (of ``job_id``)'s lease, beating at least four times per
        lease; the worker row names the job of the attempts held."""
        with self._lock:
            self._held[attempt_id] = job_id
            self.period_s = min(self.period_s, lease_s / 4)

    def release(self, attempt_id: str) -> None:
        with self._lock:
            self._held.pop(attempt_id, None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK_S):
            if time.monotonic() - last < self.period_s:
                continue
            last = time.monotonic()
            with self._lock:
                held = sorted(self._held)
                jobs = sorted({job for job in self._held.values() if job is not None})
            try:
                for attempt_id in held:
                    if not self.store.heartbeat_attempt(attempt_id):
                        log.warning("attempt %s lost its lease", attempt_id)
                        self.release(attempt_id)
                self.store.worker_heartbeat(
                    self.worker_id,
                    status="busy" if held else "idle",
                    job_id=jobs[0] if jobs else None,
                )
            except Exception as exc:  # a store hiccup: try again next beat
                log.warning("runner heartbeat failed: %s", exc)


def runner_id() -> str:
    """A worker id: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class RolloutWorker:
    """Claims and runs queued rollouts until stopped, idle for ``idle_exit_s`` or done with
    ``max_rollouts``; ``job_id`` limits it to one job; ``store_wait``: how long a store
    that is away is waited for (``StoreWait.from_env()`` by default)."""

    def __init__(
        self,
        store: RolloutQueue,
        *,
        worker_id: str | None = None,
        job_id: str | None = None,
        concurrency: int = 1,
        poll_s: float = 0.2,
        idle_exit_s: float | None = None,
        max_rollouts: int | None = None,
        heartbeat_s: float | None = None,
        store_wait: StoreWait | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = waiting_store(store, wait=store_wait)
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
                metadata={
                    "kind": "runner",
                    "executor": "runner",
                    "concurrency": self.concurrency,
                    "job_id": self.job_id,
                },
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
        """Claim, run, finish, until done; a finish claims the slot's next rollout in the
        same call (``finish_and_claim``) unless this runner is done, and a rollout in hand
        is run even once it is."""
        rollout: Rollout | None = None
        while rollout is not None or not self._done():
            if rollout is None:
                self.store.expire_leases()
                rollout = self.store.claim_rollout(self.worker_id, job_id=self.job_id)
                if rollout is None:
                    await asyncio.sleep(self.poll_s)
                    continue
            self.ran += 1
            rollout = await self._execute(rollout)
            self._last_work = time.monotonic()

    async def _execute(self, rollout: Rollout) -> Rollout | None:
        """Run the claimed attempt of ``rollout`` and report how it ended; the next
        rollout the report claimed, if it claimed one."""
        number = rollout.attempt_count
        attempt_id = f"{rollout.id}:{number}"
        self.beats.hold(attempt_id, lease_of(rollout), str(rollout.job_id))
        try:
            work = self._work(str(rollout.job_id))
            candidate = fetch_candidate(self.store, rollout)
            example = work.example(rollout)
        except Exception as exc:  # a rollout this runner cannot run: fail it, once
            self.beats.release(attempt_id)
            self._fail(rollout, attempt_id, f"{type(exc).__name__}: {exc}")
            return None
        before = rollout.model_copy(update={"status": "queuing", "attempt_count": number - 1})
        try:
            result = await work.evaluator.run_one(
                candidate, example, as_split(rollout.split), rollout=before
            )
        except ProviderStop as exc:  # the model's provider, not the rollout: queued again
            log.warning("rollout %s: %s; queued again", rollout.id, exc)
            self.store.requeue_rollout(
                rollout.id, attempt_id, number, attempt_status="failed", error=str(exc)
            )
            await asyncio.sleep(PROVIDER_STOP_PAUSE_S)  # not a loop of refused calls
            return None
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
            return None
        return self._finish(rollout, attempt_id, status, result, claim_next=not self._done())

    def _finish(
        self,
        rollout: Rollout,
        attempt_id: str,
        status: str,
        result: ExampleResult,
        *,
        claim_next: bool = False,
    ) -> Rollout | None:
        """Store the attempt's result (kept unless the rollout has one); with
        ``claim_next``, claim the next rollout in the same call and return it."""
        end = RolloutEnd(
            status=result.rollout_status or ("succeeded" if result.error is None else "failed"),
            attempt_status=status,
            error=result.error,
            output=result.output,
            score=result.score,
            result=result.model_dump(mode="json"),
        )
        claimed = None
        if claim_next:
            kept, claimed = self.store.finish_and_claim(
                rollout.id, attempt_id, end, worker_id=self.worker_id, job_id=self.job_id
            )
        else:
            kept = self.store.finish_rollout(rollout.id, attempt_id, end)
        self.kept += int(kept)
        if not kept:
            log.info("rollout %s already had a result: this one was dropped", rollout.id)
        return claimed

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
