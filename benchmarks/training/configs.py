"""The three job configs of the training benchmark, as dicts `emery train` reads as JSON.

All three share one base: the same dataset (path or built-in task, split sizes, seed),
system, verifier and task model, so the SFT and RL jobs score the prompt job's best prompt
on the very test split the prompt job reported.
"""

from __future__ import annotations

import argparse
import copy
import math
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SVAMP = ROOT / "benchmarks" / "quality" / "real" / "svamp.toml"


def base_config(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """What every stage shares: data, sizes, system, verifier, models, workdir."""
    if args.dataset == "svamp":
        data = tomllib.loads(SVAMP.read_text())
        data["dataset"]["path"] = str((SVAMP.parent / data["dataset"]["path"]).resolve())
        data.pop("references", None)  # hand-written prompts: not compared here
        if args.max_tokens is not None:
            for stage in data["system"]["stages"]:
                stage["max_tokens"] = args.max_tokens
    else:
        data = {"dataset": {"task": args.dataset}, "lm": {"task": {}}}
    data["dataset"] |= {"n_train": args.n_train, "n_val": args.n_val, "n_test": args.n_test}
    data["job"] = {"seed": args.seed}
    for role in ("task", "proposer", "reflection"):
        data["lm"].setdefault(role, {})["model"] = args.model
    data.setdefault("runtime", {})["workdir"] = str(workdir / "runs")
    return data


def prompt_config(base: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """A MIPRO prompt job with a metric-call (and wall-time) budget."""
    data = copy.deepcopy(base)
    budget = {"metric_calls": args.metric_calls}
    if args.prompt_wall_time is not None:
        budget["wall_time_s"] = args.prompt_wall_time
    data["job"] |= {"name": "training-bench-prompt", "algorithm": "mipro", "budget": budget}
    return data


def sft_config(
    base: dict[str, Any], args: argparse.Namespace, source_job: str, max_steps: int
) -> dict[str, Any]:
    """An SFT job on ``source_job``'s successful train rollouts."""
    data = _training(base, "sft")
    data["sft"] = {
        "source_job": source_job,
        "candidate": args.sft_candidate,
        "splits": args.sft_splits.split(","),
        "min_score": args.sft_min_score,
        "max_steps": max_steps,
        "save_steps": max_steps,
        "batch_size": args.sft_batch_size,
        "val_fraction": args.sft_val_fraction,
        "eval_steps": max(1, max_steps // 4),
    }
    return data


def rl_config(base: dict[str, Any], args: argparse.Namespace, source_job: str) -> dict[str, Any]:
    """A GRPO job training ``source_job``'s best prompt, the verifier as the reward."""
    data = _training(base, "rl")
    data["rl"] = {
        "source_job": source_job,
        "max_steps": args.rl_steps,
        "save_steps": args.rl_steps,
        "prompts_per_step": args.rl_prompts_per_step,
        "num_generations": args.rl_generations,
        "max_completion_length": args.rl_completion_tokens,
    }
    return data


def _training(base: dict[str, Any], kind: str) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["job"] |= {"name": f"training-bench-{kind}", "type": kind}
    data["lm"] = {"task": data["lm"]["task"]}  # a training job uses the task model only
    return data


def sft_steps(epochs: float, chats: int, batch_size: int) -> int:
    """Optimizer steps for ``epochs`` passes over ``chats`` at ``batch_size`` (at least 1)."""
    return max(1, math.ceil(epochs * chats / batch_size))
