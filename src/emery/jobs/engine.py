"""The job engine: runs one job's search with every step stored in one transaction.

``JobEngine(store, job_id).run()`` claims the job (``started``, or ``resumed`` from its
last checkpoint, also after a crash), preloads the job's stored evaluations as free cache
hits, runs the algorithm through ``run_search`` and stores each completed step (its
evaluations with their rollouts, new candidates, events and a checkpoint) atomically.

A pause or cancel, asked here (``request``) or by another process through the store, stops
the search at once: the step in flight is abandoned and rolled back, the job keeps what
its last checkpoint holds, and a resume repeats that step (the LM response cache makes the
repeat cheap). When the search ends, the seed and the best candidate are scored on test
(not charged to the budget), the result and report are written, and the job succeeds with
the stop reason.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emery.algorithms.base import AlgorithmState, SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.runner import SearchOutcome, StepRecord, run_search
from emery.config.loading import parse_config
from emery.core.errors import EmeryError
from emery.core.events import BestUpdated, CheckpointSaved, Event, event
from emery.evaluation.budget import BudgetExhausted, BudgetUsage
from emery.evaluation.results import ExampleResult
from emery.evaluation.service import EvalKey, eval_key
from emery.jobs.collector import quiet_collector
from emery.jobs.control import LOST, ControlWatcher
from emery.jobs.ownership import owner_alive, owner_id
from emery.jobs.report import render_report
from emery.jobs.results import build_result, result_paths, write_result
from emery.jobs.rows import evaluation_rows
from emery.jobs.runtime import JobInputs, Runtime, build_runtime
from emery.lm.usage import RoleUsage
from emery.store.protocol import Store
from emery.store.records import (
    CheckpointRecord,
    JobRecord,
    StepWrite,
)
from emery.store.sql.jobs import OwnershipLost
from emery.store.states import IllegalTransition
from emery.tracing.records import RolloutConfig
from emery.tracing.store_recorder import StoreRecorder

log = logging.getLogger(__name__)

EventSink = Callable[[Sequence[Event]], None]


class JobBusy(EmeryError):
    """The job is being run by another live process."""


class JobEngine:
    """Runs one stored job in this process."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        *,
        inputs: JobInputs | None = None,
        on_event: EventSink | None = None,
        on_note: Callable[[str], None] | None = None,
        poll_s: float = 0.2,
        heartbeat_s: float = 2.0,
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.inputs = inputs or JobInputs()
        self.on_event = on_event
        self.on_note = on_note
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.owner = owner_id()
        self._lock = threading.Lock()
        self._action: str | None = None
        self._reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Future[JobRecord] | None = None
        self._best: tuple[str, float | None] | None = None
        self._recorder: StoreRecorder | None = None

    # --- control ----------------------------------------------------------------------

    def request(self, action: str, reason: str | None = None) -> None:
        """Pause (``"pause"``) or cancel (``"cancel"``) the run now; safe from any thread
        and from signal handlers. The first request wins."""
        with self._lock:
            if self._action is None:
                self._action, self._reason = action, reason
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    @property
    def requested(self) -> str | None:
        return self._action

    def _should_stop(self) -> str | None:
        return self._action

    def _remote(self, action: str) -> None:
        reason = {
            "pause": "pause requested",
            "cancel": "cancel requested",
            LOST: "another process took the job over",
        }[action]
        self.request(action, reason)

    # --- the run ----------------------------------------------------------------------

    async def run(self) -> JobRecord:
        """Run (or resume) the job until it succeeds, fails, pauses or is cancelled."""
        job = self.store.get_job(self.job_id)
        if job.terminal:
            raise IllegalTransition(f"job {job.id} has already {job.state}: nothing to run")
        if job.state == "running" and owner_alive(job):
            raise JobBusy(f"job {job.id} is running in process {job.owner}")
        self._check_inputs(job)
        checkpoint = self.store.get_checkpoint(job.id)
        try:
            config = parse_config(job.resolved_config or job.config, f"job {job.id}")
            base_dir = Path(job.base_dir or ".")
            usage = (
                {r: RoleUsage.model_validate(u) for r, u in checkpoint.usage.items()}
                if checkpoint
                else None
            )
            runtime = build_runtime(config, base_dir=base_dir, inputs=self.inputs, usage=usage)
        except EmeryError as exc:
            if job.state in ("created", "queued"):
                self.store.transition(job.id, "failed", reason=str(exc), fields={"error": str(exc)})
            raise
        try:
            job = self._claim(job, runtime)
            with quiet_collector():  # the collector's passes took 1/5 of a fast run's CPU
                return await self._supervise(runtime, checkpoint)
        finally:
            runtime.close()

    def _check_inputs(self, job: JobRecord) -> None:
        needed = job.metadata.get("in_process_inputs", [])
        missing = [name for name in needed if getattr(self.inputs, name, None) is None]
        if missing:
            raise EmeryError(
                f"job {job.id} was created from Python objects ({', '.join(missing)}): resume"
                " it from Python, passing them again (emery.Job.get(...).resume(...))"
            )

    def _claim(self, job: JobRecord, runtime: Runtime) -> JobRecord:
        fields: dict[str, Any] = {
            "owner": self.owner,
            "heartbeat_at": time.time(),
            "requested_action": None,
            "eval_scope": runtime.scope,
        }
        if job.eval_scope and job.eval_scope != runtime.scope:
            log.warning(
                "job %s: the system, task model or verifier changed since the job started;"
                " its stored evaluations are not reused",
                job.id,
            )
        if job.state == "created":
            job, events = self.store.transition(job.id, "queued", expect=["created"])
            self._emit(events)
        if job.state == "running":
            previous = job.owner
            job, events = self.store.take_over(
                job.id,
                owner=self.owner,
                expect_owner=previous,
                reason=f"recovered: the previous run ({previous or 'unknown'}) is gone",
            )
            job = self.store.update_job(job.id, **fields)
        else:
            kind = "resumed" if job.started_at is not None else "started"
            job, events = self.store.transition(
                job.id, "running", event_kind=kind, expect=[job.state], fields=fields
            )
        self._emit(events)
        return job

    async def _supervise(self, runtime: Runtime, checkpoint: CheckpointRecord | None) -> JobRecord:
        ctx = self._context(runtime, checkpoint)
        algorithm = runtime.algorithm
        state: AlgorithmState | None = None
        if checkpoint is not None:
            state = algorithm.state_type.model_validate(checkpoint.state)
            self._best = (state.best_candidate_id, state.best_val_score)
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._work(ctx, runtime, state))
        if self._action is not None:
            self._task.cancel()
        watcher = ControlWatcher(
            self.store,
            self.job_id,
            self.owner,
            self._remote,
            poll_s=self.poll_s,
            heartbeat_s=self.heartbeat_s,
        )
        watcher.start()
        try:
            return await self._task
        except asyncio.CancelledError:
            if self._action is None:  # cancelled from outside: keep the job resumable
                self._stop("pause", "interrupted")
                raise
            return self._stop(self._action, self._reason)
        except _Stop:
            return self._stop(self._action or "pause", self._reason)
        except OwnershipLost as exc:
            log.warning("job %s: %s", self.job_id, exc)
            return self.store.get_job(self.job_id)
        except BudgetExhausted as exc:
            return self._fail(f"budget exhausted before the baseline: {exc}")
        except EmeryError as exc:
            return self._fail(str(exc))
        except Exception as exc:
            log.exception("job %s failed", self.job_id)
            return self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            watcher.stop()
            self._task = None
            if self._recorder is not None:  # live rows of an abandoned step, if any
                self._recorder.flush()

    async def _work(
        self, ctx: SearchContext, runtime: Runtime, state: AlgorithmState | None
    ) -> JobRecord:
        async def on_step(record: StepRecord) -> None:
            self._commit_step(runtime, record)

        outcome = await run_search(
            runtime.algorithm, ctx, state=state, on_step=on_step, should_stop=self._should_stop
        )
        if self._action is not None:
            raise _Stop()
        return await self._finish(ctx, runtime, outcome)

    def _context(self, runtime: Runtime, checkpoint: CheckpointRecord | None) -> SearchContext:
        known: dict[EvalKey, ExampleResult] = {}
        for record in self.store.load_evaluations(runtime.scope):
            result = record.result
            if runtime.hashes.get((result.split or "", result.example_id)) == record.example_hash:
                known[eval_key(result.candidate_id, result.example_id, result.split)] = result
        config = runtime.config
        self._recorder = StoreRecorder(self.store, self.job_id, worker_id=self.owner)
        ctx = build_search_context(
            system=runtime.system,
            dataset=runtime.dataset,
            verifier=runtime.verifier,
            lms=runtime.models.by_role,
            budget=runtime.budget,
            meter=runtime.models.meter,
            seed=config.job.seed,
            concurrency=config.runtime.concurrency,
            known=known,
            budget_usage=BudgetUsage.model_validate(checkpoint.budget) if checkpoint else None,
            rollouts=RolloutConfig.from_runtime(config.runtime),
            recorder=self._recorder,
            job_id=self.job_id,
        )
        for candidate in self.store.job_candidates(self.job_id):
            ctx.candidates[candidate.id] = candidate
        return ctx

    # --- storing steps ----------------------------------------------------------------

    def _commit_step(self, runtime: Runtime, record: StepRecord) -> None:
        state = record.state
        events = list(record.events)
        best = (state.best_candidate_id, state.best_val_score)
        if state.best_candidate_id and best != self._best:
            if not any(e.kind == "best_updated" for e in events):
                update = event(
                    "best_updated",
                    BestUpdated(
                        candidate_id=state.best_candidate_id,
                        score=state.best_val_score or 0.0,
                        previous_score=self._best[1] if self._best else None,
                    ),
                )
                at = next(
                    (i for i, e in enumerate(events) if e.kind == "iteration_completed"),
                    len(events),
                )
                events.insert(at, update)
            self._best = best
        events.append(
            event("checkpoint_saved", CheckpointSaved(iteration=record.budget.iterations))
        )
        evaluations, rollouts, attempts = evaluation_rows(
            runtime, record.results, job_id=self.job_id, worker=self.owner
        )
        write = StepWrite(
            events=events,
            candidates=record.candidates,
            evaluations=evaluations,
            rollouts=rollouts,
            attempts=attempts,
            checkpoint=CheckpointRecord(
                job_id=self.job_id,
                number=record.budget.iterations,
                state=state.model_dump(mode="json"),
                budget=record.budget.model_dump(mode="json"),
                usage={role: u.model_dump(mode="json") for role, u in record.usage.items()},
            ),
            job_fields={
                "best_candidate_id": state.best_candidate_id or None,
                "best_score": state.best_val_score,
                "baseline_score": state.baseline_val_score,
            },
            expect_owner=self.owner,
        )
        self._emit(self.store.commit_step(self.job_id, write))

    # --- the end ----------------------------------------------------------------------

    async def _finish(
        self, ctx: SearchContext, runtime: Runtime, outcome: SearchOutcome
    ) -> JobRecord:
        """Score seed and best on test (uncharged), write the result, succeed — one commit."""
        state = outcome.state
        seed = ctx.candidates.get(state.seed_candidate_id, ctx.seed_candidate)
        best = ctx.candidates.get(state.best_candidate_id, seed)
        tests = {}
        if runtime.dataset.test:
            targets = [("seed", seed)] + ([("best", best)] if best.id != seed.id else [])
            for label, candidate in targets:
                self._note(
                    f"scoring the {label} candidate {candidate.id[:8]} on the test split"
                    f" ({len(runtime.dataset.test)} examples)"
                )
                scored = await ctx.evaluations.evaluate(
                    candidate, runtime.dataset.test, "test", charge=False
                )
                tests[candidate.id] = scored.summary()
        events, candidates = ctx.log.drain()
        evaluations, rollouts, attempts = evaluation_rows(
            runtime, ctx.evaluations.drain(), job_id=self.job_id, worker=self.owner
        )
        job = self.store.get_job(self.job_id)
        result = build_result(
            self.store,
            job,
            baseline_test=tests.get(seed.id),
            best_test=tests.get(best.id),
            usage=ctx.budget.meter.by_role(),
            state="succeeded",
            stop_reason=outcome.reason,
            dataset_sizes={str(k): v for k, v in runtime.dataset.sizes().items()},
        )
        result.evaluations_paid += len(evaluations)
        json_path, text_path = result_paths(job, runtime.base_dir)
        result.files = {"json": str(json_path), "report": str(text_path)}
        write_result(result, render_report(result), json_path, text_path)
        write = StepWrite(
            events=events,
            candidates=candidates,
            evaluations=evaluations,
            rollouts=rollouts,
            attempts=attempts,
            job_fields={
                "result": result.model_dump(mode="json"),
                "stop_reason": outcome.reason,
                "best_candidate_id": best.id,
                "best_score": state.best_val_score,
                "baseline_score": state.baseline_val_score,
            },
            expect_owner=self.owner,
            final_state="succeeded",
            final_reason=outcome.reason,
        )
        self._emit(self.store.commit_step(self.job_id, write))
        return self.store.get_job(self.job_id)

    def _stop(self, action: str, reason: str | None) -> JobRecord:
        job = self.store.get_job(self.job_id)
        if action == LOST or job.state != "running" or job.owner != self.owner:
            return job
        target = "cancelled" if action == "cancel" else "paused"
        job, events = self.store.transition(
            self.job_id,
            target,
            reason=reason,
            expect=["running"],
            fields={"requested_action": None, "owner": None, "stop_reason": reason},
        )
        self._emit(events)
        return job

    def _fail(self, message: str) -> JobRecord:
        job = self.store.get_job(self.job_id)
        if job.state != "running" or job.owner != self.owner:
            return job
        job, events = self.store.transition(
            self.job_id, "failed", reason=message, expect=["running"], fields={"error": message}
        )
        self._emit(events)
        return job

    def _note(self, text: str) -> None:
        """Progress in words for whoever watches this process (stored nowhere)."""
        if self.on_note is not None:
            self.on_note(text)

    def _emit(self, events: Sequence[Event]) -> None:
        if self.on_event is None or not events:
            return
        try:
            self.on_event(events)
        except Exception:  # a display must never break the job
            log.exception("job %s: event listener failed", self.job_id)


class _Stop(Exception):
    """The search returned because a pause or cancel was requested between steps."""
