"""One real MIPRO run on the built-in word problems with a local model as task and proposer.

Prints the plan, the seed's and the winner's scores on val and test, metric calls, LM
calls and tokens, wall time, the demo sets and instructions MIPRO built, every trial, and
the winning program. Not a timed test: a measurement of what MIPRO does with a small model.

    .venv/bin/python benchmarks/quality/mipro_word_problems.py            # qwen, ~20-40 min
    .venv/bin/python benchmarks/quality/mipro_word_problems.py --smoke    # smollm, ~2 min
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import MiproState
from emery.config import parse_config
from emery.config.resolve import (
    build_models,
    open_cache,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.core.models import Candidate

SHOWN = ("mipro.plan", "mipro.demos_bootstrapped", "mipro.trial", "mipro.full_evaluation")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--seed-instruction", default="Answer the question.")
    parser.add_argument("--n-train", type=int, default=16)
    parser.add_argument("--n-val", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=20)
    parser.add_argument("--metric-calls", type=int, default=130)
    parser.add_argument("--task-max-tokens", type=int, default=200)
    parser.add_argument("--preset", default="light")
    parser.add_argument("--num-instructions", type=int, default=4)
    parser.add_argument("--num-demo-sets", type=int, default=4)
    parser.add_argument("--num-trials", type=int, default=8)
    parser.add_argument("--minibatch-size", type=int, default=8)
    parser.add_argument("--full-eval-every", type=int, default=4)
    parser.add_argument("--max-demos", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (1 is faster on a busy CPU)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="LM cache folder (default: new)")
    parser.add_argument("--log", type=Path, default=None, help="write MIPRO's events here (JSON)")
    parser.add_argument("--smoke", action="store_true", help="SmolLM2 and a tiny budget")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 4, 3, 2
        args.metric_calls, args.task_max_tokens = 24, 32
        args.num_instructions, args.num_demo_sets, args.num_trials = 2, 3, 2
        args.minibatch_size, args.full_eval_every, args.max_demos = 2, 2, 1
    return args


def algorithm_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "preset": args.preset,
        "num_instructions": args.num_instructions,
        "num_demo_sets": args.num_demo_sets,
        "num_trials": args.num_trials,
        "minibatch_size": args.minibatch_size,
        "full_eval_every": args.full_eval_every,
        "max_bootstrapped_demos": args.max_demos,
        "max_labeled_demos": args.max_demos,
        "summary_batches": 1,
        "summary_batch_size": 6,
        "proposer_max_tokens": 48 if args.smoke else 160,
    }


def job_config(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    local = {"n_ctx": 4096, **({"n_threads": args.n_threads} if args.n_threads else {})}
    return {
        "job": {
            "algorithm": "mipro",
            "seed": args.seed,
            "budget": {"metric_calls": args.metric_calls},
        },
        "dataset": {
            "task": "word_problems",
            "n_train": args.n_train,
            "n_val": args.n_val,
            "n_test": args.n_test,
        },
        "lm": {
            "task": {"model": args.model, "max_tokens": args.task_max_tokens, **local},
            "proposer": {"model": args.model, "max_tokens": 300, **local},
        },
        "runtime": {"workdir": str(workdir)},
        "algorithm": {"mipro": algorithm_settings(args)},
    }


def brief(data: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in data.items() if k != "summary"})[:300]


async def run(args: argparse.Namespace, workdir: Path) -> None:
    config = parse_config(job_config(args, workdir))
    dataset = resolve_dataset(config)
    system = resolve_system(config)
    seed = Candidate(components={"solve": args.seed_instruction})
    cache = open_cache(config)
    models = build_models(config, roles=("task", "proposer"), cache=cache)
    ctx = build_search_context(
        system=system,
        dataset=dataset,
        verifier=resolve_verifier(config, dataset),
        lms=models.by_role,
        budget=config.job.budget,
        meter=models.meter,
        seed=config.job.seed,
        seed_candidate=seed,
        concurrency=4,
    )
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)
        for event in record.events:
            if event.kind in SHOWN:
                print(event.kind, brief(event.data), flush=True)

    started = time.perf_counter()
    try:
        outcome = await run_search(
            build_algorithm("mipro", config.algorithm["mipro"]), ctx, on_step=keep
        )
        search_s = time.perf_counter() - started
        search_usage = models.meter.by_role()
        state = outcome.state
        assert isinstance(state, MiproState)
        best = ctx.candidates[state.best_candidate_id]
        seed_test = await ctx.evaluations.evaluate(seed, dataset.test, "test", charge=False)
        best_test = await ctx.evaluations.evaluate(best, dataset.test, "test", charge=False)
    finally:
        if cache is not None:
            cache.close()
    print()
    print(f"model {args.model}; stopped: {outcome.reason}")
    print(f"{'':10} {'val':>6} {'test':>6}")
    print(f"{'seed':10} {state.baseline_val_score or 0:6.3f} {seed_test.mean:6.3f}")
    print(f"{'best':10} {state.best_val_score or 0:6.3f} {best_test.mean:6.3f}")
    print(
        f"metric calls {ctx.budget.usage.metric_calls} (search) + "
        f"{2 * len(dataset.test)} (test); search wall time {search_s:.0f} s; "
        f"total {time.perf_counter() - started:.0f} s"
    )
    for role, used in search_usage.items():
        print(
            f"LM {role} (search): {used.calls} calls, {used.prompt_tokens} in, "
            f"{used.completion_tokens} out"
        )
    print(f"bootstrap: {state.bootstrap_passed} of {state.bootstrap_runs} teacher runs passed")
    for stage, sets in state.demo_sets.items():
        print(f"demo sets {stage}: {[(s.kind, len(s.demos)) for s in sets]}")
    for stage, choices in state.instructions.items():
        for index, choice in enumerate(choices):
            print(f"instruction {stage}[{index}] ({choice.source}): {json.dumps(choice.text)}")
    print(f"proposals rejected: {[(r.reason, r.text[:60]) for r in state.rejected]}")
    for trial in state.trials:
        params = " ".join(f"{k}={v}" for k, v in trial.params.items())
        print(f"trial {trial.number:2d} {trial.kind:9} {params} {trial.score:.3f} n={trial.n}")
    print("winning instruction:", json.dumps(best.components["solve"]))
    for demo in best.demos.get("solve", ()):
        print(f"winning demo ({demo.source}): {json.dumps(demo.output)[:200]}")
    if args.log is not None:
        events = [e.model_dump(mode="json") for r in records for e in r.events]
        args.log.write_text(json.dumps(events, indent=1))


def main() -> None:
    args = arguments()
    logging.getLogger("emery.evaluation.evaluator").setLevel(logging.ERROR)  # failed rollouts
    if args.workdir is not None:
        asyncio.run(run(args, args.workdir))
        return
    with tempfile.TemporaryDirectory(prefix="mipro-bench-") as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
