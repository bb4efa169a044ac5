"""What SFT and RL jobs share: storing the job, claiming it (``started``, ``resumed``, or
taken over from a dead owner), pause/cancel/stop, the GGUF adapter, base vs tuned on test.

A job kind subclasses ``TrainingRun`` with its ``train`` (stats and the peft adapter) and
``result`` (its result model); ``run`` does the rest.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.loading import parse_config
from emery.config.schema import JobConfig, LoRASection
from emery.core.errors import EmeryError
from emery.core.events import CheckpointSaved, Event, event
from emery.core.hashing import content_hash
from emery.lm.catalog import adapter_file, installed_path
from emery.store.protocol import Store
from emery.store.records import JobRecord, NewJob
from emery.training.control import JobControl, heartbeat_age, owner_gone, owner_id
from emery.training.gguf_adapter import write_gguf_adapter
from emery.training.scoring import Lift, compare
from emery.training.trainer import TrainingHooks, TrainingStats

log = logging.getLogger(__name__)

EventSink = Callable[[Sequence[Event]], None]

_FIRST = {"train_loss": "first_loss", "val_loss": "first_val_loss", "train_reward": "first_reward"}
"""Event kind → the ``TrainingStats`` field its job's first value goes to."""


def store_job(
    store: Store,
    config: JobConfig,
    kind: str,
    *,
    given: dict[str, Any] | None,
    config_path: Path | None,
    name: str | None,
    base_dir: Path,
) -> JobRecord:
    """Store a new training job of ``kind`` (``sft``/``rl``) for ``config``, its relative
    paths under ``base_dir`` (``job_base_dir``)."""
    resolved = config.model_dump(mode="json")
    return store.create_job(
        NewJob(
            id=f"j-{uuid.uuid4().hex[:10]}",
            name=name or config.job.name or (config_path.stem if config_path else kind),
            kind=kind,
            algorithm=kind,
            config=given if given is not None else resolved,
            resolved_config=resolved,
            config_hash=content_hash(resolved),
            config_path=str(config_path.resolve()) if config_path else None,
            base_dir=str(base_dir),
        )
    )


def job_base_dir(config_path: Path | None, base_dir: Path | None = None) -> Path:
    """The folder a job's relative paths are under: ``base_dir`` when given, else the
    config file's folder, else the working folder."""
    return (base_dir or (config_path.parent if config_path else Path.cwd())).resolve()


def run_dir(base_dir: Path, config: JobConfig, job_id: str) -> Path:
    """Where a job's checkpoints and peft adapter live: ``<workdir>/<kind>/<job id>``."""
    workdir = Path(config.runtime.workdir)
    return (workdir if workdir.is_absolute() else base_dir / workdir) / config.job.type / job_id


class TrainingRun:
    """One process's run of a training job, until it succeeds, fails, pauses or stops."""

    kind = ""

    def __init__(self, store: Store, job_id: str, on_event: EventSink | None) -> None:
        self.store = store
        self.job_id = job_id
        self.on_event = on_event
        self.owner = owner_id()

    def settings(self, config: JobConfig) -> LoRASection:
        section: LoRASection | None = getattr(config, self.kind)
        if section is None:
            raise EmeryError(f"job {self.job_id} is not an {self.kind} job")
        return section

    def train(
        self, config: JobConfig, base_dir: Path, control: JobControl
    ) -> tuple[TrainingStats, Path | None]:
        raise NotImplementedError

    def result(self, model: str, adapter: Path, stats: TrainingStats, lift: Lift | None) -> Any:
        raise NotImplementedError

    def run(self, poll_s: float) -> JobRecord:
        job = self.store.get_job(self.job_id)
        config = parse_config(job.resolved_config or job.config, f"job {job.id}")
        self.settings(config)
        self._claim(job)
        base_dir = Path(job.base_dir or ".")
        try:
            with JobControl(self.store, job.id, self.owner, poll_s=poll_s) as control:
                stats, adapter = self.train(config, base_dir, control)
            if stats.stopped is not None:
                return self._stop(stats.stopped)
            assert adapter is not None
            return self._finish(config, base_dir, stats, adapter)
        except EmeryError as exc:
            return self._end("failed", str(exc), {"error": str(exc)})
        except Exception as exc:
            log.exception("job %s failed", job.id)
            message = f"{type(exc).__name__}: {exc}"
            return self._end("failed", message, {"error": message})

    def hooks(self, control: JobControl) -> TrainingHooks:
        """Losses, rewards and checkpoints as job events; stop requests from ``control``."""
        return TrainingHooks(
            on_loss=lambda split, step, loss: self.add(
                event(f"{split}_loss", step=step, loss=round(loss, 5))
            ),
            on_checkpoint=lambda step: self.add(Event.of(CheckpointSaved(iteration=step))),
            requested=lambda: control.requested,
            on_reward=lambda step, reward, kl: self.add(
                event(
                    "train_reward",
                    step=step,
                    reward=round(reward, 5),
                    kl=None if kl is None else round(kl, 6),
                )
            ),
        )

    def _claim(self, job: JobRecord) -> None:
        if job.terminal:
            raise EmeryError(f"job {job.id} has already {job.state}: nothing to run")
        fields = {"owner": self.owner, "requested_action": None}
        if job.state == "running":
            if not owner_gone(job.owner, heartbeat_age(job.heartbeat_at)):
                raise EmeryError(f"job {job.id} is running in process {job.owner}")
            _, events = self.store.take_over(
                job.id,
                owner=self.owner,
                expect_owner=job.owner,
                reason=f"recovered: the previous run ({job.owner or 'unknown'}) is gone",
            )
            self._emit(events)
            self.store.update_job(job.id, **fields)
            return
        if job.state == "created":
            job, events = self.store.transition(job.id, "queued", expect=["created"])
            self._emit(events)
        kind = "resumed" if job.started_at is not None else "started"
        _, events = self.store.transition(
            job.id, "running", event_kind=kind, expect=[job.state], fields=fields
        )
        self._emit(events)

    def _finish(
        self, config: JobConfig, base_dir: Path, stats: TrainingStats, adapter: Path
    ) -> JobRecord:
        base = config.lm.task.model.removeprefix("local/")
        target = adapter_file(base, self.job_id)
        pairs = write_gguf_adapter(adapter, installed_path(base), target)
        tuned = f"local/{base}+{self.job_id}"
        self.add(event("adapter_saved", model=tuned, path=str(target), tensors=pairs))
        lift = None
        if self.settings(config).evaluate:
            lift = asyncio.run(compare(self.store, config, base_dir, tuned))
            self.add(
                event(
                    "test_scored",
                    base=lift.base.mean,
                    tuned=lift.tuned.mean,
                    n=lift.tuned.n,
                    lift=round(lift.lift, 5),
                )
            )
        result: BaseModel = self.result(tuned, target, self._whole_job(stats), lift)
        fields: dict[str, Any] = {"result": result.model_dump(mode="json")}
        if lift is not None:
            fields |= {"best_score": lift.tuned.mean, "baseline_score": lift.base.mean}
        return self._end("succeeded", "max_steps", fields | {"stop_reason": "max_steps"})

    def _whole_job(self, stats: TrainingStats) -> TrainingStats:
        """``stats`` with the job's first loss and reward (a resumed run saw only its own)."""
        first: dict[str, float] = {}
        for item in self.store.list_events(self.job_id, kinds=list(_FIRST)):
            first.setdefault(_FIRST[item.kind], float(item.data[item.kind.split("_")[1]]))
        return stats.model_copy(update=first)

    def _stop(self, action: str) -> JobRecord:
        if action == "lost":
            return self.store.get_job(self.job_id)
        target = "cancelled" if action == "cancel" else "paused"
        reason = f"{action} requested"
        return self._end(target, reason, {"stop_reason": reason})

    def _end(self, target: str, reason: str, fields: dict[str, Any]) -> JobRecord:
        job = self.store.get_job(self.job_id)
        if job.state != "running" or job.owner != self.owner:
            return job
        job, events = self.store.transition(
            self.job_id,
            target,
            reason=reason,
            expect=["running"],
            fields={"requested_action": None, "owner": None, **fields},
        )
        self._emit(events)
        return job

    def add(self, item: Event) -> None:
        self._emit(self.store.append_events(self.job_id, [item]))

    def _emit(self, events: Sequence[Event]) -> None:
        if self.on_event is not None and events:
            try:
                self.on_event(events)
            except Exception:  # a display must never break the job
                log.exception("job %s: event listener failed", self.job_id)
