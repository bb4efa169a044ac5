"""emery GEPA against the ``gepa`` library: same task, model, endpoint, splits and budget.

Starts ``emery proxy`` with the model (an OpenAI-compatible endpoint both sides call),
installs ``gepa==0.1.4`` into ``.bench-venvs/gepa`` if needed, runs emery's GEPA and the
library's ``gepa.optimize`` one after the other with the same metric-call budget, scores
both winners (and the seed) on the same test split with emery's evaluator through the same
endpoint, and prints one markdown table: test and val accuracy, metric calls, LM calls and
tokens by role, wall time.

    .venv/bin/python benchmarks/quality/gepa_vs_library.py                 # qwen, ~1-2 h
    .venv/bin/python benchmarks/quality/gepa_vs_library.py --smoke         # smollm, minutes
    .venv/bin/python benchmarks/quality/gepa_vs_library.py \\
        --config benchmarks/quality/real/clinc.toml --skip-emery            # real data

With ``--config`` the task is a real job config's (``common.ConfigTask``): its rows, seed
(placeholders filled), parser, verifier, budget (metric calls and wall-time cap) and
``[references.NAME]``, scored on test beside the seed and the winner.

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

from emery.core.models import Candidate

PEER = Path(__file__).resolve().parent / "peers" / "gepa_library.py"


def arguments() -> argparse.Namespace:
    parser = comparison_parser(__doc__.splitlines()[0], port=8431)
    parser.add_argument(
        "--metric-calls", type=int, default=None, help="default 150, or the config's budget"
    )
    parser.add_argument("--reflection-max-tokens", type=int, default=400)
    parser.add_argument(
        "--emery-settings",
        default='{"reflection_style": "compact"}',
        help="[algorithm.gepa] for the emery row, as JSON",
    )
    parser.add_argument("--skip-peer", action="store_true", help="only the emery row")
    parser.add_argument("--skip-emery", action="store_true", help="only the library's row")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 3, 3, 3
        args.metric_calls, args.task_max_tokens, args.reflection_max_tokens = 12, 32, 64
    return args


def peer_row(args: argparse.Namespace, task: Task, model: ModelSpec, workdir: Path) -> RowReport:
    """The library's run, its winner scored on test by emery's evaluator."""
    row, best = library_winner(args, task, model, workdir)
    return with_tests(row, run(test_scores(task, model, best, args.concurrency)))


def library_winner(
    args: argparse.Namespace, task: Task, model: ModelSpec, workdir: Path
) -> tuple[RowReport, Candidate]:
    """The library's run (``args``: metric_calls, wall_time, seed, reflection_max_tokens) and
    its winner as an emery candidate, not yet scored on test."""
    python = ensure_venv("gepa", ["gepa==0.1.4"])
    spec = {
        **peer_spec(task, model, workdir),
        "metric_calls": args.metric_calls,
        "wall_time_s": args.wall_time,
        "minibatch_size": 3,
        "use_merge": True,
        "seed": args.seed,
        "reflection_max_tokens": args.reflection_max_tokens,
    }
    found = run_peer(python, PEER, spec, timeout_s=6 * 3600)
    best = transplant(task, found["best_components"])
    row = RowReport(
        name="gepa 0.1.4 (library)",
        baseline_val=found["baseline_val"],
        best_val=found["best_val"],
        metric_calls=found["metric_calls"] or 0,
        lm={role: RoleStats(**stats) for role, stats in found["lm"].items()},
        wall_time_s=found["wall_time_s"],
        stop_reason=found["stop_reason"],
        best_components=found["best_components"],
        extra={"candidates": found["candidates"]},
    )
    return row, best


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    task = task_from(args, metric_calls=150)
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
        if not args.skip_emery:
            emery_run = run(
                run_emery(
                    "emery gepa",
                    "gepa",
                    json.loads(args.emery_settings),
                    task,
                    model,
                    metric_calls=args.metric_calls,
                    wall_time_s=args.wall_time,
                    seed=args.seed,
                    concurrency=args.concurrency,
                )
            )
            rows.append(emery_run.report)
        if not args.skip_peer:
            rows.append(peer_row(args, task, model, workdir))
    print_report(
        args,
        rows,
        f"as task and reflection model behind one endpoint; budget {args.metric_calls} metric"
        f" calls, {args.wall_time or '—'} s; total {(time.perf_counter() - started) / 60:.1f} min",
        workdir,
    )


if __name__ == "__main__":
    main()
