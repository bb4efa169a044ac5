"""SFT and RL as job kinds: a trainer from ``emery.training`` on the training runtime.

Each kind checks a config before its job is stored (its data, source job, reward and
base model), stores the job (kind and algorithm ``sft`` / ``rl``), and runs it with a
``TrainingEngine``; its report is its result's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.resolve import JobInputs, ResolvedJob
from emery.config.schema import JobConfig, LoRASection
from emery.core.errors import EmeryError
from emery.core.events import EventSink
from emery.core.hashing import content_hash
from emery.evaluation.progress import ProgressSink
from emery.jobs.training_engine import TrainingEngine
from emery.store.protocol import Store
from emery.store.records import JobRecord, NewJob
from emery.training.job import SFTResult, check_sft_job, train_sft_job
from emery.training.paths import job_base_dir
from emery.training.rl_job import RLResult, check_rl_job, train_rl_job
from emery.training.scoring import Lift
from emery.training.source import check_source_job, pin_source_job
from emery.training.trainer import TrainingHooks, TrainingStats

Check = Callable[[Store, JobConfig, Path], None]
Train = Callable[[Store, JobConfig, Path, str, TrainingHooks], tuple[TrainingStats, Path | None]]


@dataclass(frozen=True)
class TrainingKind:
    """A job kind whose run trains the task model: ``checks`` refuses a config it cannot
    train, ``trainer`` trains (or resumes) it, ``result_type`` is what it reports."""

    name: str
    checks: Check
    trainer: Train
    result_type: type[SFTResult]

    def check(
        self,
        store: Store,
        config: JobConfig,
        *,
        config_path: Path | None = None,
        base_dir: Path | None = None,
        inputs: JobInputs | None = None,
    ) -> None:
        """Refuse a config this kind cannot train (its source job, ``training/source.py``;
        its data, reward, base model;
        ``inputs``, Python objects in place of the config's, are a prompt job's). The
        trainer resolves the config when it runs: nothing is kept."""
        if inputs is not None and not inputs.empty:
            raise EmeryError(f"an {self.name} job is made from its config alone, not from objects")
        base = job_base_dir(config_path, base_dir)
        check_source_job(store, config, base)
        self.checks(store, config, base)

    def create(
        self,
        store: Store,
        config: JobConfig,
        objects: ResolvedJob | None,
        *,
        given: dict[str, Any] | None = None,
        config_path: Path | None = None,
        base_dir: Path | None = None,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: JobInputs | None = None,
    ) -> JobRecord:
        """Store a new job of this kind for ``config`` (checked by ``check``)."""
        base = job_base_dir(config_path, base_dir)
        resolved = pin_source_job(store, config).model_dump(mode="json")
        return store.create_job(
            NewJob(
                id=f"j-{uuid.uuid4().hex[:10]}",
                name=name or config.job.name or (config_path.stem if config_path else self.name),
                kind=self.name,
                algorithm=self.name,
                config=given if given is not None else resolved,
                resolved_config=resolved,
                config_hash=content_hash(resolved),
                config_path=str(config_path.resolve()) if config_path else None,
                base_dir=str(base),
                metadata=dict(metadata or {}),
            )
        )

    def engine(
        self,
        store: Store,
        job_id: str,
        *,
        inputs: JobInputs | None = None,
        on_event: EventSink | None = None,
        on_note: Callable[[str], None] | None = None,
        on_progress: ProgressSink | None = None,
        objects: ResolvedJob | None = None,
    ) -> TrainingEngine:
        """The engine that runs job ``job_id`` in this process (a trainer reports no batches)."""
        return TrainingEngine(store, job_id, self, on_event=on_event)

    def result(self, store: Store, job: JobRecord) -> SFTResult | None:
        """The trained model, its training and its test scores (None before it succeeds)."""
        if job.state != "succeeded" or not job.result:
            return None
        return self.result_type.model_validate(job.result)

    def report(self, store: Store, job: JobRecord) -> str | None:
        """The finished job's report in words (None before it succeeds)."""
        result = self.result(store, job)
        return None if result is None else result.report()

    # --- the trainer, for the TrainingEngine ----------------------------------------------

    def settings(self, config: JobConfig) -> LoRASection:
        section: LoRASection | None = getattr(config, self.name)
        if section is None:
            raise EmeryError(f"the job's config has no [{self.name}] section")
        return section

    def train(
        self, store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
    ) -> tuple[TrainingStats, Path | None]:
        self.settings(config)
        return self.trainer(store, config, base_dir, job_id, hooks)

    def trained(
        self, model: str, adapter: Path, stats: TrainingStats, lift: Lift | None
    ) -> BaseModel:
        return self.result_type(model=model, adapter_path=str(adapter), training=stats, test=lift)


SFT = TrainingKind("sft", check_sft_job, train_sft_job, SFTResult)
RL = TrainingKind("rl", check_rl_job, train_rl_job, RLResult)
