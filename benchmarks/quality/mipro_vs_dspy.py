"""emery MIPRO against DSPy's MIPROv2: same task, model, endpoint, splits and settings.

Starts ``emery serve`` with the model (one OpenAI-compatible endpoint both sides call as
task and proposer model), installs ``dspy==3.4.1`` and ``optuna`` into
``.bench-venvs/dspy`` if needed, runs emery's MIPRO and DSPy's ``MIPROv2`` one after the
other with the same numbers of candidates, trials, minibatch size, full-evaluation
interval and demos, and prints one markdown table: test and val accuracy, metric calls,
LM calls and tokens by role, wall time.

Budget: DSPy's MIPROv2 takes no metric-call limit, so emery gets DSPy's own plan
(minibatches + full evaluations) plus one bootstrapping pass over train as its limit, and
both sides' actual metric calls are counted. emery's row is scored on test by emery's
evaluator (instructions and demos); DSPy's winner runs through DSPy's adapters, so its
test score is measured by DSPy with the same numeric metric; its instruction and demos are
also scored in emery's prompt format (the "transplanted" line).

    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py                 # qwen, ~2-3 h
    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py --smoke         # smollm, minutes
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    ModelSpec,
    RoleStats,
    RowReport,
    Server,
    TaskSpec,
    comparison_parser,
    ensure_venv,
    markdown_table,
    peer_examples,
    run,
    run_emery,
    run_peer,
    score,
)

from emery.core.models import Demo
from emery.lm import UsageMeter

PEER = Path(__file__).resolve().parent / "peers" / "dspy_mipro.py"


def arguments() -> argparse.Namespace:
    parser = comparison_parser(__doc__.splitlines()[0], port=8432)
    parser.add_argument("--num-candidates", type=int, default=6)
    parser.add_argument("--num-trials", type=int, default=10)
    parser.add_argument("--minibatch-size", type=int, default=8)
    parser.add_argument("--full-eval-every", type=int, default=5)
    parser.add_argument("--max-demos", type=int, default=3)
    parser.add_argument("--proposer-max-tokens", type=int, default=300)
    parser.add_argument("--dspy-module", choices=["cot", "predict"], default="cot")
    parser.add_argument("--skip-peer", action="store_true", help="only the emery row")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 4, 3, 3
        args.num_candidates, args.num_trials, args.minibatch_size = 3, 2, 2
        args.full_eval_every, args.max_demos = 2, 1
        args.task_max_tokens, args.proposer_max_tokens = 48, 64
    return args


def matched_budget(args: argparse.Namespace) -> int:
    """DSPy's planned search calls plus one bootstrapping pass over train."""
    full_evals = args.num_trials // args.full_eval_every + 1
    return args.minibatch_size * args.num_trials + args.n_val * full_evals + args.n_train


def emery_settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "num_instructions": args.num_candidates,
        "num_demo_sets": args.num_candidates,
        "num_trials": args.num_trials,
        "minibatch_size": args.minibatch_size,
        "full_eval_every": args.full_eval_every,
        "max_bootstrapped_demos": args.max_demos,
        "max_labeled_demos": args.max_demos,
        "proposer_max_tokens": args.proposer_max_tokens,
    }


def transplanted(found: dict[str, Any]) -> tuple[Demo, ...]:
    """DSPy's demos as emery demos: reasoning (if any) then the line the parser reads."""
    demos = []
    for demo in found["demos"]:
        if "question" not in demo or "answer" not in demo:
            continue
        reasoning = demo.get("reasoning", "").strip()
        output = f"{reasoning}\nAnswer: {demo['answer']}".strip()
        demos.append(Demo(inputs={"question": demo["question"]}, output=output))
    return tuple(demos)


def peer_row(
    args: argparse.Namespace, task: TaskSpec, model: ModelSpec, workdir: Path
) -> RowReport:
    python = ensure_venv("dspy", ["dspy==3.4.1", "optuna==5.0.0"])
    dataset = task.dataset()
    system = task.system()
    stage = system.config.stages[0]
    spec = {
        "workdir": str(workdir),
        "base_url": model.base_url,
        "seed_instruction": stage.instruction,
        "input_field": "question",
        "train": peer_examples(dataset, "train"),
        "val": peer_examples(dataset, "val"),
        "test": peer_examples(dataset, "test"),
        "num_candidates": args.num_candidates,
        "num_trials": args.num_trials,
        "minibatch_size": args.minibatch_size,
        "full_eval_every": args.full_eval_every,
        "max_demos": args.max_demos,
        "module": args.dspy_module,
        "threads": args.concurrency,
        "seed": args.seed,
        "task_max_tokens": args.task_max_tokens,
        "proposer_max_tokens": args.proposer_max_tokens,
    }
    found = run_peer(python, PEER, spec, timeout_s=8 * 3600)
    test_lm = model.lms(UsageMeter(), ("task",))["task"]
    demos = transplanted(found)
    emery_format = run(
        score(
            system,
            task.verifier(),
            test_lm,
            {stage.name: found["instruction"]},
            dataset,
            "test",
            args.concurrency,
            {stage.name: demos},
        )
    )
    return RowReport(
        name=f"dspy 3.4.1 MIPROv2 ({args.dspy_module})",
        baseline_val=found["baseline_val"],
        best_val=found["best_val"],
        baseline_test=found["seed_test_dspy"],
        best_test=found["best_test_dspy"],
        metric_calls=found["metric_calls"],
        lm={role: RoleStats(**stats) for role, stats in found["lm"].items()},
        wall_time_s=found["wall_time_s"],
        stop_reason=found["error"] or "num_trials",
        best_components={stage.name: found["instruction"]},
        extra={"demos": len(found["demos"]), "test_in_emery_format": emery_format},
    )


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    task = TaskSpec(n_train=args.n_train, n_val=args.n_val, n_test=args.n_test)
    workdir = Path(tempfile.mkdtemp(prefix="mipro-bench-"))
    budget = matched_budget(args)
    rows: list[RowReport] = []
    started = time.perf_counter()
    with Server(args.model, args.port, workdir / "server.log") as server:
        model = ModelSpec(
            model=args.model,
            base_url=server.base_url,
            task_max_tokens=args.task_max_tokens,
            reflection_max_tokens=args.proposer_max_tokens,
        )
        emery_run = run(
            run_emery(
                "emery mipro",
                "mipro",
                emery_settings(args),
                task,
                model,
                metric_calls=budget,
                seed=args.seed,
                concurrency=args.concurrency,
            )
        )
        best_id = emery_run.records[-1].state.best_candidate_id
        emery_run.report.extra["demos"] = len(emery_run.candidates[best_id].demos.get("solve", ()))
        rows.append(emery_run.report)
        if not args.skip_peer:
            rows.append(peer_row(args, task, model, workdir))
    print(
        f"\nword_problems, {args.model} as task and proposer model behind one endpoint;"
        f" train/val/test {args.n_train}/{args.n_val}/{args.n_test};"
        f" {args.num_candidates} candidates, {args.num_trials} trials, minibatch"
        f" {args.minibatch_size}, full val every {args.full_eval_every};"
        f" emery budget {budget} metric calls;"
        f" total {(time.perf_counter() - started) / 60:.1f} min\n"
    )
    print(markdown_table(rows))
    for row in rows:
        print(f"\n{row.name}: stopped: {row.stop_reason}; demos in the winner: {row.extra}")
        for name, text in row.best_components.items():
            print(f"{row.name} — winning {name}:\n{text}")
    if args.output is not None:
        args.output.write_text(json.dumps([row.model_dump() for row in rows], indent=2))
    print(f"\n(work files in {workdir}; the repository is {ROOT})")


if __name__ == "__main__":
    main()
