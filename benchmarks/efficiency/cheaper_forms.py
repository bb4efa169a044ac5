"""What the cheaper forms of a pool-showing winner score: the seed with the train pool shown
nearest ``k`` per input (what GEPA's ``nearest_demos`` operator makes and the winners on
CLINC and Restaurant-8k most often are), for each ``--shown`` k, scored on all of val and
test (uncharged).

Prints per k: the val and test scores (95% intervals), tokens per example, the saving
against the first k, and the paired differences from the first k on val and on test (the
evidence rule of ``algorithms/evidence.py``), and whether the cheaper-winner target of
issue 33 holds on test (at least 30% fewer tokens, within 2 points). It answers whether a
search could find such a winner at all, and whether val could tell it from the dearer one.

    nice -n 5 .venv/bin/python benchmarks/efficiency/cheaper_forms.py \\
        benchmarks/quality/real/clinc.toml --shown 4 2 1 --out /tmp/clinc-forms.json
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality"))

from common import ConfigTask
from local_winner import (
    SAVING_TARGET,
    SCORE_MARGIN,
    local_context,
    paired_on_shared,
    report,
    test_row,
)

from emery.algorithms.labeled import labeled_pool
from emery.algorithms.operators import Materials, apply_operator
from emery.evaluation.budget import BudgetConfig
from emery.systems import PromptProgram
from emery.systems.prompt_layout import StageLayout, with_layout


def difference(row: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """``row``'s paired difference from ``base`` on the examples both scored."""
    evidence, _ = paired_on_shared(row["scores"], base["scores"])
    return {"diff": evidence.difference, "low": evidence.low, "high": evidence.high}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    ctx = local_context(ConfigTask(args.config), args, BudgetConfig())
    system, dataset = ctx.system, ctx.dataset
    assert isinstance(system, PromptProgram)
    stage = system.config.stages[0].name
    pooled = apply_operator(
        "nearest_demos",
        system.seed_candidate(),
        system,
        stage,
        materials=Materials(labeled=await labeled_pool(ctx)),
    )
    if pooled is None:
        raise SystemExit(f"{args.config}: too few labeled train examples for a pool")
    forms = []
    for shown in args.shown:
        layout = StageLayout.of(pooled.components, stage).model_copy(update={"shown": shown})
        form = pooled.derive(
            components=with_layout(pooled.components, stage, layout),
            demos=pooled.demos,
            lineage=pooled.lineage,
        )
        row: dict[str, Any] = {"shown": shown, "candidate": form.id[:8]}
        for split, examples in (("val", dataset.val), ("test", dataset.test)):
            result = await ctx.evaluations.evaluate(form, examples, split, charge=False)
            row[split] = test_row(result)
        forms.append(row)
    first = forms[0]
    for row in forms:
        row["saving"] = 1 - row["test"]["test_tokens"] / first["test"]["test_tokens"]
        for split in ("val", "test"):
            row[f"{split}_vs_first"] = difference(row[split], first[split])
        row["target_met"] = (
            row["saving"] >= SAVING_TARGET and row["test_vs_first"]["diff"] >= -SCORE_MARGIN
        )
    return {"config": str(args.config), "pool": len(pooled.demos[stage]), "forms": forms}


def markdown(result: dict[str, Any]) -> str:
    first = result["forms"][0]["shown"]
    lines = [
        f"{result['config']}: the seed with a pool of {result['pool']} train demos,"
        " shown nearest k per input",
        "",
        "| k | val (95% CI, n) | tokens/ex (val) | test (95% CI, n) | tokens/ex (test)"
        f" | saving vs k={first} | val - k={first}'s (95% CI) | test - k={first}'s (95% CI)"
        " | target met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["forms"]:
        cells = [str(row["shown"])]
        for split in ("val", "test"):
            s = row[split]
            cells.append(f"{s['test']:.3f} ({s['test_low']:.3f}-{s['test_high']:.3f}, n={s['n']})")
            cells.append(f"{s['test_tokens']:.0f}")
        cells.append(f"{row['saving']:.0%}")
        for split in ("val", "test"):
            d = row[f"{split}_vs_first"]
            cells.append(f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
        cells.append("yes" if row["target_met"] else "no")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="a job config (e.g. quality/real/clinc.toml)")
    parser.add_argument("--shown", type=int, nargs="+", default=[4, 3, 2, 1])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, help="write the result as JSON")
    args = parser.parse_args()
    if any(k < 1 for k in args.shown):
        parser.error("--shown: each k is at least 1")
    report(asyncio.run(measure(args)), args.out, markdown)


if __name__ == "__main__":
    main()
