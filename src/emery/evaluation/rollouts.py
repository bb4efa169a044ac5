"""Rollouts with attempts: retries, time limits and unresponsive detection around one run.

A stuck agent is stopped after ``timeout_seconds`` of its own time (``scope.clock``: time
spent waiting on an in-process model, queued or decoding, does not count, so a slow or
busy machine does not time rollouts out); a silent one (no span, heartbeat or LM call in
flight for ``unresponsive_seconds``) is stopped as unresponsive; an exception, or a run
with an ``error``, is a failed attempt, except a reply the parser could not read
(``failure = "unreadable"``): a wrong answer, so the attempt succeeded. Attempts whose
status is in ``retry_on`` are retried while attempts remain (the rollout goes back to
``queuing``). The job never stalls on an agent: an agent that ignores cancellation (a
hung thread) is abandoned and its late spans are dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.util.types import AttributeValue

from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Attempt, AttemptStatus, Rollout, RolloutConfig, now
from emery.lm.base import LM
from emery.lm.provider_errors import ProviderStop, provider_stop_in
from emery.store.queue import is_queued_rollout
from emery.systems.base import SystemRun
from emery.tracing import conventions as sc
from emery.tracing.attempt_span import AttemptSpan
from emery.tracing.processor import RolloutTracing
from emery.tracing.registry import RolloutProxy
from emery.tracing.scope import AttemptScope, activate

log = logging.getLogger(__name__)

Body = Callable[[AttemptScope], Awaitable[SystemRun]]


@dataclass
class RolloutOutcome:
    """A finished rollout: its record, its attempts and the last attempt's run and scope."""

    rollout: Rollout
    attempts: list[Attempt] = field(default_factory=list)
    run: SystemRun | None = None
    scope: AttemptScope | None = None

    @property
    def error(self) -> str | None:
        return self.rollout.error if self.rollout.status != "succeeded" else None

    @property
    def span_count(self) -> int:
        return self.scope.span_count if self.scope is not None else 0


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class RolloutMaker:
    """Makes rollouts in this process: a new rollout record (``new_rollout``), then ``body``
    run as that rollout, attempt by attempt, recording every status change (``run``)."""

    def __init__(
        self,
        tracing: RolloutTracing,
        config: RolloutConfig | None = None,
        *,
        job_id: str | None = None,
        proxy: RolloutProxy | None = None,
        grace_s: float = 0.5,
    ) -> None:
        self.tracing = tracing
        self.recorder = tracing.recorder
        self.config = config or RolloutConfig()
        self.job_id = job_id
        self.proxy = proxy
        self.grace_s = grace_s

    async def run(
        self,
        candidate: Candidate,
        example: Example,
        split: Split | None,
        body: Body,
        *,
        lm: LM | None = None,
        seed_components: dict[str, str] | None = None,
        rollout: Rollout | None = None,
    ) -> RolloutOutcome:
        """Run a rollout attempt by attempt: a new one, or the given ``rollout`` from its
        next attempt on; a queued one (claimed from the store) runs only its next attempt
        and leaves any retry to the queue."""
        rollout = rollout or self.new_rollout(candidate, example, split)
        first = last = rollout.attempt_count + 1
        if not is_queued_rollout(rollout.metadata):
            last = self.config.max_attempts
        outcome = RolloutOutcome(rollout=rollout)
        self.recorder.save_rollout(rollout)
        for number in range(first, last + 1):
            rollout.move("preparing")
            rollout.attempt_count = number
            attempt = Attempt(rollout_id=rollout.id, number=number)
            outcome.attempts.append(attempt)
            self.recorder.save_rollout(rollout)
            self.recorder.save_attempt(attempt)
            scope = AttemptScope(
                rollout, attempt, self.tracing.tracer, lm=lm, seed_components=seed_components
            )
            scope.sink = self.tracing.processor.add_records
            outcome.scope = scope
            try:
                status, run, error = await self._attempt(scope, body)
            except asyncio.CancelledError:
                self._finish_attempt(scope, "failed", "cancelled")
                rollout.move("cancelled", "cancelled")
                self.recorder.save_rollout(rollout)
                raise
            except ProviderStop as exc:  # the model's provider stops the job, not this run
                self._finish_attempt(scope, "failed", str(exc))
                rollout.move("cancelled", str(exc))
                self.recorder.save_rollout(rollout)
                raise
            except Exception as exc:  # the attempt could not even start (e.g. no proxy)
                log.warning("rollout %s attempt %d: %s", rollout.id, number, exc)
                status, run, error = "failed", None, _describe(exc)
            outcome.run = run
            self._finish_attempt(scope, status, error)
            if status == "succeeded":
                rollout.move("succeeded")
                rollout.error = None
                break
            if status in self.config.retry_on and number < last:
                log.info("rollout %s attempt %d %s: retrying", rollout.id, number, status)
                rollout.error = error
                rollout.move("queuing")
                self.recorder.save_rollout(rollout)
                continue
            rollout.move("failed", error)
            break
        self.recorder.save_rollout(rollout)
        return outcome

    def new_rollout(self, candidate: Candidate, example: Example, split: Split | None) -> Rollout:
        """A rollout of ``candidate`` on ``example`` that has not run yet."""
        return Rollout(
            job_id=self.job_id,
            candidate_id=candidate.id,
            example_id=example.id,
            split=split,
            mode=split,
            input=dict(example.input),
            config=self.config,
            components=dict(candidate.components),
        )

    def _finish_attempt(
        self, scope: AttemptScope, status: AttemptStatus, error: str | None
    ) -> None:
        scope.closed = True
        if self.proxy is not None and scope.proxy_url is not None:
            self.proxy.close(scope)
        attempt = scope.attempt
        attempt.move(status, error)
        attempt.heartbeat_at = now()
        self.tracing.processor.flush()
        self.recorder.save_attempt(attempt)

    async def _attempt(
        self, scope: AttemptScope, body: Body
    ) -> tuple[AttemptStatus, SystemRun | None, str | None]:
        rollout, attempt = scope.rollout, scope.attempt
        attributes: dict[str, AttributeValue] = {
            sc.CANDIDATE_ID: rollout.candidate_id or "",
            sc.EXAMPLE_ID: rollout.example_id or "",
            sc.ATTEMPT_NUMBER: attempt.number,
        }
        if rollout.split is not None:
            attributes[sc.SPLIT] = rollout.split
        root = AttemptSpan(scope, attributes, self.tracing.processor.add_record)
        try:
            with activate(scope), root.current():
                scope.root, scope.loop = root.span, asyncio.get_running_loop()
                if self.proxy is not None:
                    scope.proxy_url = self.proxy.open(scope)
                attempt.move("running")
                rollout.move("running")
                self.recorder.save_attempt(attempt)
                self.recorder.save_rollout(rollout)
                task = asyncio.ensure_future(body(scope))
                task.add_done_callback(_retrieve)
                status, error = await self._watch(task, scope)
                run: SystemRun | None = None
                if status == "succeeded":
                    exc = None if task.cancelled() else task.exception()
                    if task.cancelled():
                        status, error = "failed", "the agent was cancelled"
                    elif exc is not None:
                        root.record_exception(exc)
                        if (stop := provider_stop_in(exc)) is not None:
                            raise stop
                        status, error = "failed", _describe(exc)
                    else:
                        run = task.result()
                        if run.error is not None and run.failure != "unreadable":
                            status, error = "failed", run.error
                root.set_status(status == "succeeded", f"{status}: {error}")
        finally:
            root.end()
        return status, run, error

    async def _watch(
        self, task: asyncio.Future[SystemRun], scope: AttemptScope
    ) -> tuple[AttemptStatus, str | None]:
        """Wait for ``task``; stop it at the time limit or when it falls silent.

        No polling: the wait ends when the task does or at the earliest moment a limit
        could be reached (the time limit, or ``unresponsive_seconds`` after the last sign
        of life), where the limits are checked again. The time limit is on the attempt's
        clock, which runs no faster than wall time, so waking when it could be reached
        never wakes late.
        """
        timeout = self.config.timeout_seconds
        silent = self.config.unresponsive_seconds
        clock = scope.clock
        start = clock.elapsed()
        try:
            while True:
                wait: float | None = None
                if timeout is not None:
                    wait = start + timeout - clock.elapsed()
                if silent is not None:
                    quiet_left = silent - scope.idle_seconds()
                    wait = quiet_left if wait is None else min(wait, quiet_left)
                done, _ = await asyncio.wait(
                    {task}, timeout=None if wait is None else max(wait, 0.001)
                )
                if done:
                    return "succeeded", None
                if timeout is not None and clock.elapsed() - start >= timeout:
                    await self._stop(task, scope)
                    return "timeout", (
                        f"no result within timeout_seconds={timeout:g}"
                        " (time waiting on an in-process model not counted)"
                    )
                if silent is not None and scope.idle_seconds() >= silent:
                    await self._stop(task, scope)
                    return (
                        "unresponsive",
                        f"no span, heartbeat or LM call for unresponsive_seconds={silent:g}",
                    )
        except asyncio.CancelledError:
            task.cancel()
            raise

    async def _stop(self, task: asyncio.Future[SystemRun], scope: AttemptScope) -> None:
        task.cancel()
        await asyncio.wait({task}, timeout=self.grace_s)
        if not task.done():
            log.warning(
                "rollout %s attempt %d ignored cancellation; abandoned",
                scope.rollout_id,
                scope.attempt.number,
            )
