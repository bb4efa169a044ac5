"""LoRA fine-tuning of a local model with trl's ``SFTTrainer`` on the CPU (or a GPU), and
the parts every training job shares (``lora_config``, ``common_args``, ``fit``).

Checkpoints (adapter, optimizer, scheduler, step, RNG: the Trainer's own format) go to
``<run dir>/checkpoints/checkpoint-<step>`` every ``save_steps`` steps and when a pause is
asked; ``train`` resumes from the newest one. Losses, checkpoints and a stop request are
reported through ``TrainingHooks`` between steps.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.schema import LoRASection, SFTSection
from emery.core.events import Event
from emery.evaluation.executor import Executor
from emery.training.base_model import import_torch, load_base
from emery.training.data import Conversation, SampledData, prompt_completion


@dataclass
class TrainingHooks:
    """What the trainer tells its job between steps, and asks it."""

    on_loss: Callable[[str, int, float], None]
    """(``"train"`` or ``"val"``, step, loss)."""
    on_checkpoint: Callable[[int], None]
    requested: Callable[[], str | None]
    """``"pause"``, ``"cancel"`` (or another stop) when the run must stop, else None."""
    on_reward: Callable[[int, float, float | None], None] | None = None
    """(step, mean reward, KL to the base model) of an RL step."""
    executor: Executor | None = None
    """Where the job runs rollouts in other processes (``[runtime] executor``: runners, Ray),
    for a trainer that runs any (an RL job's agent episodes); None: in this process."""
    on_events: Callable[[Sequence[Event]], None] | None = None
    """Events the trainer stored itself (an SFT job's sampling rounds), for the job's
    listeners."""


class TrainingStats(BaseModel):
    """How a training run went."""

    steps: int
    resumed_from_step: int | None
    stopped: str | None
    """The stop request that ended the run early (None: it reached max_steps)."""
    first_loss: float | None
    last_loss: float | None
    first_val_loss: float | None
    last_val_loss: float | None
    first_reward: float | None = None
    last_reward: float | None = None
    train_examples: int
    val_examples: int
    wall_s: float
    steps_per_s: float
    tokens_per_s: float
    tokens: int
    peak_rss_mb: float
    device: str
    sampled: SampledData | None = None
    """What an SFT job's rejection sampling gave (``[sft] samples_per_example``)."""


def checkpoint_root(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def last_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint folder of a run, if any."""
    root = checkpoint_root(run_dir)
    done = [
        p
        for p in root.glob("checkpoint-*")
        if p.name.split("-")[-1].isdigit() and (p / "trainer_state.json").is_file()
    ]
    return max(done, key=lambda p: int(p.name.split("-")[-1])) if done else None


def device_settings(torch: Any) -> dict[str, Any]:
    """CPU (float32) unless a GPU is present (then bf16 where it supports it)."""
    if torch.cuda.is_available():
        return {"use_cpu": False, "bf16": bool(torch.cuda.is_bf16_supported())}
    return {"use_cpu": True, "bf16": False}


def lora_config(settings: LoRASection) -> Any:
    """peft's LoRA of the job's settings."""
    from peft import LoraConfig

    return LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=list(settings.target_modules),
        task_type="CAUSAL_LM",
    )


def start_torch(settings: LoRASection) -> Any:
    """torch, with its thread count set from the job's settings."""
    torch = import_torch()
    torch.set_num_threads(settings.threads or max(1, (os.cpu_count() or 2) - 1))
    return torch


def common_args(settings: LoRASection, run_dir: Path, seed: int, torch: Any) -> dict[str, Any]:
    """The Trainer arguments every job shares: steps, checkpoints, seed, device, quiet."""
    return {
        "output_dir": str(checkpoint_root(run_dir)),
        "max_steps": settings.max_steps,
        "learning_rate": settings.learning_rate,
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": settings.save_steps,
        "save_total_limit": 2,
        "seed": seed,
        "data_seed": seed,
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        **device_settings(torch),
    }


def train(
    model_name: str,
    settings: SFTSection,
    train_set: list[Conversation],
    val_set: list[Conversation],
    run_dir: Path,
    *,
    seed: int,
    hooks: TrainingHooks,
) -> tuple[TrainingStats, Path | None]:
    """Train (or resume) a LoRA adapter of ``local/<model_name>``; returns the stats and
    the saved peft adapter folder (None when the run was stopped before its last step)."""
    torch = start_torch(settings)
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = load_base(model_name)
    resume = last_checkpoint(run_dir)
    args = SFTConfig(
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        eval_strategy="steps" if val_set else "no",
        eval_steps=settings.eval_steps,
        eval_on_start=bool(val_set) and resume is None,
        max_length=settings.max_length,
        completion_only_loss=True,
        include_num_input_tokens_seen="non_padding",
        **common_args(settings, run_dir, seed, torch),
    )
    hook = HookCallback(hooks)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list([prompt_completion(c) for c in train_set]),
        eval_dataset=Dataset.from_list([prompt_completion(c) for c in val_set])
        if val_set
        else None,
        processing_class=tokenizer,
        peft_config=lora_config(settings),
        callbacks=[hook.callback()],
    )
    return fit(trainer, hook, resume, run_dir, torch, examples=(len(train_set), len(val_set)))


def fit(
    trainer: Any,
    hook: HookCallback,
    resume: Path | None,
    run_dir: Path,
    torch: Any,
    *,
    examples: tuple[int, int],
) -> tuple[TrainingStats, Path | None]:
    """Run a built trl trainer (from ``resume`` when given) and save its adapter unless
    stopped early; ``examples`` = (train, val) counts for the stats."""
    # the job's own events replace the Trainer's printed log dicts,
    # which would land on stdout (and break `--json` output)
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    wall = time.perf_counter() - start
    state = trainer.state
    done_steps = state.global_step - hook.first_step
    tokens = int(state.num_input_tokens_seen or 0) - hook.first_tokens
    adapter: Path | None = None
    if hook.stopped is None:
        adapter = run_dir / "adapter"
        trainer.model.save_pretrained(str(adapter))
    stats = TrainingStats(
        steps=state.global_step,
        resumed_from_step=hook.first_step if resume is not None else None,
        stopped=hook.stopped,
        first_loss=hook.first("train"),
        last_loss=hook.last("train"),
        first_val_loss=hook.first("val"),
        last_val_loss=hook.last("val"),
        first_reward=hook.first("reward"),
        last_reward=hook.last("reward"),
        train_examples=examples[0],
        val_examples=examples[1],
        wall_s=wall,
        steps_per_s=done_steps / wall if wall > 0 else 0.0,
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        tokens=tokens,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    return stats, adapter


class HookCallback:
    """The Trainer callback: losses and checkpoints out, stop requests in."""

    def __init__(self, hooks: TrainingHooks) -> None:
        self.hooks = hooks
        self.losses: dict[str, list[float]] = {"train": [], "val": [], "reward": []}
        self.first_step = -1
        self.first_tokens = 0
        self.stopped: str | None = None

    def first(self, split: str) -> float | None:
        return self.losses[split][0] if self.losses[split] else None

    def last(self, split: str) -> float | None:
        return self.losses[split][-1] if self.losses[split] else None

    def reward(self, step: int, logs: dict[str, Any]) -> None:
        """An RL step's mean reward (and KL, when trl logged one) to the job."""
        if logs.get("reward") is None or self.hooks.on_reward is None:
            return
        self.losses["reward"].append(float(logs["reward"]))
        kl = logs.get("kl")
        self.hooks.on_reward(step, float(logs["reward"]), None if kl is None else float(kl))

    def callback(self) -> Any:
        from transformers import TrainerCallback

        outer = self

        class Callback(TrainerCallback):  # type: ignore[misc]
            def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                outer.first_step = state.global_step
                outer.first_tokens = int(state.num_input_tokens_seen or 0)

            def on_log(
                self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any
            ) -> None:
                for key, split in (("loss", "train"), ("eval_loss", "val")):
                    if logs and key in logs:
                        outer.losses[split].append(float(logs[key]))
                        outer.hooks.on_loss(split, state.global_step, float(logs[key]))
                outer.reward(state.global_step, logs or {})

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                action = outer.hooks.requested()
                if action is None or state.global_step >= state.max_steps:
                    return
                outer.stopped = action
                control.should_training_stop = True
                control.should_save = action == "pause"

            def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                outer.hooks.on_checkpoint(state.global_step)

        return Callback()
