"""An RL job: GRPO on a LoRA of the local task model, the job's verifier as the reward.

The prompt it trains (and scores on test) is the system's seed, or the best candidate of a
finished prompt job named by ``[rl] source_job``. A prompt program (of one stage) is trained
by trl's GRPO on its rendered prompt (``rl_trainer``); any other system (a function agent, a
task app, a code harness, a workflow) as an agent: groups of its episodes per example, every
LM call of an episode trained with the episode's advantage (``agent_episodes``,
``agent_rl``).

``check_rl_job`` refuses a config whose model, system, dataset or verifier do not resolve
before the job is stored; ``train_rl_job`` trains from the last checkpoint and reports
``train_reward`` (mean reward and KL per step) and losses through ``TrainingHooks``. The
job around it is the jobs runtime's, as for SFT (``emery.jobs.training_kinds``).
"""

from __future__ import annotations

from pathlib import Path

from emery.config.resolve import resolve_job, resolve_lm
from emery.config.schema import JobConfig, RLSection
from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.evaluation.executor import Executor
from emery.lm.catalog import installed_path
from emery.store.protocol import Store
from emery.systems.base import System
from emery.systems.prompt_program import PromptProgram
from emery.tracing.trajectories import Selection, agent_named, credit_policy, every_call
from emery.training.agent_episodes import AgentEpisodes
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
    resolved = resolve_job(config, base_dir)
    dataset = resolved.dataset
    examples = [e for split in config.rl.splits for e in dataset.split(split)]
    if not examples:
        raise ConfigError(
            f"dataset {dataset.name!r} has no examples on {'/'.join(config.rl.splits)}:"
            " nothing to train an rl job on"
        )
    system, verifier = resolved.system, resolved.verifier
    if getattr(verifier, "needs_expected", False) and any(e.expected is None for e in examples):
        raise ConfigError(
            "the verifier compares with each example's expected output; some rl examples have none"
        )
    candidate = trained_candidate(store, config, system.seed_candidate())
    reward = VerifierReward(system, candidate, verifier, examples)
    if reward.restates:
        reward.lm = resolve_lm(config.lm.task)
    if reward.stage.name not in candidate.components:
        raise ConfigError(
            f"rl.source_job's best candidate has no component {reward.stage.name!r}:"
            " it was found for another system"
        )
    return reward


def trains_an_agent(system: System) -> bool:
    """Whether an rl job trains ``system`` as an agent (the LM calls of its episodes) rather
    than as one prompt (trl's GRPO): every system but a prompt program."""
    return not isinstance(system, PromptProgram)


def runs_agent_episodes(config: JobConfig, system: System) -> bool:
    """Whether ``config`` is an rl job that trains ``system`` as an agent: its rollouts are
    episodes (``agent_policy``), sampled from the policy of their step."""
    return config.job.type == "rl" and trains_an_agent(system)


def agent_keys(settings: RLSection) -> list[str]:
    """The ``[rl]`` keys set away from their defaults that apply to an agent's LM calls."""
    defaults = RLSection()
    return [
        key
        for key in ("credit", "discount", "agent")
        if getattr(settings, key) != getattr(defaults, key)
    ]


def agent_selection(settings: RLSection) -> Selection:
    """The LM calls ``[rl] agent`` trains: that agent's, else every call."""
    return every_call if settings.agent is None else agent_named(settings.agent)


def agent_episodes(
    store: Store,
    config: JobConfig,
    base_dir: Path,
    job_id: str,
    executor: Executor | None = None,
) -> AgentEpisodes | None:
    """The episodes an rl job trains on when its system is an agent (None: a prompt
    program, trained by ``job_reward``'s prompt rows), credited and selected as its
    ``[rl]`` section says, run on ``executor`` (None: in this process)."""
    assert config.rl is not None
    resolved = resolve_job(config, base_dir)
    dataset, system = resolved.dataset, resolved.system
    if not trains_an_agent(system):
        keys = agent_keys(config.rl)
        if keys:
            raise ConfigError(
                f"rl.{keys[0]} applies to an agent's LM calls; a prompt program's rl job"
                " trains its one prompt (use a function agent, task app or code harness)"
            )
        if config.runtime.executor != "local":
            raise ConfigError(
                f"executor = {config.runtime.executor!r} runs an agent's episodes elsewhere;"
                ' a prompt program\'s rl job samples in its trainer: use executor = "local"'
            )
        return None
    examples = [e for split in config.rl.splits for e in dataset.split(split)]
    if not examples:
        raise ConfigError(
            f"dataset {dataset.name!r} has no examples on {'/'.join(config.rl.splits)}:"
            " nothing to train an rl job on"
        )
    return AgentEpisodes(
        system=system,
        candidate=trained_candidate(store, config, system.seed_candidate()),
        verifier=resolved.verifier,
        examples=examples,
        lm=config.lm.task,
        settings=config.rl,
        store=store,
        job_id=job_id,
        run_dir=run_dir(base_dir, config, job_id),
        seed=config.job.seed,
        concurrency=config.runtime.concurrency,
        executor=executor,
        credit=credit_policy(config.rl.credit, gamma=config.rl.discount),
        select=agent_selection(config.rl),
    )


def check_rl_job(store: Store, config: JobConfig, base_dir: Path) -> None:
    """Refuse an RL config whose system, data, source job or base model it cannot use."""
    if agent_episodes(store, config, base_dir, "check") is None:
        job_reward(config, base_dir, store)
    installed_path(config.lm.task.model.removeprefix("local/"))


def train_rl_job(
    store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume from its last checkpoint) RL job ``job_id`` of ``config``."""
    assert config.rl is not None
    episodes = agent_episodes(store, config, base_dir, job_id, hooks.executor)
    if episodes is not None:
        return _train_agent(episodes, config, base_dir, job_id, hooks)
    from emery.training.rl_trainer import train_rl  # torch: imported only to train

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


def _train_agent(
    episodes: AgentEpisodes, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
) -> tuple[TrainingStats, Path | None]:
    # torch: imported only to train
    from emery.training.agent_rl import train_agent_rl
    from emery.training.base_model import load_base

    assert config.rl is not None
    name = config.lm.task.model.removeprefix("local/")
    return train_agent_rl(
        lambda: load_base(name)[0],
        config.rl,
        episodes,
        run_dir(base_dir, config, job_id),
        seed=config.job.seed,
        hooks=hooks,
    )
