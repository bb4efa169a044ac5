"""The runtime of a training job (SFT, RL): the search engine's claim, heartbeat and
control, around a trainer instead of a search.

``TrainingEngine(store, job_id, kind).run()`` claims the job (``started``, or ``resumed``,
also from a dead owner; see ``ownership``), runs the kind's trainer in a thread of its own
from its last checkpoint while a ``ControlWatcher`` keeps the heartbeat fresh and passes
pause and cancel requests on (the trainer reads them between steps and, on a pause, saves
a checkpoint first; an rl job whose ``[runtime] executor`` runs rollouts in other processes
gets it in its hooks, for its agent episodes), stores losses, rewards and checkpoints as
events, then writes the GGUF adapter (served as ``local/<model>+<job id>``), scores base
vs tuned on test when the settings ask for it and succeeds with the kind's result. Its
store calls, and the trainer's, wait out a store that is away for a while
(``store.waiting``), as the search engine's do; the watcher keeps the plain store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from emery.config.loading import job_config
from emery.config.schema import JobConfig, LoRASection
from emery.core.errors import EmeryError
from emery.core.events import CheckpointSaved, Event, EventSink
from emery.evaluation.executor import Executor
from emery.jobs.control import LOST, ControlWatcher, StopRequest, fail_job, stop_job
from emery.jobs.ownership import claim_job, owner_id, reserve_job
from emery.lm.catalog import adapter_file, installed_path
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.store.waiting import StoreWait, waiting_store
from emery.training.events import AdapterSaved, ScoredOnTest, TrainLoss, TrainReward
from emery.training.gguf_adapter import write_gguf_adapter
from emery.training.scoring import Lift, compare
from emery.training.trainer import TrainingHooks, TrainingStats
from emery.workers.executors import ExecutorSetup, build_executor, check_executor, executor_kind

log = logging.getLogger(__name__)

_FIRST = {"train_loss": "first_loss", "val_loss": "first_val_loss", "train_reward": "first_reward"}
"""Event kind → the ``TrainingStats`` field its job's first value goes to."""


class Trainer(Protocol):
    """What a training kind gives its runtime: its settings, its trainer and its result."""

    @property
    def name(self) -> str:
        """The kind of the jobs it trains."""
        ...

    def settings(self, config: JobConfig) -> LoRASection: ...

    def train(
        self, store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
    ) -> tuple[TrainingStats, Path | None]: ...

    def trained(
        self, model: str, adapter: Path, stats: TrainingStats, lift: Lift | None
    ) -> BaseModel: ...


class TrainingEngine:
    """Runs one stored training job in this process (a ``JobRun``): ``on_event`` hears
    its events as they are stored, from the trainer's thread too."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        trainer: Trainer,
        *,
        on_event: EventSink | None = None,
        poll_s: float = 0.2,
        heartbeat_s: float = 2.0,
        store_wait: StoreWait | None = None,
    ) -> None:
        self._plain_store = store  # the watcher's: it tries again by itself
        self.store = waiting_store(store, wait=store_wait, on_wait=self._store_waits)
        self.job_id = job_id
        self.trainer = trainer
        self.on_event = on_event
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.owner = owner_id()
        self._stop_request = StopRequest()

    def request(self, action: str, reason: str | None = None) -> None:
        """Pause (``"pause"``) or cancel (``"cancel"``) the run at the trainer's next step;
        safe from any thread and from signal handlers. The first request wins."""
        self._stop_request.ask(action, reason)

    @property
    def requested(self) -> str | None:
        return self._stop_request.action

    async def run(self) -> JobRecord:
        """Run (or resume) the job until it succeeds, fails, pauses or is cancelled."""
        job = reserve_job(self.store, self.job_id, self.owner, kinds=(self.trainer.name,))
        config = job_config(job)
        base_dir = Path(job.base_dir or ".")
        claim_job(self.store, job, owner=self.owner, emit=self._emit)
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
            return await self._work(config, base_dir)
        except asyncio.CancelledError:  # cancelled from outside: the trainer stops, resumable
            self.request("pause", "interrupted")
            raise
        except EmeryError as exc:
            return self._fail(str(exc))
        except Exception as exc:
            log.exception("job %s failed", self.job_id)
            return self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            watcher.stop()

    async def _work(self, config: JobConfig, base_dir: Path) -> JobRecord:
        executor = self._rollout_executor(config)
        try:
            stats, adapter = await asyncio.to_thread(
                self.trainer.train,
                self.store,
                config,
                base_dir,
                self.job_id,
                self._hooks(executor),
            )
        finally:
            if executor is not None:
                executor.close()
        if stats.stopped is not None:
            return self._stop(stats.stopped)
        assert adapter is not None
        return await self._finish(config, base_dir, stats, adapter)

    def _rollout_executor(self, config: JobConfig) -> Executor | None:
        """An rl job's ``[runtime] executor`` when it runs rollouts in other processes (an
        agent's episodes on runners or Ray), checked; None: they run in this process."""
        if config.job.type != "rl" or not executor_kind(config.runtime.executor).elsewhere:
            return None
        check_executor(config.runtime, self.store, in_process_inputs=False)
        return build_executor(ExecutorSetup(config.runtime, self.store, self.job_id, UsageMeter()))

    def _hooks(self, executor: Executor | None = None) -> TrainingHooks:
        """Losses, rewards and checkpoints as job events; stop requests from the watcher;
        where rollouts run."""
        return TrainingHooks(
            executor=executor,
            on_events=self._emit,
            on_loss=lambda split, step, loss: self._add(
                Event.of(TrainLoss(step=step, loss=round(loss, 5)), kind=f"{split}_loss")
            ),
            on_checkpoint=lambda step: self._add(Event.of(CheckpointSaved(iteration=step))),
            requested=lambda: self._stop_request.action,
            on_reward=lambda step, reward, kl: self._add(
                Event.of(
                    TrainReward(
                        step=step, reward=round(reward, 5), kl=None if kl is None else round(kl, 6)
                    )
                )
            ),
        )

    async def _finish(
        self, config: JobConfig, base_dir: Path, stats: TrainingStats, adapter: Path
    ) -> JobRecord:
        base = config.lm.task.model.removeprefix("local/")
        target = adapter_file(base, self.job_id)
        pairs = write_gguf_adapter(adapter, installed_path(base), target)
        tuned = f"local/{base}+{self.job_id}"
        self._add(Event.of(AdapterSaved(model=tuned, path=str(target), tensors=pairs)))
        lift = None
        if self.trainer.settings(config).evaluate:
            lift = await compare(self.store, config, base_dir, tuned)
            scored = ScoredOnTest(
                base=lift.base.mean, tuned=lift.tuned.mean, n=lift.tuned.n, lift=round(lift.lift, 5)
            )
            self._add(Event.of(scored))
        stats = whole_job_stats(self.store, self.job_id, stats)
        result = self.trainer.trained(tuned, target, stats, lift)
        fields: dict[str, Any] = {"result": result.model_dump(mode="json")}
        if lift is not None:
            fields |= {"best_score": lift.tuned.mean, "baseline_score": lift.base.mean}
        return self._succeed(fields)

    def _succeed(self, fields: dict[str, Any]) -> JobRecord:
        job = self.store.get_job(self.job_id)
        if job.state != "running" or job.owner != self.owner:
            return job
        job, events = self.store.transition(
            self.job_id,
            "succeeded",
            reason="max_steps",
            expect=["running"],
            fields={"requested_action": None, "owner": None, "stop_reason": "max_steps", **fields},
        )
        self._emit(events)
        return job

    def _stop(self, action: str) -> JobRecord:
        reason = self._stop_request.reason if action != LOST else None
        job, events = stop_job(
            self.store, self.job_id, self.owner, action, reason or f"{action} requested"
        )
        self._emit(events)
        return job

    def _fail(self, message: str) -> JobRecord:
        job, events = fail_job(self.store, self.job_id, self.owner, message)
        self._emit(events)
        return job

    def _store_waits(self, line: str) -> None:
        """A store call waits for the store (from any thread): say so in the log."""
        log.warning("job %s: %s", self.job_id, line)

    def _add(self, item: Event) -> None:
        self._emit(self.store.append_events(self.job_id, [item]))

    def _emit(self, events: Sequence[Event]) -> None:
        if self.on_event is None or not events:
            return
        try:
            self.on_event(events)
        except Exception:  # a display must never break the job
            log.exception("job %s: event listener failed", self.job_id)


def whole_job_stats(store: Store, job_id: str, stats: TrainingStats) -> TrainingStats:
    """``stats`` with the job's first loss and reward (a resumed run saw only its own)."""
    first: dict[str, float] = {}
    for item in store.list_events(job_id, kinds=list(_FIRST)):
        match item.payload():
            case TrainLoss(loss=value) | TrainReward(reward=value):
                first.setdefault(_FIRST[item.kind], value)
    return stats.model_copy(update=first)
