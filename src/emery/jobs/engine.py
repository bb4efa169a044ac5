"""The job engine: runs one job's search with every step stored in one transaction.

``JobEngine(store, job_id).run()`` claims the job (``started``, or ``resumed`` from its
last checkpoint, also after a crash; see ``ownership``), preloads the job's stored
evaluations as free cache hits, runs the algorithm through ``run_search`` and stores each
completed step (its evaluations with their rollouts, new candidates, events and a
checkpoint) atomically. A step that changes the best candidate must report it with a
``best_updated`` event: one that does not is a bug in the algorithm and fails the job.

A pause or cancel, asked here (``request``) or by another process through the store (see
``control``), or a search model that cannot answer (``lm.unavailable``: the job pauses with
that reason), stops the search at once: the step in flight is abandoned and rolled back,
the job keeps what its last checkpoint holds, and a resume repeats that step. The
step's finished runs are stored at the stop and taken again, not run again, by the
repeat (``prepaid``), so even without the LM response cache a pause pays no call twice;
the seconds the step had run still count against the wall time (``search_end``).
When the search ends, the engine stores the end (the stop reason, and the budget and LM
usage spent, a cut step's included: ``search_end``); then ``finishing`` scores the seed
and the best candidate on test, writes the result and report, and the job succeeds with
the stop reason. A job stopped after the end resumes into that scoring only.

A store that is away for now (``StoreUnavailable``: PostgreSQL restarting, a dropped
connection) is waited out: every store call of the run is sent again with a growing delay
for up to ``store_wait`` (``store.waiting``: 180 s, ``EMERY_STORE_WAIT_S``), each wait a
"store unavailable, retrying" note, and the job goes on where it was. A step is written
with a ``write_id``, so a commit whose connection dropped after the store had written it
is not stored twice. A store still away after the wait pauses the job like a full disk.

A store that cannot write a step because its disk is full (``StoreFull``) pauses the job
with one line saying so (``store_full_reason``): the step is not stored, so the resume
repeats it. Writing the pause may fail the same way; it is tried once more after
``store_retry_s``, and if that fails too the run raises ``StoreFull`` with the line and
leaves the job ``running`` under this process, which ``emery jobs resume`` takes over
once this process is gone (``ownership``).

Why this is long: one job's lifecycle (claim, search, each step's commit, stop, end, a
pause for space) shares the engine's store, owner, context and stop request; each part is
short and the parts it would split into (``ownership``, ``search_end``, ``prepaid``,
``finishing``) are already modules of their own.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from emery.algorithms.base import AlgorithmState, SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.search_loop import SearchOutcome, StepCallback, StepRecord, run_search
from emery.config.loading import job_config
from emery.config.resolve import JobInputs, ResolvedJob
from emery.core.errors import EmeryError, StoreError
from emery.core.events import BestUpdated, CheckpointSaved, Event, EventSink
from emery.core.rollouts import RolloutConfig
from emery.evaluation import known_results
from emery.evaluation.budget import BudgetExhausted, Clock
from emery.evaluation.progress import ProgressSink
from emery.integrations.tracking import JobTracker, start_tracking
from emery.jobs.approvals import StoreApprovalGate
from emery.jobs.collector import quiet_collector
from emery.jobs.control import LOST, ControlWatcher, StopRequest, fail_job, stop_job
from emery.jobs.finishing import finish_job
from emery.jobs.ownership import JobBusy, claim_job, owner_id, reserve_job
from emery.jobs.prepaid import (
    PREPAID,
    metadata_after,
    prepaid_keys,
    split_stored,
    stop_write,
    stored_result,
)
from emery.jobs.rows import EvaluationRows, evaluation_rows
from emery.jobs.runtime import Runtime, build_runtime
from emery.jobs.search_end import end_write, ended_reason, restored_usage, stop_metadata
from emery.jobs.warm_start import earlier_notes, load_warm_start
from emery.lm.preflight import check_models
from emery.lm.provider_errors import ProviderRefused, ProviderUnavailable
from emery.lm.throttle import rate_notices
from emery.lm.unavailable import ModelUnavailable, guard_search_roles
from emery.lm.usage import RoleUsage
from emery.store.errors import StoreFull, StoreUnavailable, disk_full, store_unavailable
from emery.store.protocol import Store
from emery.store.records import CheckpointRecord, JobRecord, StepWrite
from emery.store.states import OwnershipLost
from emery.store.waiting import StoreWait, WaitingStore
from emery.tracing.store_recorder import StoreRecorder
from emery.workers.executors import ExecutorSetup, build_executor, check_executor

log = logging.getLogger(__name__)

__all__ = ["AlgorithmContractError", "EventSink", "JobBusy", "JobEngine"]

Best = tuple[str, float | None]


class AlgorithmContractError(RuntimeError):
    """An algorithm broke a rule every algorithm keeps: a bug in the algorithm."""


class JobEngine:
    """Runs one stored job in this process: ``on_event`` hears its events as they are
    stored, ``on_note`` its notes, ``on_progress`` each rollout of a batch as it finishes;
    ``clock`` times the search against its wall-time budget; ``objects``: what this process
    resolved the job's config to when it created it (not resolved again);
    ``store_retry_s``: the wait before writing a pause again when the store's disk is full
    or it is away; ``store_wait``: how long a store that is away is waited for
    (``StoreWait.from_env()`` by default)."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        *,
        inputs: JobInputs | None = None,
        on_event: EventSink | None = None,
        on_note: Callable[[str], None] | None = None,
        on_progress: ProgressSink | None = None,
        poll_s: float = 0.2,
        heartbeat_s: float = 2.0,
        clock: Clock = time.perf_counter,
        objects: ResolvedJob | None = None,
        store_retry_s: float = 2.0,
        store_wait: StoreWait | None = None,
    ) -> None:
        self._waiting = WaitingStore(store, store_wait, on_wait=self._store_waits)
        self._plain_store = store  # the control thread's: it tries again by itself
        self.store = cast(Store, self._waiting)
        self.job_id = job_id
        self.inputs = inputs or JobInputs()
        self.objects = objects
        self.on_event = on_event
        self.on_note = on_note
        self.on_progress = on_progress
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.store_retry_s = store_retry_s
        self.owner = owner_id()
        self._stop_request = StopRequest()
        self._best: Best | None = None
        self._recorder: StoreRecorder | None = None
        self._metadata: dict[str, Any] = {}
        self._ctx: SearchContext | None = None
        self._runtime: Runtime | None = None
        self._tracker: JobTracker | None = None

    def request(self, action: str, reason: str | None = None) -> None:
        """Pause (``"pause"``) or cancel (``"cancel"``) the run now; safe from any thread
        and from signal handlers. The first request wins."""
        self._stop_request.ask(action, reason)

    @property
    def requested(self) -> str | None:
        return self._stop_request.action

    # --- the run ----------------------------------------------------------------------

    async def run(self) -> JobRecord:
        """Run (or resume) the job until it succeeds, fails, pauses or is cancelled."""
        job = reserve_job(self.store, self.job_id, self.owner)  # before any work
        self._check_inputs(job)
        self._metadata = dict(job.metadata)
        checkpoint = self.store.get_checkpoint(job.id)
        runtime = self._build_runtime(job, checkpoint)
        try:
            claim_job(self.store, job, owner=self.owner, scope=runtime.scope, emit=self._emit)
            self.store.set_job_examples(job.id, runtime.hashes)
            self._tracker = start_tracking(
                self.store, job, runtime.config.tracking, runtime.base_dir, checkpoint
            )
            if self._tracker is not None:  # its run id may have joined the job's metadata
                self._metadata = dict(self.store.get_job(self.job_id).metadata)
            with quiet_collector():  # the collector's passes took 1/5 of a fast run's CPU
                return await self._supervise(runtime, checkpoint)
        finally:
            if self._ctx is not None:
                self._ctx.evaluations.evaluator.close()
            if self._tracker is not None:
                self._tracker.close(self.store, self.store.get_job(self.job_id))
            runtime.close()

    def _check_inputs(self, job: JobRecord) -> None:
        needed = job.metadata.get("in_process_inputs", [])
        missing = [name for name in needed if getattr(self.inputs, name, None) is None]
        if missing:
            raise EmeryError(
                f"job {job.id} was created from Python objects ({', '.join(missing)}): resume"
                " it from Python, passing them again (emery.Job.get(...).resume(...))"
            )

    def _build_runtime(self, job: JobRecord, checkpoint: CheckpointRecord | None) -> Runtime:
        """The job's runtime, its LM usage restored; a job that cannot start fails."""
        try:
            config = job_config(job)
            usage = (
                {r: RoleUsage.model_validate(u) for r, u in checkpoint.usage.items()}
                if checkpoint
                else None
            )
            inputs = bool(job.metadata.get("in_process_inputs"))
            check_executor(config.runtime, self.store, in_process_inputs=inputs)
            objects, self.objects = self.objects, None  # once: a later run resolves anew
            return build_runtime(
                config,
                base_dir=Path(job.base_dir or "."),
                inputs=self.inputs,
                usage=usage,
                objects=objects,
            )
        except EmeryError as exc:
            if job.state in ("created", "queued"):
                self.store.transition(job.id, "failed", reason=str(exc), fields={"error": str(exc)})
            raise

    async def _supervise(self, runtime: Runtime, checkpoint: CheckpointRecord | None) -> JobRecord:
        """Run the search as a task that a pause, a cancel or a lost job cancels at once;
        turn how it ended into the job's state."""
        ctx = self._context(runtime, checkpoint)
        state: AlgorithmState | None = None
        if checkpoint is not None:
            state = runtime.algorithm.state_type.model_validate(checkpoint.state)
            self._best = (state.best_candidate_id, state.best_val_score)
        task = asyncio.ensure_future(self._work(ctx, runtime, state))
        self._stop_request.watch(task)
        watcher = ControlWatcher(
            self._plain_store,
            self.job_id,
            self.owner,
            self._stop_request.ask_from_store,
            poll_s=self.poll_s,
            heartbeat_s=self.heartbeat_s,
        )
        watcher.start()
        try:
            return await self._outcome(task)
        finally:
            watcher.stop()
            self._stop_request.watch(None)
            if self._recorder is not None:  # live rows of an abandoned step, if any
                self._recorder.flush()

    async def _outcome(self, task: asyncio.Future[JobRecord]) -> JobRecord:
        """The job as the search task left it: succeeded, stopped or failed."""
        request = self._stop_request
        try:
            return await task
        except asyncio.CancelledError:
            if request.action is None:  # cancelled from outside: keep the job resumable
                self._stop("pause", "interrupted")
                raise
            return self._stop(request.action, request.reason)
        except _Stop:
            return self._stop(request.action or "pause", request.reason)
        except (ModelUnavailable, ProviderUnavailable) as exc:  # resumable once it answers
            log.warning("job %s: %s", self.job_id, exc)
            return self._stop("pause", str(exc))
        except ProviderRefused as exc:  # fix the setting; a job with progress keeps it
            log.warning("job %s: %s", self.job_id, exc)
            if self.store.get_checkpoint(self.job_id) is None:
                return self._fail(str(exc))
            return self._stop("pause", str(exc))
        except OwnershipLost as exc:
            log.warning("job %s: %s", self.job_id, exc)
            return self.store.get_job(self.job_id)
        except BudgetExhausted as exc:
            return self._fail(f"budget exhausted before the baseline: {exc}")
        except StoreFull:
            return await self._pause_for_store(store_full_reason(self.job_id), StoreFull)
        except StoreUnavailable as exc:  # still away after the wait
            reason = store_away_reason(self.job_id, str(exc))
            return await self._pause_for_store(reason, StoreUnavailable)
        except EmeryError as exc:
            return self._fail(str(exc))
        except Exception as exc:
            if disk_full(exc):  # a driver's or the OS's own error, not the store's
                return await self._pause_for_store(store_full_reason(self.job_id), StoreFull)
            if store_unavailable(exc):
                reason = store_away_reason(self.job_id, str(exc))
                return await self._pause_for_store(reason, StoreUnavailable)
            log.exception("job %s failed", self.job_id)
            return self._fail(f"{type(exc).__name__}: {exc}")

    async def _work(
        self, ctx: SearchContext, runtime: Runtime, state: AlgorithmState | None
    ) -> JobRecord:
        async def on_step(record: StepRecord) -> None:
            self._commit_step(runtime, record)

        ended = ended_reason(self._metadata)
        with rate_notices(self._note):
            await check_models(runtime.models.by_role)
            if state is not None and ended is not None:  # stopped in the final scoring
                outcome = SearchOutcome(state=state, reason=ended)
            else:
                outcome = await self._search(ctx, runtime, state, on_step)
        if self._stop_request.action is not None:
            raise _Stop()
        self._emit(
            await finish_job(
                self.store,
                self.job_id,
                owner=self.owner,
                ctx=ctx,
                runtime=runtime,
                outcome=outcome,
                note=self._note,
            )
        )
        return self.store.get_job(self.job_id)

    async def _search(
        self,
        ctx: SearchContext,
        runtime: Runtime,
        state: AlgorithmState | None,
        on_step: StepCallback,
    ) -> SearchOutcome:
        """Run the search to its end and store the end (see ``search_end``); a pause or a
        cancel between steps returns without storing one."""
        if state is None:  # the first step: a resumed job has the warm start in its state
            ctx.warm = load_warm_start(self.store, runtime.config, runtime.system)
        created_at = self.store.get_job(self.job_id).created_at
        ctx.earlier_notes = earlier_notes(self.store, runtime.config, created_at)
        ctx.reviewer_notes[:] = ctx.earlier_notes  # with a gate, its own reasons follow

        gate = None
        if runtime.config.job.approve == "best":
            gate = StoreApprovalGate(self.store, self.job_id, poll_s=self.poll_s, note=self._note)
        asked: list[str] = []

        def should_stop() -> str | None:
            if (action := self._stop_request.action) is not None:
                asked.append(action)
            return action

        outcome = await run_search(
            runtime.algorithm, ctx, state=state, on_step=on_step, should_stop=should_stop, gate=gate
        )
        if not asked:  # the search ended, not a request: store that before anything else
            write = end_write(
                ctx, runtime, outcome, self._metadata, job_id=self.job_id, owner=self.owner
            )
            self._commit(write)
            self._metadata = write.job_fields["metadata"]
        return outcome

    def _context(self, runtime: Runtime, checkpoint: CheckpointRecord | None) -> SearchContext:
        stored, prepaid = split_stored(
            self.store.load_evaluations(runtime.scope), runtime, prepaid_keys(self._metadata)
        )
        load = stored_result(self.store, runtime)
        known = known_results.KnownResults(stored, load=load, keep=known_results.KEEP)
        config = runtime.config
        self._recorder = StoreRecorder(self.store, self.job_id, worker_id=self.owner)
        ctx = build_search_context(
            system=runtime.system,
            dataset=runtime.dataset,
            verifier=runtime.verifier,
            lms=guard_search_roles(dict(runtime.models.by_role)),
            budget=runtime.budget,
            meter=runtime.models.meter,
            seed=config.job.seed,
            concurrency=config.runtime.concurrency,
            known=known,
            budget_usage=restored_usage(checkpoint, self._metadata),
            rollouts=RolloutConfig.from_runtime(config.runtime),
            recorder=self._recorder,
            job_id=self.job_id,
            errors=config.runtime.error_policy(),
            clock=self.clock,
            executor=build_executor(
                ExecutorSetup(config.runtime, self.store, self.job_id, runtime.models.meter)
            ),
            prepaid=prepaid,
            on_progress=self.on_progress,
        )
        ctx.objectives, ctx.select = config.job.objectives, config.job.select_rule()
        for candidate in self.store.job_candidates(self.job_id):
            ctx.candidates[candidate.id] = candidate
        self._ctx, self._runtime = ctx, runtime
        return ctx

    # --- storing steps ----------------------------------------------------------------

    def _commit_step(self, runtime: Runtime, record: StepRecord) -> None:
        """Store one step (with a ``checkpoint_saved`` event) in one transaction."""
        self._best = check_best_reported(runtime.algorithm.name, self._best, record)
        events = [
            *record.events,
            Event.of(CheckpointSaved(iteration=record.budget.iterations)),
        ]
        rows = evaluation_rows(runtime, record.results, job_id=self.job_id, owner=self.owner)
        write = step_write(record, events, rows, job_id=self.job_id, owner=self.owner)
        if PREPAID in self._metadata and self._ctx is not None:  # some were taken now
            self._metadata = metadata_after(self._metadata, self._ctx.evaluations)
            write.job_fields["metadata"] = self._metadata
        self._commit(write)

    def _commit(self, write: StepWrite) -> None:
        """``Store.commit_step`` (waiting out a store that is away, under one ``write_id``
        however often it is sent); a full disk, however the driver says it, is
        ``StoreFull``."""
        if write.write_id is None:
            write.write_id = uuid.uuid4().hex
        try:
            events = self.store.commit_step(self.job_id, write)
        except StoreFull:
            raise
        except Exception as exc:
            if disk_full(exc):
                raise StoreFull(store_full_reason(self.job_id)) from exc
            raise
        self._emit(events)

    # --- the end ----------------------------------------------------------------------

    def _stop(self, action: str, reason: str | None) -> JobRecord:
        if action != LOST:
            self._store_stop()
        job, events = stop_job(self.store, self.job_id, self.owner, action, reason)
        self._emit(events)
        return job

    def _store_stop(self) -> None:
        """Store the finished runs of the step the stop cut short (see ``prepaid``) and
        the seconds it had run (see ``search_end``)."""
        if self._ctx is None or self._runtime is None:
            return
        checkpoint = self.store.get_checkpoint(self.job_id)
        metadata = stop_metadata(self._metadata, self._ctx.budget.usage, checkpoint)
        write = stop_write(
            self._runtime, self._ctx.evaluations, metadata, job_id=self.job_id, owner=self.owner
        )
        if write is None and metadata != self._metadata:
            write = StepWrite(job_fields={"metadata": metadata}, expect_owner=self.owner)
        if write is None:
            return
        try:
            self._emit(self.store.commit_step(self.job_id, write))
        except OwnershipLost:
            return
        except Exception as exc:  # a full disk or a store away: the resume runs them again
            if not (disk_full(exc) or store_unavailable(exc)):
                raise
            log.warning("job %s: the finished runs of the cut step were not stored", self.job_id)
            return
        self._metadata = write.job_fields["metadata"]

    async def _pause_for_store(self, reason: str, error: type[StoreError]) -> JobRecord:
        """Pause the job because its store's disk is full or the store stayed away (see
        the module's docstring); this run waits for the store no more."""
        log.warning("job %s: %s", self.job_id, reason)
        self._note(f"paused: {reason}")
        self._waiting.waiting = False  # the pause, the last flush, the tracker: once each
        for wait in (0.0, self.store_retry_s):
            await asyncio.sleep(wait)
            try:
                return self._stop("pause", reason)
            except Exception as exc:
                if not (disk_full(exc) or store_unavailable(exc)):
                    raise
        raise error(f"{reason} (the job stays running until then)")

    def _fail(self, message: str) -> JobRecord:
        job, events = fail_job(self.store, self.job_id, self.owner, message)
        self._emit(events)
        return job

    def _store_waits(self, line: str) -> None:
        """A store call waits for the store (from any thread): say so."""
        self._note(f"job {self.job_id}: {line}")

    def _note(self, text: str) -> None:
        """Progress in words for whoever watches this process (stored nowhere)."""
        if self.on_note is not None:
            self.on_note(text)

    def _emit(self, events: Sequence[Event]) -> None:
        if self._tracker is not None and events:
            self._tracker.feed(events, self._ctx)
        if self.on_event is None or not events:
            return
        try:
            self.on_event(events)
        except Exception:  # a display must never break the job
            log.exception("job %s: event listener failed", self.job_id)


def store_full_reason(job_id: str) -> str:
    """The one line a job paused by a full disk under its store says."""
    return (
        f"the store could not write the step ({os.strerror(errno.ENOSPC)}):"
        f" free space and run emery jobs resume {job_id}"
    )


def store_away_reason(job_id: str, detail: str) -> str:
    """The one line a job paused by a store that stayed away says."""
    return f"{detail.rstrip('.')}: run emery jobs resume {job_id} once the store is back"


def check_best_reported(algorithm: str, previous: Best | None, record: StepRecord) -> Best | None:
    """The best (candidate, val score) after ``record``'s step, checking that the step
    emitted ``best_updated`` for it if it changed; raise ``AlgorithmContractError`` if not."""
    state = record.state
    best = (state.best_candidate_id, state.best_val_score)
    if not state.best_candidate_id or best == previous:
        return previous
    reported = any(
        e.kind == BestUpdated.kind and e.data.get("candidate_id") == state.best_candidate_id
        for e in record.events
    )
    if not reported:
        raise AlgorithmContractError(
            f"algorithm {algorithm!r} made {state.best_candidate_id[:8]}"
            f" (val {state.best_val_score}) the best candidate without emitting best_updated"
            " for it"
        )
    return best


def step_write(
    record: StepRecord,
    events: list[Event],
    rows: EvaluationRows,
    *,
    job_id: str,
    owner: str,
) -> StepWrite:
    """The transaction storing one step: its rows, events, checkpoint and best so far."""
    state = record.state
    evaluations, rollouts, attempts = rows
    return StepWrite(
        events=events,
        candidates=record.candidates,
        evaluations=evaluations,
        rollouts=rollouts,
        attempts=attempts,
        approvals=record.approvals,
        checkpoint=CheckpointRecord(
            job_id=job_id,
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
        expect_owner=owner,
    )


class _Stop(Exception):
    """The search returned because a pause or cancel was requested between steps."""
