"""GRPO on a LoRA of a local model with trl's ``GRPOTrainer`` (CPU, or a GPU).

Each step samples ``prompts_per_step`` prompt rows, generates ``num_generations``
completions of each with the model being trained, rewards them with the job's reward
function and takes one optimizer step; with a LoRA, trl's KL reference (``beta``) is the
base model (the adapter switched off). Checkpoints, resume, stop requests and the stats
are the SFT trainer's (``trainer.fit``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from emery.config.schema import RLSection
from emery.training.base_model import load_base
from emery.training.trainer import (
    HookCallback,
    TrainingHooks,
    TrainingStats,
    common_args,
    fit,
    last_checkpoint,
    lora_config,
    start_torch,
)

RewardFunction = Callable[..., list[float]]


def train_rl(
    model_name: str,
    settings: RLSection,
    rows: list[dict[str, Any]],
    reward: RewardFunction,
    run_dir: Path,
    *,
    seed: int,
    hooks: TrainingHooks,
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume) a LoRA of ``local/<model_name>`` with GRPO on ``rows`` (trl prompt
    rows); returns the stats and the saved peft adapter (None when stopped early)."""
    torch = start_torch(settings)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = load_base(model_name)
    tokenizer.padding_side = "left"  # trl generates from left-padded prompts
    resume = last_checkpoint(run_dir)
    args = GRPOConfig(
        per_device_train_batch_size=settings.prompts_per_step * settings.num_generations,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        beta=settings.beta,
        # without it, GRPO on Qwen2.5-0.5B (8 completions, a prompt with demos) held 24 GB
        # of activations in its first step and was killed for memory on the CPU
        gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        **common_args(settings, run_dir, seed, torch),
    )
    hook = HookCallback(hooks)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(settings),
        callbacks=[hook.callback()],
    )
    return fit(trainer, hook, resume, run_dir, torch, examples=(len(rows), 0))
