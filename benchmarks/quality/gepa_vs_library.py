"""emery GEPA against the ``gepa`` library: same task, model, endpoint, splits and budget.

Starts ``emery serve`` with the model (an OpenAI-compatible endpoint both sides call),
installs ``gepa==0.1.4`` into ``.bench-venvs/gepa`` if needed, runs emery's GEPA and the
library's ``gepa.optimize`` one after the other with the same metric-call budget, scores
both winners (and the seed) on the same test split with emery's evaluator through the same
endpoint, and prints one markdown table: test and val accuracy, metric calls, LM calls and
tokens by role, wall time.

    .venv/bin/python benchmarks/quality/gepa_vs_library.py                 # qwen, ~1-2 h
    .venv/bin/python benchmarks/quality/gepa_vs_library.py --smoke         # smollm, minutes

Both sides use GEPA's paper defaults (Pareto selection, minibatches of 3, merge on);
emery's reflection style is set with ``--emery-settings`` (default: compact, emery's
choice for small local models).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

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

from emery.data.tasks.word_problems import ANSWER_PATTERN
from emery.lm import UsageMeter

PEER = Path(__file__).resolve().parent / "peers" / "gepa_library.py"


def arguments() -> argparse.Namespace:
    parser = comparison_parser(__doc__.splitlines()[0], port=8431)
    parser.add_argument("--metric-calls", type=int, default=150)
    parser.add_argument("--reflection-max-tokens", type=int, default=400)
    parser.add_argument(
        "--emery-settings",
        default='{"reflection_style": "compact"}',
        help="[algorithm.gepa] for the emery row, as JSON",
    )
    parser.add_argument("--skip-peer", action="store_true", help="only the emery row")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 3, 3, 3
        args.metric_calls, args.task_max_tokens, args.reflection_max_tokens = 12, 32, 64
    return args


def peer_row(
    args: argparse.Namespace, task: TaskSpec, model: ModelSpec, workdir: Path
) -> RowReport:
    """The library's run, its winner scored on test by emery's evaluator."""
    python = ensure_venv("gepa", ["gepa==0.1.4"])
    dataset = task.dataset()
    system = task.system()
    stage = system.config.stages[0]
    spec = {
        "workdir": str(workdir),
        "base_url": model.base_url,
        "model": model.model,
        "component": stage.name,
        "seed_instruction": stage.instruction,
        "input_field": "question",
        "pattern": ANSWER_PATTERN,
        "train": peer_examples(dataset, "train"),
        "val": peer_examples(dataset, "val"),
        "metric_calls": args.metric_calls,
        "minibatch_size": 3,
        "use_merge": True,
        "seed": args.seed,
        "task_max_tokens": args.task_max_tokens,
        "reflection_max_tokens": args.reflection_max_tokens,
    }
    found = run_peer(python, PEER, spec, timeout_s=6 * 3600)
    test_lm = model.lms(UsageMeter(), ("task",))["task"]
    verifier = task.verifier()

    async def scored(components: dict[str, str]) -> float:
        return await score(system, verifier, test_lm, components, dataset, "test", args.concurrency)

    return RowReport(
        name="gepa 0.1.4 (library)",
        baseline_val=found["baseline_val"],
        best_val=found["best_val"],
        baseline_test=run(scored(system.seed_candidate().components)),
        best_test=run(scored(found["best_components"])),
        metric_calls=found["metric_calls"] or 0,
        lm={role: RoleStats(**stats) for role, stats in found["lm"].items()},
        wall_time_s=found["wall_time_s"],
        stop_reason="max_metric_calls",
        best_components=found["best_components"],
        extra={"candidates": found["candidates"]},
    )


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    task = TaskSpec(n_train=args.n_train, n_val=args.n_val, n_test=args.n_test)
    workdir = Path(tempfile.mkdtemp(prefix="gepa-bench-"))
    rows: list[RowReport] = []
    started = time.perf_counter()
    with Server(args.model, args.port, workdir / "server.log") as server:
        model = ModelSpec(
            model=args.model,
            base_url=server.base_url,
            task_max_tokens=args.task_max_tokens,
            reflection_max_tokens=args.reflection_max_tokens,
        )
        emery_run = run(
            run_emery(
                "emery gepa",
                "gepa",
                json.loads(args.emery_settings),
                task,
                model,
                metric_calls=args.metric_calls,
                seed=args.seed,
                concurrency=args.concurrency,
            )
        )
        rows.append(emery_run.report)
        if not args.skip_peer:
            rows.append(peer_row(args, task, model, workdir))
    print(
        f"\nword_problems, {args.model} as task and reflection model behind one endpoint;"
        f" train/val/test {args.n_train}/{args.n_val}/{args.n_test};"
        f" budget {args.metric_calls} metric calls;"
        f" total {(time.perf_counter() - started) / 60:.1f} min\n"
    )
    print(markdown_table(rows))
    for row in rows:
        for name, text in row.best_components.items():
            print(f"\n{row.name} — winning {name}:\n{text}")
    if args.output is not None:
        args.output.write_text(json.dumps([row.model_dump() for row in rows], indent=2))
    print(f"\n(work files in {workdir}; the repository is {ROOT})")


if __name__ == "__main__":
    main()
