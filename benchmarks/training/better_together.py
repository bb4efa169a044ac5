"""Prompt, then weights, then prompt again ("better together", issue 35): does a prompt
search on the tuned model beat the prompt alone and the weights alone?

Three stages on one task, each one `emery train CONFIG --json` in a subprocess (as a user
would run them), all sharing one store under --workdir:

1. **prompt search** on the base model (`--algorithm`, `--metric-calls`): its best prompt
   and the seed are scored on test by the job itself.
2. **weights** on that prompt: an SFT job (`--weights sft`, default) whose `source_job` is
   stage 1, trained on stage 1's successful rollouts of its best candidate
   (`--sft-candidate best`), with `--sft-samples N` also on the verified replies of that
   prompt run N times per example of `--sft-splits` (rejection sampling, at
   `--sft-sample-temperature`, by `--sft-teacher` or the task model), or an RL job
   (`--weights rl`, GRPO from that prompt); the job scores stage 1's best prompt on test
   with the base and the tuned model (`local/<model>+<job id>`).
3. **prompt search on the tuned model**: a prompt job whose task model is stage 2's tuned
   model and whose `[job] warm_start` is stage 1 (its best candidates are rescored on val
   first), with the same algorithm and budget; the proposer and reflection models stay
   the base model.

Every stage uses the same data file or built-in task, split sizes and seed, so every row is
scored on the same test examples. Prints one markdown table: each row's test accuracy
(mean, Wilson 95% interval, n), the difference from stage 1, the metric calls its search
spent (test scoring is outside the budget) and its wall time.

    nice -n 10 .venv/bin/python benchmarks/training/better_together.py \\
        --model local/smollm2-135m --dataset word_problems --threads 1 --workdir W

A stage that succeeded in --workdir before (``<stage>.stage.json``) is taken from there,
so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

from configs import base_config, rl_config, sft_config, sft_steps
from run import add_task_arguments, run_stage, start, training_chats

from emery.core.errors import ConfigError
from emery.evaluation.stats import ScoreSummary

HEADER = (
    "| stage | model | prompt | test accuracy (mean, 95% CI, n) | vs stage 1 | metric calls"
    " | wall s |\n|---|---|---|---|---|---|---|"
)


def search_config(
    base: dict[str, Any], args: argparse.Namespace, name: str, warm_start: str | None = None
) -> dict[str, Any]:
    """A prompt search of ``--algorithm`` with ``--metric-calls`` (and ``--search-wall-time``)."""
    data = copy.deepcopy(base)
    budget: dict[str, Any] = {"metric_calls": args.metric_calls}
    if args.search_wall_time is not None:
        budget["wall_time_s"] = args.search_wall_time
    data["job"] |= {"name": name, "algorithm": args.algorithm, "budget": budget}
    if warm_start is not None:
        data["job"]["warm_start"] = warm_start
    return data


def with_threads(base: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``base`` with ``--threads`` llama.cpp threads for every model role and, for a
    built-in task, ``--max-tokens`` per task model reply (``[lm.task] max_tokens``; SVAMP's
    stages take it in ``base_config``)."""
    for settings in base["lm"].values():
        if args.threads is not None:
            settings["n_threads"] = args.threads
    if args.max_tokens is not None and args.dataset != "svamp":
        base["lm"]["task"]["max_tokens"] = args.max_tokens
    return base


def on_tuned_model(base: dict[str, Any], tuned: str) -> dict[str, Any]:
    """``base`` with ``tuned`` as the task model (the search's own models unchanged)."""
    data = copy.deepcopy(base)
    data["lm"]["task"]["model"] = tuned
    return data


def _summary(value: dict[str, Any] | None) -> ScoreSummary | None:
    return None if not value else ScoreSummary.model_validate(value)


def search_rows(
    stage: dict[str, Any], label: str, model: str, *, seed_label: str | None
) -> list[dict[str, Any]]:
    """A prompt job's rows: its seed on test (when ``seed_label``) and its best."""
    payload = stage["payload"]
    result = payload["result"]
    calls = (result.get("budget") or {}).get("metric_calls")
    rows = []
    if seed_label is not None:
        rows.append(
            {
                "stage": seed_label,
                "model": model,
                "prompt": "seed",
                "test": result.get("baseline_test"),
                "metric_calls": None,
                "wall_s": None,
                "scored_in": label.split(" ", 1)[0],
                "job_id": payload["job_id"],
            }
        )
    best = (result.get("best_candidate") or {}).get("id")
    rows.append(
        {
            "stage": label,
            "model": model,
            "prompt": f"its best ({(best or '?')[:8]})",
            "test": result.get("best_test"),
            "metric_calls": calls,
            "wall_s": stage["wall_s"],
            "job_id": payload["job_id"],
            "candidate_id": best,
        }
    )
    return rows


def weights_row(stage: dict[str, Any], label: str, chats: int | None) -> dict[str, Any]:
    """The SFT or RL job's row: stage 1's best prompt on the tuned model (the job's own
    scoring), with its score of the same prompt on the base model beside it."""
    payload = stage["payload"]
    result = payload["result"]
    lift = result.get("test") or {}
    training = result.get("training") or {}
    return {
        "stage": label,
        "model": result["model"].removeprefix("local/"),
        "prompt": f"stage 1's best ({(lift.get('candidate_id') or '?')[:8]})",
        "test": lift.get("tuned"),
        "base_in_job": lift.get("base"),
        "metric_calls": 0,
        "wall_s": stage["wall_s"],
        "job_id": payload["job_id"],
        "tuned_model": result["model"],
        "training": training,
        "train_chats": chats,
    }


def sampling_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``[sft]`` rejection-sampling keys the flags set (none without --sft-samples)."""
    if not args.sft_samples:
        return {}
    settings: dict[str, Any] = {
        "samples_per_example": args.sft_samples,
        "sample_temperature": args.sft_sample_temperature,
    }
    if args.sft_teacher is not None:
        settings["teacher"] = args.sft_teacher
    return settings


def sft_plan(workdir: Path, source: str, args: argparse.Namespace) -> tuple[int | None, int]:
    """(the chats SFT will train on, if known before it runs; its optimizer steps):
    --sft-epochs over the stored chats, or with --sft-samples over the most chats the
    sampling can add (every sample kept); --sft-steps sets the steps."""
    if not args.sft_samples:
        try:
            chats = training_chats(workdir, source, args)
        except ConfigError as exc:
            raise SystemExit(f"error: stage 2 has no chats to train on: {exc}") from None
        return chats, args.sft_steps or sft_steps(args.sft_epochs, chats, args.sft_batch_size)
    splits = args.sft_splits.split(",")
    sizes = {"train": args.n_train, "val": args.n_val}
    most = args.sft_samples * sum(sizes[split] for split in splits)
    bound = int(most * (1 - args.sft_val_fraction))
    return None, args.sft_steps or sft_steps(args.sft_epochs, bound, args.sft_batch_size)


def sft_row(stage: dict[str, Any], steps: int, chats: int | None) -> dict[str, Any]:
    """The SFT job's row, labelled with its data (what its sampling kept, if it sampled)."""
    training = stage["payload"]["result"].get("training") or {}
    trained = training.get("train_examples", chats)
    sampled = training.get("sampled")
    if sampled is None:
        return weights_row(stage, f"2 SFT ({steps} steps, {trained} chats)", trained)
    teacher = sampled["model"].removeprefix("local/")
    label = (
        f"2 SFT ({steps} steps, {trained} chats: {sampled['kept']} sampled by {teacher},"
        f" {sampled['samples_per_example']}x at T={sampled['temperature']:g}, from"
        f" {sampled['examples_kept']} of {sampled['examples']} examples,"
        f" + {sampled['stored']} stored)"
    )
    return weights_row(stage, label, trained)


def row_markdown(row: dict[str, Any], first: ScoreSummary | None) -> str:
    """One table row; ``first`` is stage 1's best on test."""
    test = _summary(row["test"])
    diff = "—"
    if test is not None and first is not None and row["stage"] != "1 prompt search":
        diff = f"{(test.mean - first.mean) * 100:+.1f} points"
    calls = "—" if row["metric_calls"] is None else str(row["metric_calls"])
    wall = f"(in stage {row['scored_in']})" if row["wall_s"] is None else f"{row['wall_s']:.0f}"
    return (
        f"| {row['stage']} | {row['model']} | {row['prompt']} | {test or '—'} | {diff} |"
        f" {calls} | {wall} |"
    )


def verdict(rows: list[dict[str, Any]]) -> str:
    """Whether stage 3 beat stages 1 and 2, and whether the intervals separate them."""
    by_stage = {row["stage"]: _summary(row["test"]) for row in rows}
    first, second, third = (
        by_stage.get("1 prompt search"),
        next((v for k, v in by_stage.items() if k.startswith("2 ")), None),
        by_stage.get("3 prompt search, tuned model"),
    )
    if first is None or second is None or third is None:
        return "better together: not measured (a stage did not finish)"
    parts = []
    for name, other in (("stage 1 (prompt alone)", first), ("stage 2 (weights)", second)):
        gap = (third.mean - other.mean) * 100
        apart = third.low > other.high or third.high < other.low
        parts.append(
            f"{gap:+.1f} points vs {name} ({'intervals apart' if apart else 'intervals overlap'})"
        )
    held = third.mean > max(first.mean, second.mean)
    return f"better together: stage 3 {'; '.join(parts)}: {'held' if held else 'did not hold'}"


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The three stages in order; the table is printed (and --out written) as each ends."""
    workdir: Path = args.workdir
    base = with_threads(base_config(args, workdir), args)
    model = args.model.removeprefix("local/")
    rows: list[dict[str, Any]] = []
    print(HEADER, flush=True)

    def done(*new: dict[str, Any]) -> None:
        rows.extend(new)
        first = next((_summary(r["test"]) for r in rows if r["stage"] == "1 prompt search"), None)
        for row in new:
            print(row_markdown(row, first), flush=True)
        if args.out is not None:
            report = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}
            args.out.write_text(json.dumps(report, indent=2, default=str))

    stage1 = run_stage("stage1", search_config(base, args, "better-together-1"), workdir)
    done(*search_rows(stage1, "1 prompt search", model, seed_label="0 seed"))
    source = stage1["payload"]["job_id"]
    if args.weights == "sft":
        chats, steps = sft_plan(workdir, source, args)
        config = sft_config(base, args, source, steps)
        config["job"]["name"] = "better-together-2"
        if args.train_threads is not None:
            config["sft"]["threads"] = args.train_threads
        config["sft"] |= sampling_settings(args)
        stage2 = run_stage("stage2-sft", config, workdir)
        weights = sft_row(stage2, steps, chats)
    else:
        config = rl_config(base, args, source)
        config["job"]["name"] = "better-together-2"
        if args.train_threads is not None:
            config["rl"]["threads"] = args.train_threads
        stage2 = run_stage("stage2-rl", config, workdir)
        weights = weights_row(stage2, f"2 RL (GRPO, {args.rl_steps} steps)", None)
    done(weights)
    tuned = weights["tuned_model"]
    stage3_config = search_config(
        on_tuned_model(base, tuned), args, "better-together-3", warm_start=source
    )
    stage3 = run_stage("stage3", stage3_config, workdir)
    tuned_name = tuned.removeprefix("local/")
    seed_row, best_row = search_rows(
        stage3, "3 prompt search, tuned model", tuned_name, seed_label="0b seed, tuned model"
    )
    done(best_row, seed_row)
    base_in_job = _summary(weights["base_in_job"])
    print(
        f"\nstage 1's best prompt on the base model, re-scored by the {args.weights} job:"
        f" {base_in_job or '—'}",
        flush=True,
    )
    print(verdict(rows), flush=True)
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_task_arguments(parser)
    add = parser.add_argument
    add("--max-tokens", dest="max_tokens", type=int, default=None, help="reply limit")
    add("--threads", type=int, default=None, help="llama.cpp threads of every model")
    add("--train-threads", dest="train_threads", type=int, default=None, help="torch threads")
    add("--algorithm", default="mipro", help="the prompt search of stages 1 and 3")
    add("--metric-calls", dest="metric_calls", type=int, default=150, help="per search")
    add("--search-wall-time", dest="search_wall_time", type=float, default=None)
    add("--weights", choices=("sft", "rl"), default="sft", help="stage 2's training")
    add("--sft-epochs", dest="sft_epochs", type=float, default=3.0)
    add("--sft-batch-size", dest="sft_batch_size", type=int, default=4)
    add("--sft-val-fraction", dest="sft_val_fraction", type=float, default=0.1)
    add("--sft-candidate", dest="sft_candidate", default="best", help='"best", "all" or an id')
    add("--sft-min-score", dest="sft_min_score", type=float, default=1.0, help="rollouts kept")
    add("--sft-splits", dest="sft_splits", default="train,val", help="train, or train,val")
    add("--sft-steps", dest="sft_steps", type=int, default=None, help="SFT steps (else epochs)")
    add("--sft-samples", dest="sft_samples", type=int, default=0, help="samples per example")
    add("--sft-sample-temperature", dest="sft_sample_temperature", type=float, default=0.7)
    add("--sft-teacher", dest="sft_teacher", default=None, help="model that samples (task)")
    add("--rl-steps", dest="rl_steps", type=int, default=20)
    add("--rl-prompts-per-step", dest="rl_prompts_per_step", type=int, default=2)
    add("--rl-generations", dest="rl_generations", type=int, default=4)
    add("--rl-completion-tokens", dest="rl_completion_tokens", type=int, default=160)
    add("--workdir", type=Path, default=None, help="store, configs, logs (default: a temp dir)")
    add("--out", type=Path, default=None, help="write the rows as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start(args, "emery-better-together-")
    run_all(args)


if __name__ == "__main__":
    main()
