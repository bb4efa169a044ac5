"""A cheaper winner on the local model: one search over score and tokens on a real data set,
then the best-score winner and the ``cheapest_within`` winner scored on the same test split.

One search runs in-process as a job with ``[job] objectives = ["score", "tokens"]`` and
``select =`` the first ``--select`` rule (or ``--search-select``) would run it (the search
is told both: GEPA keeps as-good, cheaper children, MIPRO's study aims for the rule);
every candidate scored on all of val forms the pool that ``jobs/winner.py`` chooses from.
``best_score`` and each ``--select`` rule then pick
their winner from that one pool, and the seed and every distinct winner are scored on test
(uncharged). Prints the pool (val score, tokens per example, on the front or not), then
per rule: the winner's tokens per test example, its test score (n, 95% interval) and its
paired difference from the best-score winner on the same test examples (95% interval, the
evidence rule of ``algorithms/evidence.py``), and whether the issue's target holds: at
least 30% fewer tokens per example, within 2 points of the best-score winner's test score.
With ``--against`` another run's JSON (the same config told ``best_score``: the job on the
default rule), each winner is also compared with that run's winner the same way.

    nice -n 10 .venv/bin/python benchmarks/efficiency/local_winner.py \\
        benchmarks/quality/real/clinc.toml --algorithm mipro --budget 200 --threads 1 \\
        --search-select best_score --out /tmp/clinc-default.json
    nice -n 10 .venv/bin/python benchmarks/efficiency/local_winner.py \\
        benchmarks/quality/real/clinc.toml --algorithm mipro --budget 200 --threads 1 \\
        --select cheapest_within:0.02 --against /tmp/clinc-default.json --out /tmp/clinc.json

The model, split sizes and seed instruction come from the config; ``--threads`` sets the
local model's llama.cpp threads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality"))

from common import ConfigTask, ModelSpec

from emery.algorithms import build_algorithm, run_search
from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.evidence import Evidence, paired
from emery.algorithms.registry import settings_table
from emery.core.models import Candidate
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.front import CostFront, choose
from emery.evaluation.objectives import cost_per_example
from emery.evaluation.selection import parse_select
from emery.jobs.winner import val_pool
from emery.lm.usage import UsageMeter

OBJECTIVES = ("score", "tokens")
SAVING_TARGET = 0.30
"""The issue's target: the cheaper winner costs at least 30% fewer tokens per example..."""
SCORE_MARGIN = 0.02
"""...and scores within 2 points of the best-score winner."""


def model_spec(task: ConfigTask, threads: int | None) -> ModelSpec:
    """The config's task model, with its proposer's and reflection's token limits."""
    lm = task.config.lm
    return ModelSpec(
        model=lm.task.model,
        task_max_tokens=lm.task.max_tokens,
        reflection_max_tokens=max(lm.proposer.max_tokens, lm.reflection.max_tokens),
        n_threads=threads,
    )


def pool_rows(
    front: CostFront, candidates: dict[str, Candidate], seed_id: str
) -> list[dict[str, Any]]:
    """Each candidate scored on all of val: its score, tokens per example, whether it is
    on the front, and what sets its cost: its demos and its texts' length."""
    rows = []
    for m in front.candidates:
        candidate = candidates[m.candidate_id]
        rows.append(
            {
                "candidate": m.candidate_id[:8],
                "seed": m.candidate_id == seed_id,
                "best": m.candidate_id == front.best_score_id,
                "val": m.score,
                "val_tokens": m.cost.tokens,
                "on_front": m.on_front,
                "demos": sum(len(demos) for demos in candidate.demos.values()),
                "text_chars": sum(len(text) for text in candidate.components.values()),
            }
        )
    return rows


def test_row(result: EvalResult) -> dict[str, Any]:
    summary = result.summary()
    return {
        "test": summary.mean,
        "test_low": summary.low,
        "test_high": summary.high,
        "n": summary.n,
        "test_tokens": cost_per_example(result.results).tokens,
        "scores": {r.example_id: r.score for r in result.results},
    }


def paired_on_shared(scores: dict[str, float], base: dict[str, float]) -> tuple[Evidence, int]:
    """``scores`` against ``base`` (per example id) on the examples both scored: the paired
    evidence and how many examples it rests on."""
    ids = [example_id for example_id in base if example_id in scores]
    return paired([scores[i] for i in ids], [base[i] for i in ids]), len(ids)


def against(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """``row``'s winner beside ``base``, the best-score winner of another run on the same
    test split (a job on the default rule): its saving in tokens per test example and its
    paired test difference on the examples both scored, and whether the target holds."""
    evidence, n = paired_on_shared(row["scores"], base["scores"])
    saving = 1 - row["test_tokens"] / base["test_tokens"]
    return {
        "winner": base["winner"],
        "n": n,
        "saving": saving,
        "diff": evidence.difference,
        "diff_low": evidence.low,
        "diff_high": evidence.high,
        "target_met": saving >= SAVING_TARGET and evidence.difference >= -SCORE_MARGIN,
    }


def local_context(
    task: ConfigTask, args: argparse.Namespace, budget: BudgetConfig
) -> SearchContext:
    """A search context for ``task`` on its local model (``args.threads`` llama.cpp threads,
    ``args.seed``, ``args.concurrency`` rollouts at once) under ``budget``."""
    meter = UsageMeter()
    return build_search_context(
        system=task.system(),
        dataset=task.dataset(),
        verifier=task.verifier(),
        lms=model_spec(task, args.threads).lms(meter, ("task", "reflection", "proposer")),
        budget=budget,
        meter=meter,
        seed=args.seed,
        concurrency=args.concurrency,
    )


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    task = ConfigTask(args.config, n_train=args.n_train, n_val=args.n_val, n_test=args.n_test)
    ctx = local_context(task, args, BudgetConfig(metric_calls=args.budget))
    # as a job's engine tells the search
    ctx.objectives = OBJECTIVES
    ctx.select = parse_select(args.search_select or args.select[0], OBJECTIVES)
    algorithm = build_algorithm(args.algorithm, settings_table(args.algorithm, {}))
    started = time.perf_counter()
    outcome = await run_search(algorithm, ctx)
    search_s = time.perf_counter() - started
    state = outcome.state
    pool = val_pool(ctx)
    best = next(s for s in pool if s.candidate_id == state.best_candidate_id)
    rules = ["best_score", *args.select]
    fronts = {
        rule: choose(pool, best, OBJECTIVES, parse_select(rule, OBJECTIVES)) for rule in rules
    }
    tests: dict[str, EvalResult] = {}
    for candidate_id in [state.seed_candidate_id, *(f.winner_id for f in fronts.values())]:
        if candidate_id not in tests:
            tests[candidate_id] = await ctx.evaluations.evaluate(
                ctx.candidates[candidate_id], ctx.dataset.test, "test", charge=False
            )
    best_test = tests[best.candidate_id]
    winners = []
    for rule, front in fronts.items():
        won = tests[front.winner_id]
        member = front.member(front.winner_id)
        assert member is not None
        row = {"select": rule, "winner": front.winner_id[:8], "val": member.score}
        row |= {"val_tokens": member.cost.tokens} | test_row(won)
        evidence = paired([r.score for r in won.results], [r.score for r in best_test.results])
        saving = 1 - row["test_tokens"] / test_row(best_test)["test_tokens"]
        row |= {
            "saving": saving,
            "diff": evidence.difference,
            "diff_low": evidence.low,
            "diff_high": evidence.high,
            "target_met": saving >= SAVING_TARGET and evidence.difference >= -SCORE_MARGIN,
        }
        if args.against:
            row["against"] = against(row, json.loads(args.against.read_text())["winners"][0])
        winners.append(row)
    return {
        "config": str(args.config),
        "algorithm": args.algorithm,
        "search_select": ctx.select.text,
        "budget": args.budget,
        "metric_calls": ctx.budget.usage.metric_calls,
        "search_s": round(search_s, 1),
        "stop": outcome.reason,
        "seed_test": test_row(tests[state.seed_candidate_id]),
        "pool": pool_rows(fronts["best_score"], ctx.candidates, state.seed_candidate_id),
        "sources": {
            name: counts.model_dump() for name, counts in getattr(state, "sources", {}).items()
        },
        "winners": winners,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| candidate | val | tokens/ex (val) | on front | demos | text chars |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {p['candidate']}{' (seed)' if p['seed'] else ''}{' (best)' if p['best'] else ''}"
            f" | {p['val']:.3f} | {p['val_tokens']:.0f} | {'yes' if p['on_front'] else 'no'}"
            f" | {p['demos']} | {p['text_chars']} |"
            for p in result["pool"]
        ),
        "",
        "| select | winner | val | tokens/ex (val) | tokens/ex (test) | saving | test (95% CI, n)"
        " | test - best_score's (95% CI) | target met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for w in result["winners"]:
        lines.append(
            f"| {w['select']} | {w['winner']} | {w['val']:.3f} | {w['val_tokens']:.0f}"
            f" | {w['test_tokens']:.0f} | {w['saving']:.0%}"
            f" | {w['test']:.3f} ({w['test_low']:.3f}-{w['test_high']:.3f}, n={w['n']})"
            f" | {w['diff']:+.3f} [{w['diff_low']:+.3f}, {w['diff_high']:+.3f}]"
            f" | {'yes' if w['target_met'] else 'no'} |"
        )
    compared = [w for w in result["winners"] if "against" in w]
    if compared:
        lines += [
            "",
            "| select | winner | the default job's winner | saving | test - its (95% CI, n)"
            " | target met |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for w in compared:
            a = w["against"]
            lines.append(
                f"| {w['select']} | {w['winner']} | {a['winner']} | {a['saving']:.0%}"
                f" | {a['diff']:+.3f} [{a['diff_low']:+.3f}, {a['diff_high']:+.3f}], n={a['n']}"
                f" | {'yes' if a['target_met'] else 'no'} |"
            )
    seed = result["seed_test"]
    lines.append("")
    lines.append(
        f"seed on test: {seed['test']:.3f} ({seed['test_tokens']:.0f} tokens/ex);"
        f" search told {result['search_select']};"
        f" {result['metric_calls']} metric calls, search {result['search_s']} s,"
        f" stopped: {result['stop']}"
    )
    if result.get("sources"):
        lines.append(
            "children proposed (accepted) by source: "
            + ", ".join(
                f"{name} {c['proposed']} ({c['accepted']})"
                for name, c in sorted(result["sources"].items())
            )
        )
    return "\n".join(lines)


def report(
    result: dict[str, Any], out: Path | None, markdown: Callable[[dict[str, Any]], str]
) -> None:
    """Write ``result`` as JSON to ``out`` (if given) and print it as ``markdown`` renders it."""
    if out:
        out.write_text(json.dumps(result, indent=2))
    print(markdown(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="a job config (e.g. quality/real/clinc.toml)")
    parser.add_argument("--algorithm", default="mipro")
    parser.add_argument("--budget", type=int, default=200, help="metric calls")
    parser.add_argument(
        "--select",
        nargs="*",
        default=["cheapest_within:0.02"],
        help="rules to compare with best_score",
    )
    parser.add_argument(
        "--search-select",
        help="the rule the search is told (default: the first --select rule; best_score: the"
        " search aims for the score alone)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--n-train", type=int)
    parser.add_argument("--n-val", type=int)
    parser.add_argument("--n-test", type=int)
    parser.add_argument("--out", type=Path, help="write the result as JSON")
    parser.add_argument(
        "--against",
        type=Path,
        help="the --out JSON of a run on the same config told best_score (the default job):"
        " each winner here is also compared with its best-score winner",
    )
    args = parser.parse_args()
    report(asyncio.run(measure(args)), args.out, markdown)


if __name__ == "__main__":
    main()
