"""One real APO run on the built-in word problems with a local model as task and critic.

Prints the seed's and the winner's scores on val and test, the metric calls and wall time
spent, what happened to each critique and edit, and the winning prompt. Not a timed test:
a measurement of what APO does with a small model.

    .venv/bin/python benchmarks/quality/apo_word_problems.py            # qwen, ~20-40 min
    .venv/bin/python benchmarks/quality/apo_word_problems.py --smoke    # smollm, ~2 min
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
from emery.algorithms.apo import ApoState
from emery.algorithms.context import build_search_context
from emery.config import parse_config
from emery.config.resolve import (
    build_models,
    open_cache,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.core.models import Candidate

SHOWN = ("apo.critique", "apo.edit", "apo.beam_updated", "apo.full_val_scored", "apo.round_cut")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--seed-instruction", default="Answer the question.")
    parser.add_argument("--n-train", type=int, default=20)
    parser.add_argument("--n-val", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=30)
    parser.add_argument("--metric-calls", type=int, default=200)
    parser.add_argument("--task-max-tokens", type=int, default=160)
    parser.add_argument("--beam-width", type=int, default=2)
    parser.add_argument("--branch-factor", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gradient-batch-size", type=int, default=4)
    parser.add_argument("--val-batch-size", type=int, default=10)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (default: all cores)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="LM cache folder (default: new)")
    parser.add_argument("--log", type=Path, default=None, help="write APO's events here (JSON)")
    parser.add_argument("--smoke", action="store_true", help="SmolLM2 and a tiny budget")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 2, 2, 2
        args.metric_calls, args.task_max_tokens = 10, 32
        args.beam_width, args.branch_factor, args.rounds = 1, 1, 1
        args.gradient_batch_size, args.val_batch_size = 2, 2
    return args


def job_config(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    local: dict[str, Any] = {"n_ctx": 4096, "n_threads": args.n_threads}
    return {
        "job": {
            "algorithm": "apo",
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
            "reflection": {"model": args.model, "max_tokens": 400, **local},
        },
        "runtime": {"workdir": str(workdir)},
        "algorithm": {
            "apo": {
                "beam_width": args.beam_width,
                "branch_factor": args.branch_factor,
                "rounds": args.rounds,
                "gradient_batch_size": args.gradient_batch_size,
                "val_batch_size": args.val_batch_size,
                "diversity_temperature": args.temperature,
                "critique_max_tokens": 80 if args.smoke else 300,
                "edit_max_tokens": 80 if args.smoke else 300,
            }
        },
    }


async def run(args: argparse.Namespace, workdir: Path) -> None:
    config = parse_config(job_config(args, workdir))
    dataset = resolve_dataset(config)
    system = resolve_system(config)
    seed = system.seed_candidate()
    seed = Candidate(components={"solve": args.seed_instruction}, demos=seed.demos)
    cache = open_cache(config)
    models = build_models(config, roles=("task", "reflection"), cache=cache)
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
                brief = {k: v for k, v in event.data.items() if k not in ("reply",)}
                print(event.kind, json.dumps(brief)[:700], flush=True)

    started = time.perf_counter()
    try:
        outcome = await run_search(
            build_algorithm("apo", config.algorithm["apo"]), ctx, on_step=keep
        )
        search_s = time.perf_counter() - started
        state = outcome.state
        assert isinstance(state, ApoState)
        best = ctx.candidates[state.best_candidate_id]
        seed_test = await ctx.evaluations.evaluate(seed, dataset.test, "test", charge=False)
        best_test = await ctx.evaluations.evaluate(best, dataset.test, "test", charge=False)
    finally:
        if cache is not None:
            cache.close()
    usage = models.meter.by_role()
    print()
    print(f"model {args.model}; stopped: {outcome.reason}")
    print(f"{'':10} {'val':>6} {'test':>6}")
    print(f"{'seed':10} {state.baseline_val_score or 0:6.3f} {seed_test.mean:6.3f}")
    print(f"{'best':10} {state.best_val_score or 0:6.3f} {best_test.mean:6.3f}")
    print(
        f"metric calls {ctx.budget.usage.metric_calls} (search) + "
        f"{len(dataset.test) * len({seed.id, best.id})} (test); search wall time {search_s:.0f} s; "
        f"total {time.perf_counter() - started:.0f} s"
    )
    print(
        f"critiques {state.critiques}, edits accepted {state.edits_accepted}, "
        f"rejected {state.edits_rejected}, batches skipped {state.expansions_skipped}"
    )
    for role, used in usage.items():
        print(
            f"LM {role}: {used.calls} calls ({used.cache_hits} from the cache),"
            f" {used.prompt_tokens} tokens in, {used.completion_tokens} out"
        )
    print("winning prompt:", json.dumps(best.components["solve"]))
    if args.log is not None:
        events = [e.model_dump(mode="json") for r in records for e in r.events]
        args.log.write_text(json.dumps(events, indent=1))


def main() -> None:
    args = arguments()
    logging.getLogger("emery.evaluation.evaluator").setLevel(logging.ERROR)  # failed rollouts
    if args.workdir is not None:
        asyncio.run(run(args, args.workdir))
        return
    with tempfile.TemporaryDirectory(prefix="apo-bench-") as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
