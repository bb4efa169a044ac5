"""What an ``emery runner`` needs to run one job's queued rollouts: the job's system, data,
verifier and task model rebuilt from its stored config, an evaluator whose spans go to the
job's store, and a heartbeat thread that keeps the runner's leases.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emery.config.evaluation_scope import evaluation_scope
from emery.config.loading import parse_config
from emery.config.resolve import (
    check_system_inputs,
    open_cache,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.core.errors import EmeryError
from emery.core.models import Candidate, Example
from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.evaluation.evaluator import Evaluator
from emery.lm.cache import ResponseCache
from emery.lm.config import build_lm
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.store.queue import RESOURCE_KEY, VERSION_KEY
from emery.tracing.store_recorder import StoreRecorder
from emery.verifiers.judge import uses_judge, with_judge

log = logging.getLogger(__name__)

TICK_S = 0.05


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

    def example(self, rollout: Rollout) -> Example:
        example = self.examples.get((rollout.split or "", rollout.example_id or ""))
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


def build_job_work(store: Store, job_id: str, worker_id: str, *, queued: bool = True) -> JobWork:
    """Rebuild a job's system, dataset, verifier and task model from its stored config;
    refuse a job made from Python objects or whose evaluation scope differs here."""
    job = store.get_job(job_id)
    if job.metadata.get("in_process_inputs"):
        raise EmeryError(
            f"job {job_id} was created from Python objects: runners can only run jobs"
            " described by their config"
        )
    config = parse_config(job.resolved_config or job.config, f"job {job_id}")
    base_dir = Path(job.base_dir or ".")
    dataset = resolve_dataset(config, base_dir)
    system = resolve_system(config, dataset)
    check_system_inputs(system, dataset)
    verifier = resolve_verifier(config, dataset)
    scope = evaluation_scope(config, system, verifier, dataset=dataset)
    if job.eval_scope is not None and scope != job.eval_scope:
        raise EmeryError(
            f"job {job_id}'s system, task model or verifier differ in this runner"
            " (another version of the code or config?): its results would not be comparable"
        )
    cache = open_cache(config, base_dir)
    lm = build_lm(config.lm.task, role="task", meter=UsageMeter(), cache=cache)
    if uses_judge(verifier):
        judge = build_lm(config.lm.for_role("judge"), role="judge", meter=UsageMeter(), cache=cache)
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
    return JobWork(job_id, examples, evaluator, recorder, cache)


def fetch_candidate(store: Store, rollout: Rollout) -> Candidate:
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

    def __init__(self, store: Store, worker_id: str, period_s: float) -> None:
        self.store = store
        self.worker_id = worker_id
        self.period_s = period_s
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="emery-runner-beat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def hold(self, attempt_id: str, lease_s: float) -> None:
        """Keep ``attempt_id``'s lease, beating at least four times per lease."""
        with self._lock:
            self._held.add(attempt_id)
            self.period_s = min(self.period_s, lease_s / 4)

    def release(self, attempt_id: str) -> None:
        with self._lock:
            self._held.discard(attempt_id)

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
            try:
                for attempt_id in held:
                    if not self.store.heartbeat_attempt(attempt_id):
                        log.warning("attempt %s lost its lease", attempt_id)
                        self.release(attempt_id)
                self.store.worker_heartbeat(
                    self.worker_id, status="busy" if held else "idle", job_id=None
                )
            except Exception as exc:  # a store hiccup: try again next beat
                log.warning("runner heartbeat failed: %s", exc)
