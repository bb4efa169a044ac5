"""Prompt vs SFT vs RL on one task (issue 17): the best prompt MIPRO finds, the same prompt
on the model SFT-tuned on the prompt job's successful train rollouts, and on the model
RL-tuned (GRPO, the verifier as reward) from that prompt; all scored on one test split.

Each stage is one `emery train CONFIG --json` in a subprocess, as a user would run it, all
sharing one store under --workdir: a MIPRO prompt job, then an SFT job (``source_job`` =
the prompt job) and an RL job (``source_job`` = the prompt job), whose own post-training
evaluation scores base and tuned model with the prompt job's best prompt on test.

    .venv/bin/python benchmarks/training/run.py --out training.json

With ``--workdir``, a stage that succeeded there before is taken from it rather than run
again, so a later stage can be re-run with other settings on the same prompt job.

Prints one markdown row per stage: model, test accuracy (n, Wilson 95% interval, from the
jobs), the lift over the prompt alone, wall time, training time, tokens/s and peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from configs import base_config, prompt_config, rl_config, sft_config, sft_steps

from emery.evaluation.stats import ScoreSummary

HEADER = (
    "| stage | model | test accuracy (n, 95% CI) | same prompt, base (in job) | lift vs prompt"
    " | wall s | train s | train tok/s | train peak MiB | process peak MiB |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def run_stage(name: str, config: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """`emery train` on ``config`` in a subprocess: its JSON payload, wall time and the
    child's peak RSS (``wait4``: the whole process, model loading and scoring included).
    A stage that succeeded before in ``workdir`` (``<name>.stage.json``) is not run again."""
    done = workdir / f"{name}.stage.json"
    if done.is_file():
        stage: dict[str, Any] = json.loads(done.read_text())
        return stage
    stage = _run_child(name, config, workdir)
    done.write_text(json.dumps(stage))
    return stage


def _run_child(name: str, config: dict[str, Any], workdir: Path) -> dict[str, Any]:
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(config, indent=2))
    emery = Path(sys.executable).with_name("emery")
    command = [str(emery), "train", str(path), "--json", "--new", "--stream-format", "none"]
    command += ["--store", str(workdir / "emery.db")]
    started = time.perf_counter()
    with (workdir / f"{name}.out").open("w") as out, (workdir / f"{name}.err").open("w") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
        finally:  # a stopped benchmark stops its job too (SIGTERM is made an exit in main)
            if child.returncode is None:
                child.terminate()
                child.wait()
    wall = time.perf_counter() - started
    stderr = (workdir / f"{name}.err").read_text()
    if child.returncode != 0:
        raise SystemExit(f"{name}: emery train failed ({child.returncode}): {stderr[-2000:]}")
    payload: dict[str, Any] = json.loads((workdir / f"{name}.out").read_text())
    return {"payload": payload, "wall_s": wall, "process_peak_mib": usage.ru_maxrss / 1024}


def prompt_row(stage: dict[str, Any], model: str) -> dict[str, Any]:
    """The prompt stage's figures: the best prompt's test score, from the job's result."""
    result = stage["payload"]["result"]
    return {
        "stage": "prompt (MIPRO)",
        "job_id": stage["payload"]["job_id"],
        "model": model,
        "test": result.get("best_test"),
        "seed_test": result.get("baseline_test"),
        "best_candidate_id": (result.get("best_candidate") or {}).get("id"),
        "metric_calls": (result.get("budget") or {}).get("metric_calls"),
        "base_in_job": None,
        "lift_vs_prompt": None,
        "wall_s": stage["wall_s"],
        "process_peak_mib": stage["process_peak_mib"],
        "training": None,
    }


def training_row(name: str, stage: dict[str, Any], prompt: dict[str, Any]) -> dict[str, Any]:
    """An SFT or RL stage's figures: the tuned model's test score with the same prompt
    (the job's own scoring), its lift over the prompt stage, training throughput."""
    result = stage["payload"]["result"]
    lift = result.get("test") or {}
    tuned = lift.get("tuned")
    best = prompt["test"]
    return {
        "stage": name,
        "job_id": stage["payload"]["job_id"],
        "model": result["model"],
        "test": tuned,
        "scored_candidate_id": lift.get("candidate_id"),
        "base_in_job": lift.get("base"),
        "lift_vs_prompt": tuned["mean"] - best["mean"] if tuned and best else None,
        "wall_s": stage["wall_s"],
        "process_peak_mib": stage["process_peak_mib"],
        "training": result["training"],
    }


def _score(summary: dict[str, Any] | None) -> str:
    return "—" if not summary else str(ScoreSummary.model_validate(summary))


def _number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def row_markdown(row: dict[str, Any]) -> str:
    """One table row of a stage."""
    training = row["training"] or {}
    lift = row["lift_vs_prompt"]
    return (
        f"| {row['stage']} | {row['model']} | {_score(row['test'])} | "
        f"{_score(row['base_in_job'])} | "
        f"{'—' if lift is None else f'{lift * 100:+.1f} points'} | {row['wall_s']:.0f} | "
        f"{_number(training.get('wall_s'))} | {_number(training.get('tokens_per_s'), 1)} | "
        f"{_number(training.get('peak_rss_mb'))} | {row['process_peak_mib']:.0f} |"
    )


def training_chats(workdir: Path, source_job: str, args: argparse.Namespace) -> int:
    """How many chats the SFT job will train on (after its val hold-out): the same
    selection and split as ``emery.training``, read from the benchmark's store."""
    from emery.store import SQLiteStore
    from emery.training.data import hold_out, job_conversations

    store = SQLiteStore(workdir / "emery.db")
    try:
        chats = job_conversations(
            store,
            source_job,
            candidate=args.sft_candidate,
            splits=tuple(args.sft_splits.split(",")),
            min_score=args.sft_min_score,
        )
    finally:
        store.close()
    return len(hold_out(chats, args.sft_val_fraction, args.seed)[0])


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The three stages in order, each row printed (and the JSON rewritten) when done."""
    workdir: Path = args.workdir
    base = base_config(args, workdir)
    rows: list[dict[str, Any]] = []

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        print(row_markdown(row), flush=True)
        if args.out is not None:
            report = {"args": {k: str(v) for k, v in vars(args).items()}, "stages": rows}
            args.out.write_text(json.dumps(report, indent=2, default=str))

    print(HEADER, flush=True)
    prompt = prompt_row(run_stage("prompt", prompt_config(base, args), workdir), args.model)
    done(prompt)
    source = prompt["job_id"]
    if "sft" in args.stages:
        chats = training_chats(workdir, source, args)
        steps = sft_steps(args.sft_epochs, chats, args.sft_batch_size)
        stage = run_stage("sft", sft_config(base, args, source, steps), workdir)
        done(training_row("SFT", stage, prompt) | {"train_chats": chats})
    if "rl" in args.stages:
        stage = run_stage("rl", rl_config(base, args, source), workdir)
        done(training_row("RL (GRPO)", stage, prompt))
    return rows


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and data flags every training benchmark takes."""
    add = parser.add_argument
    add("--model", default="local/qwen2.5-coder-0.5b", help="local model to prompt and tune")
    add("--dataset", default="svamp", help="svamp (../shared/datasets) or a built-in task")
    add("--n-train", dest="n_train", type=int, default=50)
    add("--n-val", dest="n_val", type=int, default=20)
    add("--n-test", dest="n_test", type=int, default=100)
    add("--seed", type=int, default=0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_task_arguments(parser)
    add = parser.add_argument
    add("--max-tokens", dest="max_tokens", type=int, default=None, help="svamp reply limit")
    add("--metric-calls", dest="metric_calls", type=int, default=150, help="MIPRO budget")
    add("--prompt-wall-time", dest="prompt_wall_time", type=float, default=None)
    add("--sft-epochs", dest="sft_epochs", type=float, default=3.0)
    add("--sft-batch-size", dest="sft_batch_size", type=int, default=4)
    add("--sft-val-fraction", dest="sft_val_fraction", type=float, default=0.1)
    add("--sft-candidate", dest="sft_candidate", default="all", help='"all", "best" or an id')
    add("--sft-min-score", dest="sft_min_score", type=float, default=1.0, help="rollouts kept")
    add("--sft-splits", dest="sft_splits", default="train", help="train, or train,val")
    add("--rl-steps", dest="rl_steps", type=int, default=20)
    add("--rl-prompts-per-step", dest="rl_prompts_per_step", type=int, default=2)
    add("--rl-generations", dest="rl_generations", type=int, default=4)
    add("--rl-completion-tokens", dest="rl_completion_tokens", type=int, default=160)
    add("--stages", default="sft,rl", help="training stages after the prompt job")
    add("--workdir", type=Path, default=None, help="store, configs, logs (default: a temp dir)")
    add("--out", type=Path, default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def start(args: argparse.Namespace, prefix: str) -> None:
    """A killed benchmark exits cleanly; ``args.workdir`` made (a temp dir by default)."""
    signal.signal(signal.SIGTERM, _exit_on_signal)
    if args.workdir is None:
        import tempfile

        args.workdir = Path(tempfile.mkdtemp(prefix=prefix))
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"workdir: {args.workdir}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start(args, "emery-training-bench-")
    run_all(args)


if __name__ == "__main__":
    main()
