"""emery MIPRO against DSPy's MIPROv2: same task, model, endpoint, splits and settings.

Starts ``emery proxy`` with the model (one OpenAI-compatible endpoint both sides call as
task and proposer model), installs ``dspy==3.4.1`` and ``optuna`` into
``.bench-venvs/dspy`` if needed, runs emery's MIPRO and DSPy's ``MIPROv2`` one after the
other with the same numbers of candidates, trials, minibatch size, full-evaluation
interval and demos, and prints one markdown table: test and val accuracy, metric calls,
LM calls and tokens by role, wall time.

Budget: DSPy's MIPROv2 takes no metric-call limit, so emery gets DSPy's own plan
(minibatches + full evaluations) plus one bootstrapping pass over train as its limit, and
both sides' actual metric calls are counted. emery's row is scored on test by emery's
evaluator (instructions and demos); DSPy's winner runs through DSPy's adapters, so its
test score is measured by DSPy with the same metric (the job's verifier on its answer
field); its instruction and demos are also scored in emery's prompt format (the
"transplanted" row).

    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py                 # qwen, ~2-3 h
    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py --smoke         # smollm, minutes
    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py \\
        --config benchmarks/quality/real/clinc.toml --skip-emery --dspy-module predict

With ``--config`` the task is a real job config's (``common.ConfigTask``): its rows, seed
(placeholders filled), verifier and ``[references.NAME]`` (scored with the transplanted
winner). MIPROv2 has no metric-call or time limit: its plan is set with the flags, and
its metric calls and wall time are counted.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ModelSpec,
    RoleStats,
    RowReport,
    Server,
    Task,
    comparison_parser,
    ensure_venv,
    peer_spec,
    print_report,
    run,
    run_emery,
    run_peer,
    task_from,
    test_scores,
    transplant,
    with_tests,
)

from emery.core.models import Candidate, Demo
from emery.evaluation.stats import summarize
from emery.systems.formats import labeled_replies

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
    parser.add_argument(
        "--dspy-max-tokens",
        type=int,
        default=None,
        help="DSPy's task reply cap (its field markers cost tokens); default: the stage's",
    )
    parser.add_argument("--skip-peer", action="store_true", help="only the emery row")
    parser.add_argument("--skip-emery", action="store_true", help="only DSPy's rows")
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
    return int(args.minibatch_size * args.num_trials + args.n_val * full_evals + args.n_train)


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


def transplanted(task: Task, found: dict[str, Any], spec: dict[str, Any]) -> tuple[Demo, ...]:
    """DSPy's demos as emery demos: the train example's own fields (looked up by the input
    DSPy saw), reasoning (if any), then the answer as the stage's parser reads it (a labeled
    demo's reply form)."""
    stage = task.system().config.stages[0]
    field = spec["input_field"]
    fields_of = {row["input"][field]: row["fields"] for row in spec["train"]}
    demos = []
    for demo in found["demos"]:
        if demo.get(field) not in fields_of or "answer" not in demo:
            continue
        reply = labeled_replies(stage, demo["answer"])
        output = f"{demo.get('reasoning', '').strip()}\n{reply[0] if reply else ''}".strip()
        demos.append(Demo(inputs=fields_of[demo[field]], output=output))
    return tuple(demos)


def peer_rows(
    args: argparse.Namespace, task: Task, model: ModelSpec, workdir: Path
) -> list[RowReport]:
    """DSPy's row scored by DSPy, and its winner transplanted into emery's prompt format and
    scored by emery's evaluator (with the seed and references, on the same endpoint)."""
    row, best, found = dspy_winner(args, task, model, workdir)
    dspy_tests = {k: summarize(found[f"{k}_test_dspy"]) for k in ("seed", "best")}
    emery_tests = run(test_scores(task, model, best, args.concurrency))
    emery_row = row.model_copy(update={"name": f"{row.name}, transplanted, scored by emery"})
    scored_by_dspy = row.model_copy(update={"name": f"{row.name}, scored by DSPy"})
    return [with_tests(scored_by_dspy, dspy_tests), with_tests(emery_row, emery_tests)]


def dspy_winner(
    args: argparse.Namespace, task: Task, model: ModelSpec, workdir: Path
) -> tuple[RowReport, Candidate, dict[str, Any]]:
    """DSPy's run (``args``: its plan, module, caps, seed, concurrency), its winner
    transplanted into an emery candidate (not yet scored on test), and the peer's result
    (``seed_test_dspy``/``best_test_dspy``: its own per-example test scores)."""
    python = ensure_venv("dspy", ["dspy==3.4.1", "optuna==5.0.0"])
    spec = peer_spec(task, model, workdir)
    spec.update(
        num_candidates=args.num_candidates,
        num_trials=args.num_trials,
        minibatch_size=args.minibatch_size,
        full_eval_every=args.full_eval_every,
        max_demos=args.max_demos,
        module=args.dspy_module,
        threads=args.concurrency,
        seed=args.seed,
        task_max_tokens=args.dspy_max_tokens or spec["task_max_tokens"],
        proposer_max_tokens=args.proposer_max_tokens,
    )
    found = run_peer(python, PEER, spec, timeout_s=8 * 3600)
    component = spec["component"]
    demos = transplanted(task, found, spec)
    best = transplant(task, {component: found["instruction"]}, {component: demos})
    name = f"dspy 3.4.1 MIPROv2 ({args.dspy_module})"
    row = RowReport(
        name=name,
        baseline_val=found["baseline_val"],
        best_val=found["best_val"],
        metric_calls=found["metric_calls"],
        lm={role: RoleStats(**stats) for role, stats in found["lm"].items()},
        wall_time_s=found["wall_time_s"],
        stop_reason=found["error"] or "num_trials",
        best_components={component: found["instruction"]},
        extra={"demos": len(found["demos"])},
    )
    return row, best, found


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    task = task_from(args)
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
        if not args.skip_emery:
            emery_run = run(
                run_emery(
                    "emery mipro",
                    "mipro",
                    emery_settings(args),
                    task,
                    model,
                    metric_calls=budget,
                    wall_time_s=args.wall_time,
                    seed=args.seed,
                    concurrency=args.concurrency,
                )
            )
            best = emery_run.candidates[emery_run.records[-1].state.best_candidate_id]
            emery_run.report.extra["demos"] = sum(len(d) for d in best.demos.values())
            rows.append(emery_run.report)
        if not args.skip_peer:
            rows.extend(peer_rows(args, task, model, workdir))
    print_report(
        args,
        rows,
        f"as task and proposer model behind one endpoint; {args.num_candidates} candidates,"
        f" {args.num_trials} trials, minibatch {args.minibatch_size}, full val every"
        f" {args.full_eval_every}; emery budget {budget} metric calls;"
        f" total {(time.perf_counter() - started) / 60:.1f} min",
        workdir,
    )


if __name__ == "__main__":
    main()
