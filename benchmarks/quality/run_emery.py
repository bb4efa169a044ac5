"""One emery algorithm on a built-in task with the in-process local model: a real run.

Prints the seed's and the winner's scores on val and test, the metric calls, LM usage and
wall time, what happened at each step, and the winning component texts.

    .venv/bin/python benchmarks/quality/run_emery.py --algorithm gepa --metric-calls 100
    .venv/bin/python benchmarks/quality/run_emery.py --algorithm mipro --metric-calls 90
    .venv/bin/python benchmarks/quality/run_emery.py --algorithm apo --smoke
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from common import ModelSpec, TaskSpec, markdown_table, run, run_emery

from emery.algorithms import StepRecord

# Bulky event fields left out of the step lines (the --log file keeps everything).
BULKY = ("reply", "front_weights", "prompt")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="gepa")
    parser.add_argument("--settings", default="{}", help="[algorithm.<name>] as JSON")
    parser.add_argument("--task", default="word_problems")
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--n-train", type=int, default=20)
    parser.add_argument("--n-val", type=int, default=12)
    parser.add_argument("--n-test", type=int, default=30)
    parser.add_argument("--metric-calls", type=int, default=100)
    parser.add_argument("--task-max-tokens", type=int, default=256)
    parser.add_argument("--reflection-max-tokens", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache", type=Path, default=None, help="LM response cache file (reruns are free)"
    )
    parser.add_argument("--log", type=Path, default=None, help="write every event here (JSONL)")
    parser.add_argument("--smoke", action="store_true", help="SmolLM2 and a tiny budget")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 3, 2, 2
        args.metric_calls, args.task_max_tokens, args.reflection_max_tokens = 12, 32, 64
    return args


def printer(algorithm: str, log: Path | None) -> Any:
    handle = log.open("w") if log else None

    def show(record: StepRecord) -> None:
        for item in record.events:
            if handle is not None:
                handle.write(json.dumps({"kind": item.kind, **item.data}) + "\n")
                handle.flush()
            if item.kind.startswith(f"{algorithm}."):
                data = {k: v for k, v in item.data.items() if k not in BULKY}
                print(f"  {item.kind:26} {json.dumps(data)[:300]}", flush=True)
        print(
            f"step done: metric calls {record.budget.metric_calls},"
            f" best val {record.state.best_val_score}",
            flush=True,
        )

    return show


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    task = TaskSpec(task=args.task, n_train=args.n_train, n_val=args.n_val, n_test=args.n_test)
    model = ModelSpec(
        model=args.model,
        task_max_tokens=args.task_max_tokens,
        reflection_max_tokens=args.reflection_max_tokens,
        n_threads=args.n_threads,
        cache=args.cache,
    )
    outcome = run(
        run_emery(
            f"emery {args.algorithm}",
            args.algorithm,
            json.loads(args.settings),
            task,
            model,
            metric_calls=args.metric_calls,
            seed=args.seed,
            concurrency=args.concurrency,
            on_step=printer(args.algorithm, args.log),
        )
    )
    report = outcome.report
    print()
    print(markdown_table([report]))
    print(f"\nstopped: {report.stop_reason}")
    for name, text in report.best_components.items():
        print(f"\nwinning {name}:\n{text}")


if __name__ == "__main__":
    main()
