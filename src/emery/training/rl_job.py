"""An RL job: GRPO on a LoRA of the local task model, the job's verifier as the reward.

The prompt it trains (and scores on test) is the system's seed, or the best candidate of a
finished prompt job named by ``[rl] source_job``.

``check_rl_job`` refuses a config whose model, system, dataset or verifier do not resolve
before the job is stored; ``train_rl_job`` trains from the last checkpoint and reports
``train_reward`` (mean reward and KL per step) and losses through ``TrainingHooks``. The
job around it is the jobs runtime's, as for SFT (``emery.jobs.training_kinds``).
"""

from __future__ import annotations

from pathlib import Path

from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.lm.catalog import installed_path
from emery.lm.config import build_lm
from emery.lm.usage import UsageMeter
from emery.store.protocol import Store
from emery.training.job import SFTResult
from emery.training.paths import run_dir
from emery.training.reward import VerifierReward
from emery.training.scoring import scored_candidate
from emery.training.trainer import TrainingHooks, TrainingStats


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


def check_rl_job(store: Store, config: JobConfig, base_dir: Path) -> None:
    """Refuse an RL config whose system, data, source job or base model it cannot use."""
    job_reward(config, base_dir, store)
    installed_path(config.lm.task.model.removeprefix("local/"))


def train_rl_job(
    store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume from its last checkpoint) RL job ``job_id`` of ``config``."""
    from emery.training.rl_trainer import train_rl  # torch: imported only to train

    assert config.rl is not None
    reward = job_reward(config, base_dir, store)
    return train_rl(
        config.lm.task.model.removeprefix("local/"),
        config.rl,
        reward.rows(),
        reward,
        run_dir(base_dir, config, job_id),
        seed=config.job.seed,
        hooks=hooks,
    )
