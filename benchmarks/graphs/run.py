"""Graph benchmark (issue 14), two comparisons measured side by side in one run:

- long documents (the built-in ``long_document_qa`` task, 50 000+ words a document): the
  rlm graph (one tool node over ``materialize_context`` / ``local_grep`` / ``read_span``)
  against stuffing the document's first ``--stuffed-chars`` characters into one prompt;
- SVAMP (``../shared/datasets/svamp.jsonl`` given as a task set, no system): the one-node
  starting graph against the best graph ``graph_gepa`` finds, both on test.

Each row: n, accuracy with its 95% interval, failed runs, LM calls per example. See
README.md. ``--smoke`` runs a few examples on local/smollm2-135m to check the plumbing
(its scores mean nothing).

    nice -n 19 .venv/bin/python benchmarks/graphs/run.py --smoke
    .venv/bin/python benchmarks/graphs/run.py --out graphs.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import emery
from emery.data.tasks import builtin_task
from emery.data.tasks.long_document import rlm_graph, stuffed_graph
from emery.evaluation import Evaluator
from emery.evaluation.stats import ScoreSummary
from emery.lm.config import LMConfig, build_lm
from emery.lm.usage import UsageMeter
from emery.store import MemoryStore
from emery.systems.graph.system import SPEC_COMPONENT
from emery.systems.registry import build_system, parse_system_config
from emery.verifiers import build_verifier

SVAMP = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "svamp.jsonl"
SVAMP_DESCRIPTION = (
    "Solve the arithmetic word problem. Reply with the final number only (digits, no units)."
)


def row(label: str, summary: ScoreSummary | None, **extra: Any) -> dict[str, Any]:
    """One printed and saved row."""
    if summary is None:
        return {"system": label, "n": 0, **extra}
    return {
        "system": label,
        "n": summary.n,
        "accuracy": round(summary.mean, 4),
        "ci95": [round(summary.low, 4), round(summary.high, 4)],
        "failed": summary.failed,
        "lm_calls_per_example": summary.lm_calls,
        **extra,
    }


def long_document(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rlm graph against the stuffed prompt on the same test documents."""
    task = builtin_task("long_document_qa")
    examples = task.dataset(seed=args.seed, n_train=0, n_val=0, n_test=args.n_long).test
    verifier = build_verifier(task.verifier)
    lm = build_lm(lm_config(args), role="task", meter=UsageMeter(), cache=None)
    rows = []
    for label, spec in (
        ("rlm graph", rlm_graph()),
        (f"stuffed first {args.stuffed_chars} chars", stuffed_graph(args.stuffed_chars)),
    ):
        system = build_system(parse_system_config(spec))
        evaluator = Evaluator(system, verifier, lm, concurrency=args.concurrency)
        started = time.perf_counter()
        result = asyncio.run(evaluator.evaluate(system.seed_candidate(), examples, "test"))
        minutes = round((time.perf_counter() - started) / 60, 2)
        rows.append(row(label, result.summary(), minutes=minutes))
    return rows


def svamp_task_set(path: Path, out: Path) -> Path:
    """``svamp.jsonl`` as a task set (metadata, tasks with their split, gold outputs)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    document = {
        "metadata": {"name": "svamp", "description": SVAMP_DESCRIPTION, "verifier": "numeric"},
        "tasks": [{"id": r["id"], "input": r["input"], "split": r["split"]} for r in rows],
        "gold_outputs": [{"task_id": r["id"], "output": r["expected"]} for r in rows],
    }
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


def svamp(args: argparse.Namespace) -> list[dict[str, Any]]:
    """graph_gepa from the task set alone: the one-node seed and the best graph on test."""
    with tempfile.TemporaryDirectory(prefix="emery-graphs-") as workdir:
        path = svamp_task_set(Path(args.svamp), Path(workdir) / "svamp.json")
        dataset = {
            "path": str(path),
            "n_train": args.n_train,
            "n_val": args.n_val,
            "n_test": args.n_test,
        }
        started = time.perf_counter()
        result = emery.optimize(
            None,
            dataset,
            algorithm="graph_gepa",
            budget=args.budget,
            lm=lm_config(args),
            reflection_lm=lm_config(args),
            seed=args.seed,
            settings={"target_llm_calls": args.target_llm_calls},
            runtime={"workdir": workdir, "concurrency": args.concurrency},
            store=MemoryStore(),
            progress=args.progress,
        )
    minutes = round((time.perf_counter() - started) / 60, 2)
    best = result.best_candidate
    spec = best.components.get(SPEC_COMPONENT) if best is not None else None
    return [
        row("one-node seed graph", result.baseline_test, state=result.state),
        row(
            "best graph_gepa graph",
            result.best_test,
            minutes=minutes,
            candidates=result.candidates_total,
            best_spec=json.loads(spec) if spec else "the seed's graph",
        ),
    ]


def lm_config(args: argparse.Namespace) -> LMConfig:
    return LMConfig(model=args.model, n_ctx=args.n_ctx, max_tokens=args.max_tokens)


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(description="Graph benchmark: rlm vs stuffed; graph_gepa.")
    cli.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    cli.add_argument("--parts", nargs="*", default=["long_document", "svamp"])
    cli.add_argument("--n-long", type=int, default=30, help="long-document test examples")
    cli.add_argument("--stuffed-chars", type=int, default=10_000, help="head the prompt gets")
    cli.add_argument("--n-ctx", type=int, default=4096, help="the model's context, tokens")
    cli.add_argument("--max-tokens", type=int, default=256)
    cli.add_argument("--svamp", default=str(SVAMP))
    cli.add_argument("--n-train", type=int, default=30)
    cli.add_argument("--n-val", type=int, default=20)
    cli.add_argument("--n-test", type=int, default=100)
    cli.add_argument("--budget", type=int, default=200, help="graph_gepa metric calls")
    cli.add_argument("--target-llm-calls", type=int, default=3)
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--concurrency", type=int, default=4)
    cli.add_argument("--progress", action="store_true")
    cli.add_argument("--out", default=None, help="also write the rows as JSON here")
    cli.add_argument(
        "--smoke", action="store_true", help="a few examples on local/smollm2-135m (plumbing)"
    )
    return cli


def smoke(args: argparse.Namespace) -> None:
    """Shrink everything to check the plumbing in a few minutes."""
    args.model = "local/smollm2-135m"
    args.n_long, args.n_train, args.n_val, args.n_test = 2, 2, 2, 3
    args.budget, args.concurrency, args.max_tokens = 12, 1, 64
    args.stuffed_chars = min(args.stuffed_chars, 4_000)
    args.n_ctx = min(args.n_ctx, 2048)


def main() -> None:
    args = parser().parse_args()
    if args.smoke:
        smoke(args)
    parts = {"long_document": long_document, "svamp": svamp}
    report: dict[str, Any] = {"model": args.model, "smoke": args.smoke}
    for part in args.parts:
        report[part] = parts[part](args)
        for line in report[part]:
            print(part, json.dumps(line), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
