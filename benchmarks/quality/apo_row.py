"""emery APO as a row of the quality table: the task, model, splits and budget of the GEPA
and MIPRO comparisons (``gepa_vs_library.py``, ``mipro_vs_dspy.py``).

Runs APO through the shared harness (``common.run_emery``): behind an ``emery proxy``
endpoint like the GEPA comparison (default) or with the in-process model
(``--in-process``); scores the seed and the winner on the same test split with emery's
evaluator; prints the row, side by side with the rows other scripts wrote with
``--output`` (``--with``), so the three emery algorithms and their peers share one table.

    .venv/bin/python benchmarks/quality/apo_row.py --output apo.json          # qwen, ~1-2 h
    .venv/bin/python benchmarks/quality/apo_row.py --with gepa_vs_library.json   # one table
    .venv/bin/python benchmarks/quality/apo_row.py --smoke --in-process       # smollm, minutes

APO's paper defaults (beam 4 x branch 4, val batches of 16) would spend a whole 150-call
budget inside its first round, so the default ``--apo-settings`` scale the beam down to the
budget; any ``[algorithm.apo]`` setting can be given there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import (
    ModelSpec,
    RowReport,
    Server,
    comparison_parser,
    markdown_table,
    real_markdown,
    run,
    run_emery,
    task_from,
)

from emery.algorithms import StepRecord

SHOWN = ("apo.critique", "apo.edit", "apo.beam_updated", "apo.full_val_scored", "apo.round_cut")
DEFAULT_SETTINGS = {
    "beam_width": 2,
    "branch_factor": 2,
    "rounds": 3,
    "gradient_batch_size": 3,
    "val_batch_size": 8,
}


def arguments() -> argparse.Namespace:
    parser = comparison_parser(__doc__.splitlines()[0], port=8433)
    parser.add_argument(
        "--metric-calls", type=int, default=None, help="default 150 or the config's"
    )
    parser.add_argument("--reflection-max-tokens", type=int, default=400)
    parser.add_argument("--n-threads", type=int, default=None, help="in-process model threads")
    parser.add_argument("--in-process", action="store_true", help="no endpoint: load the model")
    parser.add_argument(
        "--apo-settings", default=json.dumps(DEFAULT_SETTINGS), help="[algorithm.apo] as JSON"
    )
    parser.add_argument(
        "--with",
        dest="others",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        help="rows other scripts wrote with --output (repeatable)",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print APO's events")
    args = parser.parse_args()
    if args.smoke:
        args.model = "local/smollm2-135m"
        args.n_train, args.n_val, args.n_test = 3, 3, 3
        args.metric_calls, args.task_max_tokens, args.reflection_max_tokens = 12, 32, 64
        args.apo_settings = json.dumps(
            {
                "beam_width": 1,
                "branch_factor": 2,
                "rounds": 1,
                "gradient_batch_size": 2,
                "val_batch_size": 3,
                "critique_max_tokens": 64,
                "edit_max_tokens": 64,
                "skip_perfect_batches": False,
            }
        )
    return args


def show(record: StepRecord) -> None:
    for item in record.events:
        if item.kind in SHOWN:
            data = {k: v for k, v in item.data.items() if k != "reply"}
            print(f"  {item.kind:20} {json.dumps(data)[:400]}", flush=True)


@contextlib.contextmanager
def model_spec(args: argparse.Namespace, workdir: Path) -> Iterator[ModelSpec]:
    common = {
        "model": args.model,
        "task_max_tokens": args.task_max_tokens,
        "reflection_max_tokens": args.reflection_max_tokens,
    }
    if args.in_process:
        yield ModelSpec(**common, n_threads=args.n_threads)
        return
    with Server(args.model, args.port, workdir / "server.log") as server:
        yield ModelSpec(**common, base_url=server.base_url)


def main() -> None:
    args = arguments()
    logging.basicConfig(level=logging.ERROR)
    others = [
        RowReport.model_validate(row)
        for path in args.others
        for row in json.loads(path.read_text())
    ]
    task = task_from(args, metric_calls=150)
    workdir = Path(tempfile.mkdtemp(prefix="apo-bench-"))
    started = time.perf_counter()
    with model_spec(args, workdir) as model:
        outcome = run(
            run_emery(
                "emery apo",
                "apo",
                json.loads(args.apo_settings),
                task,
                model,
                metric_calls=args.metric_calls,
                wall_time_s=args.wall_time,
                seed=args.seed,
                concurrency=args.concurrency,
                on_step=None if args.quiet else show,
            )
        )
    row = outcome.report
    edits = [e.data for r in outcome.records for e in r.events if e.kind == "apo.edit"]
    row.extra = {
        **row.extra,
        "settings": json.loads(args.apo_settings),
        "edits": len(edits),
        "edits_accepted": sum(1 for e in edits if e["accepted"]),
        "rejections": sorted({str(e["reason"]).split(" (")[0] for e in edits if e["reason"]}),
    }
    print(
        f"\n{args.config or 'word_problems'}, {args.model} as task and reflection model"
        f" ({'in process' if args.in_process else 'behind one endpoint'});"
        f" train/val/test {args.n_train}/{args.n_val}/{args.n_test};"
        f" budget {args.metric_calls} metric calls;"
        f" total {(time.perf_counter() - started) / 60:.1f} min\n"
    )
    print(real_markdown([*others, row]) if args.config else markdown_table([*others, row]))
    print(
        f"\nAPO stopped: {row.stop_reason}; edits accepted {row.extra['edits_accepted']}"
        f" of {row.extra['edits']}"
    )
    for name, text in row.best_components.items():
        print(f"\nemery apo — winning {name}:\n{text}")
    if args.output is not None:
        args.output.write_text(json.dumps([row.model_dump()], indent=2))


if __name__ == "__main__":
    main()
