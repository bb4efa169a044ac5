"""An SFT job's training: its checks, its chats, the trainer run and its ``SFTResult``.

``check_sft_job`` refuses a config it cannot train before the job is stored;
``train_sft_job`` trains with the job's ``[sft]`` settings from its last checkpoint,
reporting losses, checkpoints and asking for stop requests through ``TrainingHooks``. The
job around it (claim, heartbeat, pause / resume / cancel, the GGUF adapter, base vs tuned
on test) is the jobs runtime's (``emery.jobs.training_kinds``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from emery.config.resolve import resolve_lm
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, EmeryError
from emery.core.events import Event
from emery.lm.catalog import installed_path
from emery.lm.config import local_model_path
from emery.store.protocol import Store
from emery.training.data import (
    Conversation,
    SampledData,
    distinct,
    hold_out,
    job_conversations,
    load_chat_jsonl,
    stored_conversations,
)
from emery.training.events import SftSamplesKept
from emery.training.paths import run_dir
from emery.training.sampling import RejectionSampler, teacher_config
from emery.training.scoring import Lift
from emery.training.trainer import TrainingHooks, TrainingStats, train

__all__ = ["SFTResult", "check_sft_job", "sft_conversations", "train_sft_job"]


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
        if t.sampled is not None:
            lines.append(str(t.sampled))
        lines.append(
            f"{t.train_examples} train / {t.val_examples} val chats, {t.wall_s:.0f} s on"
            f" {t.device}: {t.steps_per_s:.3f} steps/s, {t.tokens_per_s:.0f} tokens/s,"
            f" peak {t.peak_rss_mb:.0f} MB"
        )
        if self.test is not None:
            lines.append(str(self.test))
        return "\n".join(lines) + "\n"


def check_sft_job(store: Store, config: JobConfig, base_dir: Path) -> None:
    """Refuse an SFT config whose source job, chat file or base model is missing (a bad
    chat line is refused before a job exists)."""
    assert config.sft is not None
    if config.sft.source_job is not None:
        store.resolve_job_id(config.sft.source_job)
    else:
        assert config.sft.data is not None
        sft_conversations(store, config, base_dir)
    if config.sft.samples_per_example:
        check_sampling(config)
    installed_path(config.lm.task.model.removeprefix("local/"))


def sft_conversations(store: Store, config: JobConfig, base_dir: Path) -> list[Conversation]:
    """The chats an SFT job trains on: its JSONL file, or its source job's rollouts."""
    sft = config.sft
    assert sft is not None
    if sft.data is not None:
        path = Path(sft.data)
        return load_chat_jsonl(path if path.is_absolute() else base_dir / path)
    assert sft.source_job is not None
    return job_conversations(
        store, sft.source_job, candidate=sft.candidate, splits=sft.splits, min_score=sft.min_score
    )


def train_sft_job(
    store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume from its last checkpoint) SFT job ``job_id`` of ``config``, after
    its rejection sampling (``training.sampling``) when ``[sft] samples_per_example`` asks."""
    assert config.sft is not None
    data = sft_data(store, config, base_dir, job_id, hooks)
    if isinstance(data, str):
        return not_trained(data), None
    chats, sampled = data
    train_set, val_set = hold_out(chats, config.sft.val_fraction, config.job.seed)
    stats, adapter = train(
        config.lm.task.model.removeprefix("local/"),
        config.sft,
        train_set,
        val_set,
        run_dir(base_dir, config, job_id),
        seed=config.job.seed,
        hooks=hooks,
    )
    return stats.model_copy(update={"sampled": sampled}), adapter


def sft_data(
    store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
) -> tuple[list[Conversation], SampledData | None] | str:
    """The chats SFT job ``job_id`` trains on and what its sampling kept (None: it
    samples nothing), or the stop request that cut its sampling short."""
    sft = config.sft
    assert sft is not None
    if not sft.samples_per_example:
        return sft_conversations(store, config, base_dir), None
    assert sft.source_job is not None
    sampler = RejectionSampler(store, config, base_dir, job_id)
    stopped = sampler.run(hooks)
    if stopped is not None:
        return stopped
    sampled_chats, sampled = sampler.kept()
    source = sft.source_job
    stored = distinct(
        stored_conversations(
            store, source, candidate=sft.candidate, splits=sft.splits, min_score=sft.min_score
        )
    )
    chats = distinct(stored + sampled_chats)
    sampled = sampled.model_copy(update={"stored": len(stored)})
    if not chats:
        raise ConfigError(
            f"no chat to train on: neither job {sft.source_job}'s stored rollouts nor the"
            f" {sampled.rollouts} sampled replies scored >= {sft.min_score}: try"
            " a lower sft.min_score, a higher sft.samples_per_example or a stronger sft.teacher"
        )
    if not store.list_events(job_id, kinds=[SftSamplesKept.kind]):
        note = Event.of(SftSamplesKept.model_validate(sampled.model_dump()))
        stored_events = store.append_events(job_id, [note])
        if hooks.on_events is not None:
            hooks.on_events(stored_events)
    return chats, sampled


def check_sampling(config: JobConfig) -> None:
    """Refuse sampling settings the job cannot run: a teacher that is not there, an
    executor other than this process."""
    if config.runtime.executor != "local":
        raise ConfigError(
            f"sft.samples_per_example samples in the job's own process: executor ="
            f' {config.runtime.executor!r} is not used by an sft job; set executor = "local"'
        )
    teacher = teacher_config(config)
    provider, _, name = teacher.model.partition("/")
    try:
        if provider == "local":
            local_model_path(name)
        elif provider != "openai":  # a python/, plug-in or LiteLLM model: a bad one fails here
            resolve_lm(teacher)
    except EmeryError as exc:
        raise type(exc)(f"sft.teacher: {exc}") from None


def not_trained(action: str) -> TrainingStats:
    """The stats of a run stopped by ``action`` before its first training step."""
    return TrainingStats(
        steps=0,
        resumed_from_step=None,
        stopped=action,
        first_loss=None,
        last_loss=None,
        first_val_loss=None,
        last_val_loss=None,
        train_examples=0,
        val_examples=0,
        wall_s=0.0,
        steps_per_s=0.0,
        tokens_per_s=0.0,
        tokens=0,
        peak_rss_mb=0.0,
        device="cpu",
    )
