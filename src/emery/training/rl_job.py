"""An RL job: GRPO on a LoRA of the local task model, the job's verifier as the reward.

The prompt it trains (and scores on test) is the system's seed, or the best candidate of a
finished prompt job named by ``[rl] source_job``.

``create_rl_job`` stores it (kind ``rl``) once its model, system, dataset and verifier
resolve. ``run_rl_job`` runs it like an SFT job (``run.TrainingRun``: claim or take over,
checkpoints, pause/cancel, resume from the last checkpoint, GGUF adapter, base vs tuned on
test) and emits ``train_reward`` (mean reward and KL per step) and ``train_loss`` events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.lm.catalog import installed_path
from emery.lm.config import build_lm
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.training.control import JobControl
from emery.training.job import SFTResult
from emery.training.reward import VerifierReward
from emery.training.run import EventSink, TrainingRun, job_base_dir, run_dir, store_job
from emery.training.scoring import Lift, scored_candidate
from emery.training.trainer import TrainingStats


class RLResult(SFTResult):
    """What a finished RL job reports (an SFT result whose training has rewards)."""

    def report(self) -> str:
        t = self.training
        lines = [f"tuned model: {self.model} ({self.adapter_path})"]
        if t.first_reward is not None and t.last_reward is not None:
            lines.append(
                f"mean reward {t.first_reward:.3f} → {t.last_reward:.3f} over {t.steps} steps"
            )
        else:
            lines.append(f"{t.steps} steps")
        lines.append(
            f"{t.train_examples} prompts, {t.wall_s:.0f} s on {t.device}:"
            f" {t.steps_per_s:.3f} steps/s, peak {t.peak_rss_mb:.0f} MB"
        )
        if self.test is not None:
            lines.append(str(self.test))
        return "\n".join(lines) + "\n"


def trained_candidate(store: Store | None, config: JobConfig, seed: Candidate) -> Candidate:
    """The prompt an rl job trains: ``rl.source_job``'s best candidate, else ``seed``."""
    assert config.rl is not None
    if config.rl.source_job is None:
        return seed
    if store is None:
        raise ConfigError("rl.source_job names a job: it needs the store that holds it")
    source = store.get_job(store.resolve_job_id(config.rl.source_job))
    if not source.best_candidate_id:
        raise ConfigError(
            f"rl.source_job {source.id} has no best candidate (it is {source.state}):"
            " name a finished prompt job"
        )
    return scored_candidate(store, config, seed)


def job_reward(config: JobConfig, base_dir: Path, store: Store | None = None) -> VerifierReward:
    """The reward of ``config``: its system's stage and verifier on the ``[rl]`` splits,
    for the prompt of ``trained_candidate`` (``store`` holds the source job, if any)."""
    assert config.rl is not None
    dataset = resolve_dataset(config, base_dir)
    examples = [e for split in config.rl.splits for e in dataset.split(split)]
    if not examples:
        raise ConfigError(
            f"dataset {dataset.name!r} has no examples on {'/'.join(config.rl.splits)}:"
            " nothing to train an rl job on"
        )
    system = resolve_system(config, dataset, base_dir)
    verifier = resolve_verifier(config, dataset)
    if getattr(verifier, "needs_expected", False) and any(e.expected is None for e in examples):
        raise ConfigError(
            "the verifier compares with each example's expected output; some rl examples have none"
        )
    candidate = trained_candidate(store, config, system.seed_candidate())
    reward = VerifierReward(system, candidate, verifier, examples)
    if reward.restates:
        reward.lm = build_lm(config.lm.task, role="task", meter=UsageMeter(), cache=None)
    if reward.stage.name not in candidate.components:
        raise ConfigError(
            f"rl.source_job's best candidate has no component {reward.stage.name!r}:"
            " it was found for another system"
        )
    return reward


def create_rl_job(
    store: Store,
    config: JobConfig,
    *,
    given: dict[str, Any] | None = None,
    config_path: Path | None = None,
    name: str | None = None,
    base_dir: Path | None = None,
) -> JobRecord:
    """Store a new RL job (its base model and reward are checked first)."""
    base_dir = job_base_dir(config_path, base_dir)
    job_reward(config, base_dir, store)  # a system, data or source it cannot use: refused
    installed_path(config.lm.task.model.removeprefix("local/"))
    return store_job(
        store,
        config,
        "rl",
        given=given,
        config_path=config_path,
        name=name,
        base_dir=base_dir,
    )


def run_rl_job(
    store: Store, job_id: str, *, on_event: EventSink | None = None, control_poll_s: float = 0.5
) -> JobRecord:
    """Run or resume an RL job here until it succeeds, fails, pauses or is cancelled."""
    return _RLRun(store, job_id, on_event).run(control_poll_s)


class _RLRun(TrainingRun):
    kind = "rl"

    def train(
        self, config: JobConfig, base_dir: Path, control: JobControl
    ) -> tuple[TrainingStats, Path | None]:
        from emery.training.rl_trainer import train_rl  # torch: imported only to train

        assert config.rl is not None
        reward = job_reward(config, base_dir, self.store)
        return train_rl(
            config.lm.task.model.removeprefix("local/"),
            config.rl,
            reward.rows(),
            reward,
            run_dir(base_dir, config, self.job_id),
            seed=config.job.seed,
            hooks=self.hooks(control),
        )

    def result(
        self, model: str, adapter: Path, stats: TrainingStats, lift: Lift | None
    ) -> RLResult:
        return RLResult(model=model, adapter_path=str(adapter), training=stats, test=lift)
