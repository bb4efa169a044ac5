"""RL on an agent (issue 35): GRPO on every LM call of an agent's episodes, one stage.

An `emery train` of an rl job (in a subprocess, as a user runs it) whose system is an agent:
the built-in `calculator` code harness (`--task harness_calculator`, the default: tool calls
to `calculate` and `convert`, the numeric verifier) or a two-call function agent on the
built-in word problems (`--task two_call`: a thought, then the answer). Each step runs
`--prompts-per-step` examples x `--generations` episodes on the local model with the
current policy as its LoRA and takes one GRPO step; the job then scores the base and the
tuned model with the agent on test. `--verifier-pattern REGEX` rewards a reply that
matches REGEX instead of the task's verifier (a format reward a small model can learn in a
few steps), `--credit` picks the `[rl] credit` policy and `--executor ray` runs the
episodes on a local Ray of `--threads` CPUs.

    .venv/bin/python benchmarks/training/agent_rl.py --out agent_rl.json

Prints the mean reward and KL of each step, then one markdown row: test accuracy before
(base) and after (tuned) with n and the Wilson 95% interval, wall time, training time, the
trainer's and the whole process's peak memory, and the device it trained on (`cuda` when
a GPU was there).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from run import run_stage

from emery.evaluation.stats import ScoreSummary
from emery.store import SQLiteStore

TWO_CALL_AGENT = '''
from emery.systems.function_agent import agent


@agent
def solve(task, lm):
    """Two calls: a thought, then the answer."""
    thought = lm("Question: " + task["question"] + "\\nThink step by step, briefly.")
    return lm("Question: " + task["question"] + "\\nThought: " + thought + "\\nAnswer:")
'''


def agent_rl_config(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The rl job: the task's data and agent, the local model, the GRPO settings."""
    config: dict[str, Any] = {
        "job": {"type": "rl", "seed": args.seed},
        "rl": {
            "max_steps": args.steps,
            "save_steps": args.steps,
            "prompts_per_step": args.prompts_per_step,
            "num_generations": args.generations,
            "max_completion_length": args.max_tokens,
            "learning_rate": args.lr,
            "temperature": args.temperature,
            "threads": args.threads,
        },
        "dataset": {"task": "harness_calculator", "n_train": args.n_train, "n_val": 0},
        "lm": {
            "task": {
                "model": args.model,
                "max_tokens": args.max_tokens,
                "n_ctx": 4096,
                "n_threads": args.threads,
            }
        },
        "runtime": {"workdir": str(workdir / "work"), "concurrency": args.concurrency},
    }
    config["dataset"]["n_test"] = args.n_test
    if args.verifier_pattern is not None:
        config["verifier"] = {"kind": "regex", "pattern": args.verifier_pattern}
    if args.credit != "same":
        config["rl"]["credit"] = args.credit
    if args.executor == "ray":
        config["runtime"] |= {"executor": "ray", "ray_cpus": args.threads}
    if args.task == "two_call":
        (workdir / "two_call_agent.py").write_text(TWO_CALL_AGENT)
        config["dataset"]["task"] = "word_problems"
        config["system"] = {"kind": "function_agent", "agent": "two_call_agent:solve"}
    return config


def _score(summary: dict[str, Any] | None) -> str:
    return "—" if not summary else str(ScoreSummary.model_validate(summary))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["harness_calculator", "two_call"])
    parser.add_argument("--model", default="local/smollm2-135m")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--n-train", type=int, default=16)
    parser.add_argument("--n-test", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--verifier-pattern",
        default=None,
        help="reward a reply that matches this regex (default: the task's verifier)",
    )
    parser.add_argument("--credit", choices=["same", "discounted", "per_step"], default="same")
    parser.add_argument(
        "--executor", choices=["local", "ray"], default="local", help="where episodes run"
    )
    parser.add_argument("--workdir", type=Path, default=Path("agent_rl_work"))
    parser.add_argument("--out", type=Path, default=None)
    parser.set_defaults(task="harness_calculator")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    stage = run_stage(f"agent_rl_{args.task}", agent_rl_config(args, workdir), workdir)
    job_id = stage["payload"]["job_id"]
    store = SQLiteStore(workdir / "emery.db")
    steps = [
        {"step": e.data["step"], "reward": e.data["reward"], "kl": e.data.get("kl")}
        for e in store.list_events(job_id, kinds=["train_reward"])
    ]
    result = stage["payload"]["result"]
    training = result["training"]
    test = result.get("test") or {}
    print("| step | mean reward | KL |\n|---|---|---|")
    for row in steps:
        kl = "—" if row["kl"] is None else f"{row['kl']:.5f}"
        print(f"| {row['step']} | {row['reward']:.3f} | {kl} |")
    print(
        "\n| task | model | test before | test after | wall s | train s | train peak MiB"
        " | process peak MiB | device |\n|---|---|---|---|---|---|---|---|---|"
    )
    print(
        f"| {args.task} | {args.model} | {_score(test.get('base'))} | {_score(test.get('tuned'))}"
        f" | {stage['wall_s']:.0f} | {training['wall_s']:.0f} | {training['peak_rss_mb']:.0f}"
        f" | {stage['process_peak_mib']:.0f} | {training['device']} |"
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(args).items()}, "job_id": job_id}
                | {"steps": steps, "result": result, "wall_s": stage["wall_s"]}
                | {"process_peak_mib": stage["process_peak_mib"]},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
