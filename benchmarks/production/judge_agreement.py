"""Does the rubric judge tell right replies from wrong ones? Text (JSON) scoring against
scoring by the judge's probability of Yes (``[verifier] scoring = "logprobs"``) on labeled
pairs.

Each pair is one question of a real dataset (``../shared/datasets/``) with a right reply and
a wrong one: CLINC150 intents (the gold intent against another of the listed intents, drawn
at random) and SVAMP word problems (``Answer: <gold>`` against ``Answer: <a near miss>``).
The judge sees no reference answer, as on unlabeled production traffic. Every reply is
judged in each scoring mode by the same model; per mode the script reports AUC (the chance
a right reply scores above a wrong one, ties half), Spearman's rho between score and
label, and the share of pairs ranked right, each with a 95% bootstrap interval over pairs,
and n.

    nice -n 10 .venv/bin/python benchmarks/production/judge_agreement.py --threads 1 \\
        --clinc 25 --svamp 20 --out judge-agreement.json

``--model fake`` runs the same code with a scripted judge (seconds; a smoke test).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from apps import CLINC, SVAMP

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.lm import LM, FakeLM
from emery.lm.config import LMConfig, build_base_lm, build_lm
from emery.lm.usage import UsageMeter
from emery.verifiers.judge import JUDGE_SCORINGS, JudgeScoring
from emery.verifiers.rubric import Criterion, RubricJudge

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
RUBRICS = {"clinc": CLINC.rubric, "svamp": SVAMP.rubric}
"""The criterion the loop's rubric judge scores each application's replies on."""
BOOTSTRAP = 2000


@dataclass(frozen=True)
class Reply:
    """One reply to judge: its pair, its dataset, whether it is right."""

    pair: str
    dataset: str
    right: bool
    example: Example
    output: str


def clinc_pairs(n: int, rng: random.Random) -> list[Reply]:
    rows = [json.loads(line) for line in (DATASETS / "clinc15.jsonl").open()]
    rows = [row for row in rows if row["split"] == "test"][:n]
    replies = []
    for row in rows:
        labels = [label.strip() for label in row["input"]["labels"].split(",")]
        wrong = rng.choice([label for label in labels if label != row["expected"]])
        example = Example(id=row["id"], input=row["input"])
        replies += [
            Reply(row["id"], "clinc", True, example, row["expected"]),
            Reply(row["id"], "clinc", False, example, wrong),
        ]
    return replies


def near_miss(gold: float, rng: random.Random) -> float:
    """A plausible wrong answer: the gold number off by a small amount (never negative)."""
    offset = rng.choice([1, 2, 3, 5, 10]) * rng.choice([-1, 1])
    return gold + offset if gold + offset >= 0 else gold - offset


def svamp_pairs(n: int, rng: random.Random) -> list[Reply]:
    rows = [json.loads(line) for line in (DATASETS / "svamp.jsonl").open()]
    rows = [row for row in rows if row["split"] == "test"][:n]
    replies = []
    for row in rows:
        gold = float(row["expected"])
        example = Example(id=row["id"], input=row["input"])
        replies += [
            Reply(row["id"], "svamp", True, example, f"Answer: {gold:g}"),
            Reply(row["id"], "svamp", False, example, f"Answer: {near_miss(gold, rng):g}"),
        ]
    return replies


# -- rank statistics ---------------------------------------------------------------------


def ranks(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Ranks from 1, ties given their mean rank."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    out = np.empty(len(values))
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        out[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return out


def spearman(scores: Sequence[float], labels: Sequence[float]) -> float | None:
    """Spearman's rho; None when either side is constant."""
    a, b = ranks(np.asarray(scores, float)), ranks(np.asarray(labels, float))
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """P(a right reply scores above a wrong one), ties half; None without both kinds."""
    right = [s for s, label in zip(scores, labels, strict=True) if label]
    wrong = [s for s, label in zip(scores, labels, strict=True) if not label]
    if not right or not wrong:
        return None
    wins = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
    return wins / (len(right) * len(wrong))


def pair_accuracy(pairs: Sequence[tuple[float, float]]) -> float:
    """The share of pairs whose right reply scores above the wrong one, ties half."""
    return sum((r > w) + 0.5 * (r == w) for r, w in pairs) / len(pairs)


def interval(
    pairs: Sequence[tuple[float, float]], statistic: Any, rng: np.random.Generator, draws: int
) -> dict[str, Any]:
    """The statistic on the pairs, and its 95% percentile bootstrap interval over pairs."""

    def of(chosen: Sequence[tuple[float, float]]) -> float | None:
        scores = [s for pair in chosen for s in pair]
        labels = [True, False] * len(chosen)
        return statistic(scores, labels)  # type: ignore[no-any-return]

    value = of(pairs)
    found_draws = []
    for _ in range(draws):
        picked = rng.integers(0, len(pairs), len(pairs))
        found = of([pairs[i] for i in picked])
        if found is not None:
            found_draws.append(found)
    defined = len(found_draws)
    if value is None or not found_draws:
        return {"value": None, "low": None, "high": None, "defined_draws": defined}
    low, high = np.percentile(found_draws, [2.5, 97.5])
    return {"value": value, "low": float(low), "high": float(high), "defined_draws": defined}


def summary(
    replies: Sequence[Reply], scores: Sequence[float], seed: int, draws: int = BOOTSTRAP
) -> dict[str, Any]:
    """The figures of ``replies`` scored ``scores`` (in the same order)."""
    by_pair: dict[str, dict[bool, float]] = {}
    for reply, score in zip(replies, scores, strict=True):
        by_pair.setdefault(f"{reply.dataset}/{reply.pair}", {})[reply.right] = score
    pairs = [(found[True], found[False]) for found in by_pair.values()]
    rng = np.random.default_rng(seed)
    values = list(scores)
    return {
        "n_replies": 2 * len(pairs),
        "n_pairs": len(pairs),
        "distinct_scores": len(set(values)),
        "mean_right": float(np.mean([r for r, _ in pairs])),
        "mean_wrong": float(np.mean([w for _, w in pairs])),
        "auc": interval(pairs, auc, rng, draws),
        "spearman": interval(pairs, spearman, rng, draws),
        "pairs_ranked_right": interval(
            pairs, lambda s, _: pair_accuracy(list(zip(s[::2], s[1::2], strict=True))), rng, draws
        ),
    }


# -- judging -------------------------------------------------------------------------------


def judge_model(name: str, threads: int, parallel: int) -> tuple[LM, LM]:
    """The judge as a job's judge role gets it (JSON verdicts capped at 160 tokens), and
    the model under it (to close)."""
    if name == "fake":
        fake = FakeLM(fake_judge, model="fake/judge")
        return fake, fake
    base = build_base_lm(LMConfig(model=name, n_parallel=parallel, n_threads=threads))
    judge = build_lm(
        LMConfig(model=name, max_tokens=160),
        role="judge",
        meter=UsageMeter(),
        cache=None,
        base=base,
    )
    return judge, base


def fake_judge(messages: Sequence[ChatMessage]) -> str:
    """A scripted judge that likes replies with an even last character: a smoke test."""
    prompt = messages[-1]["content"]
    answer = prompt.split("## Answer\n", 1)[1].split("\n", 1)[0]
    good = ord(answer[-1]) % 2 == 0
    if "JSON object" in prompt:
        return json.dumps({"criteria": {"correct": {"score": 1 if good else 0, "reason": "."}}})
    return ("Yes" if good else "No") + "\nScripted."


@dataclass
class Judged:
    """One scoring mode's scores (by reply index) and what the judge did."""

    scores: dict[int, float]
    feedback: dict[int, str]
    unreadable: int
    text_verdicts: int
    wall_s: float


async def judge_all(
    lm: LM, replies: Sequence[Reply], scoring: JudgeScoring, parallel: int
) -> Judged:
    verifiers = {
        name: RubricJudge([Criterion(name="correct", description=text)], judge=lm, scoring=scoring)
        for name, text in RUBRICS.items()
    }
    slots = asyncio.Semaphore(parallel)
    scores: dict[int, float] = {}
    feedback: dict[int, str] = {}

    async def one(index: int, reply: Reply) -> None:
        async with slots:
            verdict = await verifiers[reply.dataset].verify(reply.example, reply.output)
        scores[index], feedback[index] = verdict.score, verdict.feedback

    start = time.perf_counter()
    await asyncio.gather(*(one(i, r) for i, r in enumerate(replies)))
    return Judged(
        scores,
        feedback,
        unreadable=sum(v.stats.unreadable for v in verifiers.values()),
        text_verdicts=sum(v.stats.text_verdicts for v in verifiers.values()),
        wall_s=round(time.perf_counter() - start, 1),
    )


def cell(found: dict[str, Any]) -> str:
    if found["value"] is None:
        return "undefined (constant scores)"
    return f"{found['value']:.2f} [{found['low']:.2f}, {found['high']:.2f}]"


def table(results: dict[str, Any]) -> str:
    head = (
        "| scoring | data | n replies (pairs) | distinct scores | mean score right / wrong |"
        " AUC [95%] | Spearman rho [95%] | pairs ranked right [95%] | unreadable |"
        " judge wall |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    rows = []
    for mode, found in results["modes"].items():
        for data, s in found["by_data"].items():
            whole = data == "all"
            wall = f"{found['wall_s'] / 60:.1f} min" if whole else ""
            unreadable = found["unreadable"] if whole else ""
            rows.append(
                f"| {mode} | {data} | {s['n_replies']} ({s['n_pairs']}) | {s['distinct_scores']}"
                f" | {s['mean_right']:.2f} / {s['mean_wrong']:.2f} | {cell(s['auc'])}"
                f" | {cell(s['spearman'])} | {cell(s['pairs_ranked_right'])}"
                f" | {unreadable} | {wall} |"
            )
    return "\n".join([head, *rows])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--clinc", type=int, default=25, help="CLINC pairs (test rows)")
    parser.add_argument("--svamp", type=int, default=20, help="SVAMP pairs (test rows)")
    parser.add_argument("--modes", default="json,logprobs", help="scorings, comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--parallel", type=int, default=4, help="replies judged at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="bootstrap draws")
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    return parser.parse_args(argv)


def bad_counts(args: argparse.Namespace) -> str | None:
    """What is wrong with the pair, draw and parallel counts asked for, or None."""
    if args.clinc < 0 or args.svamp < 0 or args.clinc + args.svamp == 0:
        pairs = f"--clinc {args.clinc} --svamp {args.svamp}"
        return f"{pairs}: pairs to judge, 0 or more each, 1 in all"
    if args.bootstrap < 1:
        return f"--bootstrap {args.bootstrap}: bootstrap draws, 1 or more"
    if args.parallel < 1:
        return f"--parallel {args.parallel}: replies judged at once, 1 or more"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    try:
        scorings = {mode: JUDGE_SCORINGS.get(mode) for mode in modes}
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wrong = bad_counts(args)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    replies = clinc_pairs(args.clinc, rng) + svamp_pairs(args.svamp, rng)
    lm, base = judge_model(args.model, args.threads, args.parallel)
    results: dict[str, Any] = {"settings": vars(args) | {"out": str(args.out)}, "modes": {}}
    try:
        for mode in modes:
            judged = asyncio.run(judge_all(lm, replies, scorings[mode], args.parallel))
            scores = judged.scores
            ordered = [scores[i] for i in range(len(replies))]
            by_data = {"all": summary(replies, ordered, args.seed, args.bootstrap)}
            for data in ("clinc", "svamp"):
                chosen = [i for i, r in enumerate(replies) if r.dataset == data]
                if chosen:
                    picked = [replies[i] for i in chosen]
                    chosen_scores = [scores[i] for i in chosen]
                    by_data[data] = summary(picked, chosen_scores, args.seed, args.bootstrap)
            results["modes"][mode] = {
                "by_data": by_data,
                "unreadable": judged.unreadable,
                "text_verdicts": judged.text_verdicts,
                "wall_s": judged.wall_s,
                "scores": [
                    {"pair": r.pair, "data": r.dataset, "right": r.right, "output": r.output}
                    | {"score": scores[i], "feedback": judged.feedback[i]}
                    for i, r in enumerate(replies)
                ],
            }
            print(f"{mode}: judged {len(replies)} replies in {judged.wall_s:.0f} s", flush=True)
    finally:
        close = getattr(base, "close", None)
        if close is not None:
            close()
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
