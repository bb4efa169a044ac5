"""The ``runners`` executor, job side: rollouts go into the store's queue and their results
come back from it.

``QueueEvaluator.evaluate`` publishes the candidate as a versioned resource, stores one
``queuing`` rollout per example (``emery.store.queue``), and polls the store until
``emery runner`` processes have finished them, expiring the leases of silent runners as it
waits. A rollout of this job for the same candidate, example and split that is already in
the queue, running or finished (a step repeated after a kill or a pause) is taken instead
of queuing a new one: its result is picked up, not paid again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import cast

from emery.core.errors import StoreError
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Rollout
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.results import EvalResult, ExampleResult
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.store.queue import (
    FINAL_ROLLOUT,
    RESULT_KEY,
    candidate_resource,
    is_queued_rollout,
    queue_metadata,
)
from emery.store.records import RolloutFilter
from emery.store.states import NotFound

_PREFERENCE = {"succeeded": 0, "failed": 0, "running": 1, "preparing": 1, "queuing": 2}


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


class QueueEvaluator(Evaluator):
    """An ``Evaluator`` whose batches run on ``emery runner`` processes through ``store``.

    The model usage each result carries is added to ``meter`` (the job's) as it is picked
    up, so token and cost budgets count runs made elsewhere as local ones. ``run_one``
    (single runs outside a batch) still runs in this process.
    """

    def __init__(
        self,
        base: Evaluator,
        store: Store,
        *,
        job_id: str,
        lease_s: float,
        meter: UsageMeter | None = None,
        poll_s: float = 0.05,
        max_poll_s: float = 0.5,
    ) -> None:
        super().__init__(**base.settings(job_id=job_id))
        self.store = store
        self.meter = meter
        self.job_id = job_id
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self._published: dict[str, tuple[str, int]] = {}

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None = None,
        *,
        on_result: Callable[[ExampleResult], None] | None = None,
    ) -> EvalResult:
        """Queue ``examples`` (or take their rollouts already queued) and wait for every
        result; ``on_result`` hears each as it is picked up."""
        results: list[ExampleResult | None] = [None] * len(examples)
        waiting = self._enqueue(candidate, examples, split) if examples else {}
        delay = self.poll_s
        while waiting:
            self.store.expire_leases(job_id=self.job_id)
            finished = self._finished(candidate, split, waiting)
            for rollout in finished:
                result = queued_result(rollout)
                if self.meter is not None:
                    self.meter.add(result.lm_usage)
                for index in waiting.pop(rollout.id):
                    results[index] = result
                if on_result is not None:
                    on_result(result)
            if waiting:
                delay = self.poll_s if finished else min(delay * 1.5, self.max_poll_s)
                await asyncio.sleep(delay)
        done = [result for result in results if result is not None]
        return EvalResult(candidate_id=candidate.id, split=split, results=done)

    def _enqueue(
        self, candidate: Candidate, examples: Sequence[Example], split: Split | None
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
                    config=self.runner.config,
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

    def _finished(
        self, candidate: Candidate, split: Split | None, waiting: dict[str, list[int]]
    ) -> list[Rollout]:
        page = self.store.list_rollouts(
            RolloutFilter(
                job_id=self.job_id,
                candidate_id=candidate.id,
                split=split,
                status=list(FINAL_ROLLOUT),
            ),
            limit=None,
        )
        return [r for r in page.items if r.id in waiting]

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
