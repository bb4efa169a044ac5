"""An SFT job: stored like a prompt job, run by this module instead of the search engine.

``create_sft_job`` stores it (kind ``sft``). ``run_sft_job`` claims it (``started``; or
``resumed``, also after a crash: a job whose owner died is taken over), trains with the
job's ``[sft]`` settings from its last checkpoint, emits ``train_loss``/``val_loss`` and
``checkpoint_saved`` events, honours pause and cancel between steps, then writes the GGUF
adapter (served as ``local/<model>+<job id>``), scores base vs tuned on test and succeeds
with an ``SFTResult`` (the lifecycle is ``run.TrainingRun``'s, shared with RL jobs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.schema import JobConfig
from emery.lm.catalog import installed_path
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.training.control import JobControl
from emery.training.data import Conversation, hold_out, job_conversations, load_chat_jsonl
from emery.training.run import EventSink, TrainingRun, job_base_dir, run_dir, store_job
from emery.training.scoring import Lift
from emery.training.trainer import TrainingStats, train

__all__ = ["SFTResult", "create_sft_job", "run_dir", "run_sft_job"]


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
    base_dir: Path | None = None,
) -> JobRecord:
    """Store a new SFT job (its base model and data source are checked first)."""
    assert config.sft is not None
    base_dir = job_base_dir(config_path, base_dir)
    if config.sft.source_job is not None:
        store.resolve_job_id(config.sft.source_job)
    else:
        assert config.sft.data is not None
        load_chat_jsonl(base_dir / config.sft.data)  # a bad line is refused before a job exists
    installed_path(config.lm.task.model.removeprefix("local/"))
    return store_job(
        store,
        config,
        "sft",
        given=given,
        config_path=config_path,
        name=name,
        base_dir=base_dir,
    )


def run_sft_job(
    store: Store, job_id: str, *, on_event: EventSink | None = None, control_poll_s: float = 0.5
) -> JobRecord:
    """Run or resume an SFT job here until it succeeds, fails, pauses or is cancelled."""
    return _SFTRun(store, job_id, on_event).run(control_poll_s)


class _SFTRun(TrainingRun):
    kind = "sft"

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

    def train(
        self, config: JobConfig, base_dir: Path, control: JobControl
    ) -> tuple[TrainingStats, Path | None]:
        assert config.sft is not None
        train_set, val_set = hold_out(
            self._data(config, base_dir), config.sft.val_fraction, config.job.seed
        )
        return train(
            config.lm.task.model.removeprefix("local/"),
            config.sft,
            train_set,
            val_set,
            run_dir(base_dir, config, self.job_id),
            seed=config.job.seed,
            hooks=self.hooks(control),
        )

    def result(
        self, model: str, adapter: Path, stats: TrainingStats, lift: Lift | None
    ) -> SFTResult:
        return SFTResult(model=model, adapter_path=str(adapter), training=stats, test=lift)
