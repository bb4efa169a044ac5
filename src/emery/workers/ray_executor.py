"""The ``ray`` executor: each rollout of a batch runs on Ray, as a task or on an actor.

The job makes each rollout's record, and a Ray worker runs it with the job's system,
writing its rollout, attempts and spans to the job's store; the result (with the model
usage it spent, charged to the job's meter) comes back to the job. When the worker is
lost mid-rollout (its process or actor died), the job ends the attempt it was running as
``failed`` and, while the rollout's ``max_attempts`` allow, runs the next attempt on
another worker; otherwise the rollout ends ``failed``. Cancelling the batch (a pause or
cancel of the job) cancels its Ray work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from emery.core.errors import EmeryError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Rollout
from emery.evaluation.executor import Done, RolloutHost
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.store.queue import FINAL_ROLLOUT, LIVE_ATTEMPT
from emery.store.records import RolloutEnd
from emery.store.states import NotFound
from emery.workers.ray_dispatch import ActorPool, Dispatch, TaskDispatch
from emery.workers.ray_worker import Build, import_ray, start_ray


class RayExecutor:
    """Runs each rollout of a batch on Ray (``executor = "ray"``), every one at once (Ray
    queues what its CPUs cannot take yet): as one task per rollout, or on a pool of
    ``actors`` actors when given. The model usage each result reports is added to
    ``meter`` (the job's)."""

    chunk = 1

    def __init__(
        self,
        store: Store,
        *,
        key: str,
        build: Build,
        meter: UsageMeter | None = None,
        address: str | None = None,
        num_cpus: int | None = None,
        actors: int | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.build = build
        self.meter = meter
        self.address = address
        self.num_cpus = num_cpus
        self.actors = actors
        self._dispatch: Dispatch | None = None

    def _dispatcher(self) -> Dispatch:
        if self._dispatch is None:
            ray = start_ray(self.address, self.num_cpus)
            self._dispatch = (
                TaskDispatch(ray, self.key, self.build)
                if self.actors is None
                else ActorPool(ray, self.build, self.actors)
            )
        return self._dispatch

    def lanes(self, concurrency: int) -> None:
        return None

    def close(self) -> None:
        if self._dispatch is not None:
            self._dispatch.close()
            self._dispatch = None

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        """Run ``examples`` on Ray, one after another; a cancel cancels the Ray work of
        the rollout running."""
        dispatch = self._dispatcher()
        for index, example in enumerate(examples):
            result = await self._rollout(dispatch, host, candidate, example, split)
            if self.meter is not None:
                self.meter.add(result.lm_usage)
            done(index, result)

    async def _rollout(
        self,
        dispatch: Dispatch,
        host: RolloutHost,
        candidate: Candidate,
        example: Example,
        split: Split | None,
    ) -> ExampleResult:
        """One rollout, its next attempt on another worker each time a worker is lost."""
        ray = import_ray()
        rollout = host.rollout_maker.new_rollout(candidate, example, split)
        payload = candidate.model_dump(mode="json"), example.model_dump(mode="json"), split
        tries = 0
        while True:
            tries += 1
            try:
                data = await dispatch.run(*payload, rollout.model_dump(mode="json"))
            except (asyncio.CancelledError, ray.exceptions.TaskCancelledError):
                rollout_cancelled(self.store, rollout.id)
                raise asyncio.CancelledError from None
            except ray.exceptions.RayError as exc:
                lost = f"the Ray worker running it was lost ({type(exc).__name__})"
                outcome = worker_lost(self.store, rollout, tries, lost)
                if isinstance(outcome, ExampleResult):
                    return outcome
                rollout = outcome.model_copy(update={"components": rollout.components})
                continue
            return ExampleResult.model_validate(data)


def worker_lost(store: Store, rollout: Rollout, tries: int, error: str) -> Rollout | ExampleResult:
    """End the attempt a lost worker was running as ``failed``: the rollout to run next
    (back in ``queuing``) while attempts remain, else the failed result it ends with."""
    try:
        stored = store.get_rollout(rollout.id)
    except NotFound:  # the worker died before writing anything
        stored = rollout
    number = max(stored.attempt_count, tries)
    attempt_id = f"{rollout.id}:{number}"
    config = rollout.config
    if number < config.max_attempts and "failed" in config.retry_on:
        store.requeue_rollout(rollout.id, attempt_id, number, attempt_status="failed", error=error)
        return stored.model_copy(update={"status": "queuing", "attempt_count": number})
    result = lost_result(stored, number, error)
    if stored is rollout:
        failed = rollout.model_copy(update={"attempt_count": number})
        failed.move("failed", error)
        store.add_rollouts([failed])
    else:
        end = RolloutEnd(
            status="failed",
            attempt_status="failed",
            error=error,
            output=None,
            score=0.0,
            result=result.model_dump(mode="json"),
        )
        store.finish_rollout(rollout.id, attempt_id, end)
    return result


def rollout_cancelled(store: Store, rollout_id: str) -> None:
    """End a rollout whose Ray work was cancelled (a pause, a cancel): its live attempt
    ``failed`` ("cancelled"), the rollout ``cancelled``; one that ended already is kept."""
    try:
        if store.get_rollout(rollout_id).status in FINAL_ROLLOUT:
            return
        for attempt in store.list_attempts(rollout_id):
            if attempt.status in LIVE_ATTEMPT:
                store.update_attempt(attempt.id, status="failed", error="cancelled")
        store.update_rollout(rollout_id, status="cancelled", error="cancelled")
    except EmeryError:  # never stored (NotFound), or ended meanwhile by its worker
        return


def lost_result(rollout: Rollout, attempts: int, error: str) -> ExampleResult:
    """The result of a rollout whose last worker was lost: a 0 score, the error."""
    return ExampleResult(
        candidate_id=rollout.candidate_id or "",
        example_id=rollout.example_id or "",
        split=rollout.split if rollout.split in ("train", "val", "test") else None,
        score=0.0,
        feedback=f"The run failed: {error}",
        error=error,
        failure="error",
        rollout_id=rollout.id,
        rollout_status="failed",
        attempts=attempts,
    )
