"""RL on an agent: rollouts from a ``RolloutSource``, one ``agent_grpo`` step each, checkpointed.

Step ``s`` asks the source for the credited calls of its episodes, sampled with the policy
after step ``s - 1`` (the peft adapter at ``<run dir>/policy``; None at step 1: the base
model), takes one GRPO step on them, writes the new policy and reports its loss, mean reward
and KL through ``TrainingHooks``. Every ``save_steps`` steps, and when a pause is asked, the
adapter, the optimizer, the torch RNG and the step go to ``<run dir>/checkpoints/
checkpoint-<step>`` (written aside, then renamed); a run resumes from the newest one at the
next step with the checkpoint's adapter served as the policy, so a killed run continues as
if it had not stopped (the rollouts are the source's: exact when its sampling is seeded by
the step). The adapter of the last step goes to ``<run dir>/adapter``.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from emery.config.schema import RLSection
from emery.core.trajectories import CreditedCall
from emery.training.agent_grpo import GRPOSettings, grpo_step, make_optimizer
from emery.training.gguf_adapter import ADAPTER_WEIGHTS
from emery.training.trainer import (
    TrainingHooks,
    TrainingStats,
    checkpoint_root,
    last_checkpoint,
    lora_config,
    start_torch,
)

STATE = "trainer_state.json"
"""The step file of a checkpoint (named as the Trainer's, which ``last_checkpoint`` reads)."""
OPTIMIZER = "optimizer.pt"
RNG = "rng_state.pt"
ADAPTER = "adapter"
KEEP = 2
"""Checkpoints kept (the newest)."""


class RolloutSource(Protocol):
    """Where an agent RL run's episodes come from."""

    def rows(self, step: int, policy: Path | None) -> list[CreditedCall]:
        """The credited calls of step ``step``'s episodes (groups of episodes per example),
        sampled with the peft adapter at ``policy`` (None: the base model)."""
        ...


class RunState(BaseModel):
    """What a checkpoint records besides the weights: the step and the history so far."""

    step: int = 0
    losses: list[float] = Field(default_factory=list)
    rewards: list[float] = Field(default_factory=list)
    episodes: int = 0
    calls: int = 0
    tokens: int = 0


def grpo_settings(settings: RLSection) -> GRPOSettings:
    """The GRPO step of an ``[rl]`` section. The temperature is 1: the local model records
    the log-probabilities of its raw logits, whatever temperature it samples at."""
    return GRPOSettings(beta=settings.beta, temperature=1.0)


def train_agent_rl(
    base: Callable[[], Any],
    settings: RLSection,
    source: RolloutSource,
    run_dir: Path,
    *,
    seed: int,
    hooks: TrainingHooks,
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume) a LoRA of the model ``base()`` returns on ``source``'s episodes;
    returns the stats and the saved peft adapter (None when stopped early)."""
    torch = start_torch(settings)
    from peft import PeftModel, get_peft_model

    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    resume = last_checkpoint(run_dir)
    if resume is None:
        model = get_peft_model(base(), lora_config(settings))
        state = RunState()
    else:
        model = PeftModel.from_pretrained(base(), str(resume / ADAPTER), is_trainable=True)
        state = RunState.model_validate_json((resume / STATE).read_text())
    model.to(device)
    optimizer = make_optimizer(model, settings.learning_rate)
    if resume is not None:
        optimizer.load_state_dict(torch.load(resume / OPTIMIZER, map_location=device))
        torch.set_rng_state(torch.load(resume / RNG))
    policy = None if resume is None else resume / ADAPTER
    step_settings = grpo_settings(settings)
    first_step = state.step
    first_tokens = state.tokens
    stopped: str | None = None
    start = time.perf_counter()
    while state.step < settings.max_steps:
        step = state.step + 1
        stats = grpo_step(model, optimizer, source.rows(step, policy), step_settings)
        state.step = step
        state.losses.append(stats.loss)
        state.rewards.append(stats.mean_reward)
        state.episodes += stats.episodes
        state.calls += stats.calls
        state.tokens += stats.tokens
        hooks.on_loss("train", step, stats.loss)
        if hooks.on_reward is not None:
            hooks.on_reward(step, stats.mean_reward, stats.kl)
        policy = _save_adapter(model, run_dir / "policy")
        saved = step % settings.save_steps == 0
        if saved:
            _save_checkpoint(model, optimizer, state, run_dir, torch)
            hooks.on_checkpoint(step)
        action = hooks.requested()
        if action is not None and step < settings.max_steps:
            stopped = action
            if action == "pause" and not saved:
                _save_checkpoint(model, optimizer, state, run_dir, torch)
                hooks.on_checkpoint(step)
            break
    wall = time.perf_counter() - start
    adapter = None if stopped is not None else _save_adapter(model, run_dir / ADAPTER)
    done = state.step - first_step
    tokens = state.tokens - first_tokens
    return TrainingStats(
        steps=state.step,
        resumed_from_step=first_step if resume is not None else None,
        stopped=stopped,
        first_loss=state.losses[0] if state.losses else None,
        last_loss=state.losses[-1] if state.losses else None,
        first_val_loss=None,
        last_val_loss=None,
        first_reward=state.rewards[0] if state.rewards else None,
        last_reward=state.rewards[-1] if state.rewards else None,
        train_examples=state.episodes,
        val_examples=0,
        wall_s=wall,
        steps_per_s=done / wall if wall > 0 else 0.0,
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        tokens=tokens,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        device=device,
    ), adapter


def _save_adapter(model: Any, folder: Path) -> Path:
    """The peft adapter to ``folder``, written aside and renamed (a reader never sees half)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _write_adapter(model, partial)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def _write_adapter(model: Any, folder: Path) -> None:
    """peft's adapter files (weights and config), without the model card that
    ``save_pretrained`` renders each time (most of its cost on a small adapter)."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    weights = {k: v.detach().contiguous() for k, v in get_peft_model_state_dict(model).items()}
    save_file(weights, str(folder / ADAPTER_WEIGHTS))
    model.peft_config["default"].save_pretrained(str(folder))


def _save_checkpoint(
    model: Any, optimizer: Any, state: RunState, run_dir: Path, torch: Any
) -> None:
    root = checkpoint_root(run_dir)
    folder = root / f"checkpoint-{state.step}"
    partial = root / f".partial-{state.step}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _write_adapter(model, partial / ADAPTER)
    torch.save(optimizer.state_dict(), partial / OPTIMIZER)
    torch.save(torch.get_rng_state(), partial / RNG)
    # written aside and renamed: ``last_checkpoint`` never takes half a checkpoint
    (partial / STATE).write_text(json.dumps(state.model_dump(mode="json")))
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    steps = sorted(
        int(p.name.split("-")[-1])
        for p in root.glob("checkpoint-*")
        if p.name.split("-")[-1].isdigit()
    )
    for old in steps[:-KEEP]:  # the newest ones only, as the Trainer's save_total_limit
        shutil.rmtree(root / f"checkpoint-{old}", ignore_errors=True)
