"""The ``runners`` executor, job side: rollouts go into the store's queue and their results
come back from it.

``QueueExecutor.run`` (the whole batch is one chunk) publishes the candidate as a versioned
resource, stores one ``queuing`` rollout per example (``emery.store.queue``), and polls the
store until
``emery runner`` processes have finished them, expiring the leases of silent runners as it
waits. A rollout of this job for the same candidate, example and split that is already in
the queue, running or finished (a step repeated after a kill or a pause) is taken instead
of queuing a new one: its result is picked up, not paid again.

While no runner claims any of the batch's rollouts, ``RunnerWait`` warns once (naming
the command that starts a runner) and fails the job after ``[runtime] runner_wait_s``.

When the wait is cancelled (the wall time ran out mid-step, ``Budget.within_wall_time``;
a pause or a cancel of the job), the batch's rollouts still waiting in the queue are
withdrawn (``cancelled``): no runner claims them later, and no result of theirs is ever
picked up and charged. Rollouts a runner holds already run on; a step repeated after a
pause takes their results and queues the withdrawn ones anew.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import cast

from emery.core.errors import EmeryError, StoreError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Rollout, RolloutConfig
from emery.evaluation.executor import Done, RolloutHost
from emery.lm.usage import UsageMeter
from emery.store.errors import store_label
from emery.store.protocol import Store
from emery.store.queue import (
    FINAL_ROLLOUT,
    LIVE_ROLLOUT,
    RESULT_KEY,
    candidate_resource,
    is_queued_rollout,
    queue_metadata,
)
from emery.store.records import RolloutFilter
from emery.store.states import NotFound

log = logging.getLogger(__name__)

DEFAULT_RUNNER_WAIT_S = 600.0
NOTICE_S = 2.0

_PREFERENCE = {"succeeded": 0, "failed": 0, "running": 1, "preparing": 1, "queuing": 2}
WITHDRAWN = "withdrawn from the queue: the step waiting for it was cut or stopped"


def queued_result(rollout: Rollout) -> ExampleResult:
    """The result a runner stored with a finished rollout, or a failure when none did
    (every attempt's lease expired)."""
    data = rollout.metadata.get(RESULT_KEY)
    if data:
        return ExampleResult.model_validate(data)
    error = rollout.error or f"the rollout ended {rollout.status} without a result"
    return ExampleResult(
        candidate_id=rollout.candidate_id or "",
        example_id=rollout.example_id or "",
        split=cast(Split, rollout.split) if rollout.split else None,
        score=0.0,
        feedback=f"The run failed: {error}",
        error=error,
        failure="timeout",
        rollout_id=rollout.id,
        rollout_status=rollout.status,
        attempts=rollout.attempt_count,
    )


class NoRunner(EmeryError):
    """No runner claimed any of a job's queued rollouts for ``runner_wait_s``."""


class RunnerWait:
    """Watches a batch for runners: ``notice_s`` (at most half of ``limit_s``) without any
    rollout claimed or finished, it warns once that the job waits for a runner and how to
    start one; ``limit_s`` without, it raises ``NoRunner``."""

    def __init__(self, store_url: str, *, limit_s: float, notice_s: float = NOTICE_S) -> None:
        self.command = f"emery runner --store {store_label(store_url)}"
        self.limit_s = limit_s
        self.notice_s = min(notice_s, limit_s / 2)
        self._since = time.monotonic()
        self._told = False

    def progressed(self) -> None:
        """A runner claimed or finished one of the rollouts: the wait starts again."""
        self._since = time.monotonic()
        self._told = False

    def check(self) -> None:
        """Warn of the wait once it is long enough; raise once it is too long."""
        waited = time.monotonic() - self._since
        if waited >= self.limit_s:
            raise NoRunner(
                f"no runner claimed a rollout of this job in {self.limit_s:g} s"
                f' (executor = "runners"): start one with `{self.command}`, or raise'
                " [runtime] runner_wait_s"
            )
        if waited >= self.notice_s and not self._told:
            self._told = True
            log.warning(
                "waiting for a runner to claim the queued rollouts: start one with `%s`"
                " (the job fails after %g s without one)",
                self.command,
                self.limit_s,
            )


class QueueExecutor:
    """Runs a batch on ``emery runner`` processes through ``store`` (``executor = "runners"``).

    The model usage each result carries is added to ``meter`` (the job's) as it is picked
    up, so token and cost budgets count runs made elsewhere as local ones. A batch that no
    runner touches for ``runner_wait_s`` fails the job (``RunnerWait``).
    """

    chunk = None  # one chunk: the batch is queued in one write and polled as one

    def __init__(
        self,
        store: Store,
        *,
        job_id: str,
        lease_s: float,
        meter: UsageMeter | None = None,
        runner_wait_s: float = DEFAULT_RUNNER_WAIT_S,
        notice_s: float = NOTICE_S,
        poll_s: float = 0.05,
        max_poll_s: float = 0.5,
    ) -> None:
        self.store = store
        self.meter = meter
        self.job_id = job_id
        self.lease_s = lease_s
        self.runner_wait_s = runner_wait_s
        self.notice_s = notice_s
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self._published: dict[str, tuple[str, int]] = {}

    def lanes(self, concurrency: int) -> int:
        return 1

    def close(self) -> None:
        """Nothing to release: the runners are separate processes."""

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        """Queue ``examples`` (or take their rollouts already queued) and wait for every
        result; ``done`` hears each as it is picked up."""
        waiting = self._enqueue(candidate, examples, split, host.rollout_maker.config)
        try:
            await self._collect(candidate, split, waiting, done)
        except asyncio.CancelledError:
            self._withdraw(waiting)
            raise

    async def _collect(
        self,
        candidate: Candidate,
        split: Split | None,
        waiting: dict[str, list[int]],
        done: Done,
    ) -> None:
        """Poll until every rollout in ``waiting`` has finished, telling ``done``."""
        wait = RunnerWait(self.store.url, limit_s=self.runner_wait_s, notice_s=self.notice_s)
        delay = self.poll_s
        while waiting:
            self.store.expire_leases(job_id=self.job_id)
            finished, claimed = self._progress(candidate, split, waiting)
            if finished or claimed:
                wait.progressed()
            else:
                wait.check()
            for rollout in finished:
                result = queued_result(rollout)
                if self.meter is not None:
                    self.meter.add(result.lm_usage)
                for index in waiting.pop(rollout.id):
                    done(index, result)
            if waiting:
                delay = self.poll_s if finished else min(delay * 1.5, self.max_poll_s)
                await asyncio.sleep(delay)

    def _withdraw(self, waiting: dict[str, list[int]]) -> None:
        """Cancel the rollouts of ``waiting`` that no runner has claimed yet."""
        withdrawn = self.store.withdraw_rollouts(list(waiting), error=WITHDRAWN)
        if withdrawn:
            log.info("withdrew %d queued rollouts no runner had claimed", withdrawn)

    def _enqueue(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        config: RolloutConfig,
    ) -> dict[str, list[int]]:
        """Rollout id → indexes of ``examples`` it answers; new rollouts are stored."""
        resource, version = self._publish(candidate)
        existing = self._reusable(candidate, split)
        new: list[Rollout] = []
        waiting: dict[str, list[int]] = {}
        for index, example in enumerate(examples):
            rollout_id = existing.get(example.id)
            if rollout_id is None:
                rollout = Rollout(
                    job_id=self.job_id,
                    candidate_id=candidate.id,
                    example_id=example.id,
                    split=split,
                    mode=split,
                    input=dict(example.input),
                    config=config,
                    metadata=queue_metadata(resource, version, self.lease_s),
                )
                new.append(rollout)
                rollout_id = existing[example.id] = rollout.id
            waiting.setdefault(rollout_id, []).append(index)
        if new:
            self.store.add_rollouts(new)
        return waiting

    def _reusable(self, candidate: Candidate, split: Split | None) -> dict[str, str]:
        """Example id → this job's queued rollout of (candidate, example, split) that is
        finished, else running, else waiting in the queue (cancelled ones are not taken)."""
        found = self.store.list_rollouts(
            RolloutFilter(job_id=self.job_id, candidate_id=candidate.id, split=split),
            limit=None,
        ).items
        usable = [
            r
            for r in found
            if r.status in _PREFERENCE and is_queued_rollout(r.metadata) and r.example_id
        ]
        usable.sort(key=lambda r: _PREFERENCE[r.status], reverse=True)
        return {str(r.example_id): r.id for r in usable}  # the most preferred wins

    def _progress(
        self, candidate: Candidate, split: Split | None, waiting: dict[str, list[int]]
    ) -> tuple[list[Rollout], bool]:
        """The waiting rollouts that are finished, and whether a runner holds any other."""
        page = self.store.list_rollouts(
            RolloutFilter(
                job_id=self.job_id,
                candidate_id=candidate.id,
                split=split,
                status=[*FINAL_ROLLOUT, *LIVE_ROLLOUT],
            ),
            limit=None,
        )
        mine = [r for r in page.items if r.id in waiting]
        finished = [r for r in mine if r.status in FINAL_ROLLOUT]
        return finished, len(finished) < len(mine)

    def _publish(self, candidate: Candidate) -> tuple[str, int]:
        """The candidate's resource (name, version), stored on first use."""
        known = self._published.get(candidate.id)
        if known is not None:
            return known
        name = candidate_resource(candidate.id)
        try:
            record = self.store.get_resource(name)
        except NotFound:
            try:
                record = self.store.put_resource(
                    name, candidate.model_dump(mode="json"), kind="candidate", job_id=self.job_id
                )
            except StoreError:  # another job published it at the same moment
                record = self.store.get_resource(name)
        self._published[candidate.id] = (name, record.version)
        return name, record.version
