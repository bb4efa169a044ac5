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

from emery.config.schema import JobConfig
from emery.lm.catalog import installed_path
from emery.store.protocol import Store
from emery.training.data import Conversation, hold_out, job_conversations, load_chat_jsonl
from emery.training.paths import run_dir
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
    """Train (or resume from its last checkpoint) SFT job ``job_id`` of ``config``."""
    assert config.sft is not None
    train_set, val_set = hold_out(
        sft_conversations(store, config, base_dir), config.sft.val_fraction, config.job.seed
    )
    return train(
        config.lm.task.model.removeprefix("local/"),
        config.sft,
        train_set,
        val_set,
        run_dir(base_dir, config, job_id),
        seed=config.job.seed,
        hooks=hooks,
    )
