"""An SFT job: stored like a prompt job, run by this module instead of the search engine.

``create_sft_job`` stores it (kind ``sft``). ``run_sft_job`` claims it (``started``; or
``resumed``, also after a crash: a job whose owner died is taken over), trains with the
job's ``[sft]`` settings from its last checkpoint, emits ``train_loss``/``val_loss`` and
``checkpoint_saved`` events, honours pause and cancel between steps, then writes the GGUF
adapter (served as ``local/<model>+<job id>``), scores base vs tuned on test and succeeds
with an ``SFTResult``.
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
from emery.config.schema import JobConfig
from emery.core.errors import EmeryError
from emery.core.events import CheckpointSaved, Event, event
from emery.core.hashing import content_hash
from emery.lm.catalog import adapter_file, installed_path
from emery.store.protocol import Store
from emery.store.records import JobRecord, NewJob
from emery.training.control import JobControl, heartbeat_age, owner_gone, owner_id
from emery.training.data import Conversation, hold_out, job_conversations, load_chat_jsonl
from emery.training.gguf_adapter import write_gguf_adapter
from emery.training.scoring import Lift, compare
from emery.training.trainer import TrainingHooks, TrainingStats, train

log = logging.getLogger(__name__)

EventSink = Callable[[Sequence[Event]], None]


class SFTResult(BaseModel):
    """What a finished SFT job reports."""

    model: str
    adapter_path: str
    training: TrainingStats
    test: Lift | None = None

    def report(self) -> str:
        t = self.training
        lines = [
            f"tuned model: {self.model} ({self.adapter_path})",
            f"train loss {t.first_loss:.3f} → {t.last_loss:.3f} over {t.steps} steps"
            if t.first_loss is not None and t.last_loss is not None
            else f"{t.steps} steps",
        ]
        if t.first_val_loss is not None and t.last_val_loss is not None:
            lines.append(f"val loss {t.first_val_loss:.3f} → {t.last_val_loss:.3f}")
        lines.append(
            f"{t.train_examples} train / {t.val_examples} val chats, {t.wall_s:.0f} s on"
            f" {t.device}: {t.steps_per_s:.3f} steps/s, {t.tokens_per_s:.0f} tokens/s,"
            f" peak {t.peak_rss_mb:.0f} MB"
        )
        if self.test is not None:
            lines.append(str(self.test))
        return "\n".join(lines) + "\n"


def create_sft_job(
    store: Store,
    config: JobConfig,
    *,
    given: dict[str, Any] | None = None,
    config_path: Path | None = None,
    name: str | None = None,
) -> JobRecord:
    """Store a new SFT job (its base model and data source are checked first)."""
    assert config.sft is not None
    base_dir = (config_path.parent if config_path else Path.cwd()).resolve()
    if config.sft.source_job is not None:
        store.resolve_job_id(config.sft.source_job)
    else:
        assert config.sft.data is not None
        load_chat_jsonl(base_dir / config.sft.data)  # a bad line is refused before a job exists
    installed_path(config.lm.task.model.removeprefix("local/"))
    resolved = config.model_dump(mode="json")
    return store.create_job(
        NewJob(
            id=f"j-{uuid.uuid4().hex[:10]}",
            name=name or config.job.name or (config_path.stem if config_path else "sft"),
            kind="sft",
            algorithm="sft",
            config=given if given is not None else resolved,
            resolved_config=resolved,
            config_hash=content_hash(resolved),
            config_path=str(config_path.resolve()) if config_path else None,
            base_dir=str(base_dir),
        )
    )


def run_sft_job(
    store: Store, job_id: str, *, on_event: EventSink | None = None, control_poll_s: float = 0.5
) -> JobRecord:
    """Run or resume an SFT job here until it succeeds, fails, pauses or is cancelled."""
    run = _Run(store, job_id, on_event)
    return run.run(control_poll_s)


class _Run:
    def __init__(self, store: Store, job_id: str, on_event: EventSink | None) -> None:
        self.store = store
        self.job_id = job_id
        self.on_event = on_event
        self.owner = owner_id()

    def run(self, poll_s: float) -> JobRecord:
        job = self.store.get_job(self.job_id)
        config = parse_config(job.resolved_config or job.config, f"job {job.id}")
        if config.sft is None:
            raise EmeryError(f"job {job.id} is not an sft job")
        self._claim(job)
        base_dir = Path(job.base_dir or ".")
        try:
            with JobControl(self.store, job.id, self.owner, poll_s=poll_s) as control:
                stats, adapter = self._train(config, base_dir, control)
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

    def _data(self, config: JobConfig, base_dir: Path) -> list[Conversation]:
        sft = config.sft
        assert sft is not None
        if sft.data is not None:
            path = Path(sft.data)
            return load_chat_jsonl(path if path.is_absolute() else base_dir / path)
        assert sft.source_job is not None
        return job_conversations(
            self.store,
            sft.source_job,
            candidate=sft.candidate,
            splits=sft.splits,
            min_score=sft.min_score,
        )

    def _train(
        self, config: JobConfig, base_dir: Path, control: JobControl
    ) -> tuple[TrainingStats, Path | None]:
        assert config.sft is not None
        train_set, val_set = hold_out(
            self._data(config, base_dir), config.sft.val_fraction, config.job.seed
        )
        hooks = TrainingHooks(
            on_loss=lambda split, step, loss: self._add(
                event(f"{split}_loss", step=step, loss=round(loss, 5))
            ),
            on_checkpoint=lambda step: self._add(Event.of(CheckpointSaved(iteration=step))),
            requested=lambda: control.requested,
        )
        return train(
            config.lm.task.model.removeprefix("local/"),
            config.sft,
            train_set,
            val_set,
            run_dir(base_dir, config, self.job_id),
            seed=config.job.seed,
            hooks=hooks,
        )

    def _finish(
        self, config: JobConfig, base_dir: Path, stats: TrainingStats, adapter: Path
    ) -> JobRecord:
        assert config.sft is not None
        base = config.lm.task.model.removeprefix("local/")
        target = adapter_file(base, self.job_id)
        pairs = write_gguf_adapter(adapter, installed_path(base), target)
        tuned = f"local/{base}+{self.job_id}"
        self._add(event("adapter_saved", model=tuned, path=str(target), tensors=pairs))
        lift = None
        if config.sft.evaluate:
            lift = asyncio.run(compare(self.store, config, base_dir, tuned))
            self._add(
                event(
                    "test_scored",
                    base=lift.base.mean,
                    tuned=lift.tuned.mean,
                    n=lift.tuned.n,
                    lift=round(lift.lift, 5),
                )
            )
        result = SFTResult(model=tuned, adapter_path=str(target), training=stats, test=lift)
        fields: dict[str, Any] = {"result": result.model_dump(mode="json")}
        if lift is not None:
            fields |= {"best_score": lift.tuned.mean, "baseline_score": lift.base.mean}
        return self._end("succeeded", "max_steps", fields | {"stop_reason": "max_steps"})

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

    def _add(self, item: Event) -> None:
        self._emit(self.store.append_events(self.job_id, [item]))

    def _emit(self, events: Sequence[Event]) -> None:
        if self.on_event is not None and events:
            try:
                self.on_event(events)
            except Exception:  # a display must never break the job
                log.exception("job %s: event listener failed", self.job_id)


def run_dir(base_dir: Path, config: JobConfig, job_id: str) -> Path:
    """Where a job's checkpoints and peft adapter live: ``<workdir>/sft/<job id>``."""
    workdir = Path(config.runtime.workdir)
    return (workdir if workdir.is_absolute() else base_dir / workdir) / "sft" / job_id
