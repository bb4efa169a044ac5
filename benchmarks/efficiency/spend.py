"""Where GEPA's metric calls go on the mock task, and what its verdicts were worth.

Runs GEPA in-process on the mock's task and proposer (``mock_endpoint``: the same
replies as the endpoint's, answered by scripted models, no HTTP and no latency) and
attributes every metric call to the phase that charged it: the seed's val score, the
parents' minibatches, the children's minibatches, the evidence rounds (parent and child
on further train examples), the accepted children's val scores, the confirmation of a
winner on train (``two_stage``) and the merges; and every step's calls to the source of
the candidate the step judged (a reflection's child, an operator's, a merge, or none),
split evenly between a step's candidates at k > 1 (approximate there: a pipelined step
judges the last step's children beside proposing its own). Each child
is classed by what the mock knows and the search does not: whether its phrase helps
(its mean accuracy above its parent's), hurts, or changes nothing; and by its verdict:
accepted, rejected as shown worse, rejected undecided (behind, tied, or ahead when the
evidence stopped at its cap or the budget). Then the seed and the best are scored on test
(not charged), as ``run.py`` does.

    .venv/bin/python benchmarks/efficiency/spend.py --budget 500 --seeds 5
    .venv/bin/python benchmarks/efficiency/spend.py --task noisy --budget 250 \
        --set confidence=0.95

``--set NAME=VALUE`` (repeatable) sets a GEPA setting (JSON values). See README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import statistics
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mock_endpoint as mock
from run import T95, program

from emery.algorithms import build_algorithm, run_search
from emery.algorithms.context import build_search_context
from emery.algorithms.evidence import paired
from emery.algorithms.gepa import algorithm as gepa_algorithm
from emery.algorithms.gepa import judging, merge
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.lm import Completion, FakeLM
from emery.verifiers.config import VerifierConfig, build_verifier

PHASES = ("seed val", "parent minibatch", "child minibatch", "evidence", "val", "winner", "merge")
_phase: contextvars.ContextVar[str] = contextvars.ContextVar("phase", default="seed val")
SOURCES = ("reflection", "operator", "merge", "none made")
_by_source: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar(
    "by_source", default=None
)


def _tagged(phase: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method`` with every metric call it (and the tasks it starts) charges tagged."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _phase.set(phase)
        try:
            return await method(*args, **kwargs)
        finally:
            _phase.reset(token)

    return wrapper


def instrument() -> None:
    """Tag GEPA's scoring by phase (``_reflect``'s own scoring is the children's
    minibatches; the parts it calls set their own phase)."""
    gepa = gepa_algorithm.Gepa
    gepa._reflect = _tagged("child minibatch", gepa._reflect)  # type: ignore[method-assign]
    gepa._bases = _tagged("parent minibatch", gepa._bases)  # type: ignore[method-assign]
    gepa._on_val = _tagged("val", gepa._on_val)  # type: ignore[method-assign]
    gepa._confirm_winners = _tagged("winner", gepa._confirm_winners)  # type: ignore[method-assign]
    judging._score_round = _tagged("evidence", judging._score_round)  # type: ignore[assignment]
    gepa_algorithm.run_merge = _tagged("merge", merge.run_merge)  # type: ignore[assignment]
    gepa.step = _by_step(gepa.step)  # type: ignore[method-assign,assignment]


def source(candidate: Any) -> str:
    """What made ``candidate``: ``reflection``, ``operator`` or ``merge``."""
    operation = str(candidate.lineage.operation)
    if operation == "merge":
        return "merge"
    return "operator" if operation.startswith("operator") else "reflection"


def _by_step(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``Gepa.step`` with the metric calls each step charges (its winner confirmation
    included) added to the source of the candidates it judged (``_by_source``): the
    sources of its verdicts (``gepa.minibatch_*``), ``merge`` for a merge, ``none made``
    when it judged nothing (a reflection without a usable child)."""

    async def wrapper(self: Any, ctx: Any, state: Any) -> Any:
        before, seen = ctx.budget.usage.metric_calls, len(ctx.log.events)
        try:
            return await method(self, ctx, state)
        finally:
            counter = _by_source.get()
            spent = ctx.budget.usage.metric_calls - before
            made = [_event_source(event) for event in ctx.log.events[seen:]]
            judged = [name for name in made if name is not None]
            if counter is not None and spent:
                for name in judged or ["none made"]:
                    counter[name] += spent / max(1, len(judged))

    return wrapper


def _event_source(event: Any) -> str | None:
    """The source of a verdict or merge event, None for other events."""
    if event.kind == "gepa.merge_attempted":
        return "merge"
    if event.kind in ("gepa.minibatch_accepted", "gepa.minibatch_rejected"):
        return "operator" if str(event.data["source"]).startswith("operator") else "reflection"
    return None


class SeededLM(FakeLM):
    """A scripted model whose reply may read the request's ``seed`` (the proposer's)."""

    def __init__(self, reply: Callable[[Sequence[ChatMessage], Any], str], model: str) -> None:
        self.seed: Any = None
        super().__init__(lambda messages: reply(messages, self.seed), model=model)

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.seed = params.get("seed")
        return await super().complete(messages, **params)


OUTCOMES = ("accepted", "shown worse", "undecided, behind", "undecided, tied", "undecided, ahead")


def outcome(accepted: bool, evidence: dict[str, Any]) -> str:
    """A verdict by what ended it: accepted, shown worse, or undecided when the evidence
    stopped with the child behind (not worth more calls), tied (twice), or ahead (at the
    cap of evidence examples, or the budget)."""
    if accepted:
        return "accepted"
    if evidence["verdict"] == "worse":
        return "shown worse"
    difference = evidence["difference"]
    return f"undecided, {'behind' if difference < 0 else 'tied' if difference == 0 else 'ahead'}"


def instruction(candidate: Any) -> str:
    return "\n".join(str(text) for text in candidate.components.values())


async def one_run(
    task: mock.Task, seed: int, budget: int, settings: dict[str, Any]
) -> dict[str, Any]:
    dataset = mock.sums()
    ctx = build_search_context(
        system=program(),
        dataset=dataset,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms={
            "task": SeededLM(lambda m, _s: mock.task_reply(list(m), task), "mock-task"),  # type: ignore[arg-type]
            "reflection": SeededLM(lambda m, s: mock.proposer_reply(list(m), s), "mock-proposer"),  # type: ignore[arg-type]
        },
        budget=BudgetConfig(metric_calls=budget),
        seed=seed,
        concurrency=8,
    )
    calls: Counter[str] = Counter()
    charge = ctx.budget.charge_metric_calls

    def tagged_charge(count: int) -> None:
        charge(count)
        calls[_phase.get()] += count

    ctx.budget.charge_metric_calls = tagged_charge  # type: ignore[method-assign]
    by_source: Counter[str] = Counter()
    token = _by_source.set(by_source)
    try:
        searched = await run_search(build_algorithm("gepa", settings), ctx)
    finally:
        _by_source.reset(token)
    state = searched.state
    children = []
    for child in ctx.candidates.values():
        details = child.lineage.details
        if "evidence" not in details:  # the seed, a merge, or a child never judged
            continue
        parent = ctx.candidates[child.lineage.parents[0]]
        truth = task.accuracy(instruction(child)) - task.accuracy(instruction(parent))
        evidence = details["evidence"]
        children.append(
            {
                "truth": "helps" if truth > 1e-9 else "hurts" if truth < -1e-9 else "neutral",
                "outcome": outcome(details["accepted"], evidence),
                "source": source(child),
                "n": evidence["n"],
                "difference": evidence["difference"],
                "high": evidence["high"],
            }
        )
    merged = [c for c in ctx.candidates.values() if c.lineage.operation == "merge"]
    best = ctx.candidates[state.best_candidate_id]
    seed_candidate = ctx.candidates[state.seed_candidate_id]
    test = {}
    for name, candidate in (("seed", seed_candidate), ("best", best)):
        test[name] = await ctx.evaluations.evaluate(candidate, dataset.test, "test", charge=False)
    against_seed = paired(test["best"].scores, test["seed"].scores, 0.95)
    return {
        "seed": seed,
        "metric_calls": ctx.budget.usage.metric_calls,
        "steps": ctx.budget.usage.iterations,
        "calls": dict(calls),
        "by_source": dict(by_source),
        "made": dict(Counter(c["source"] for c in children) + Counter(merge=len(merged))),
        "merges_kept": sum(bool(c.lineage.details.get("accepted")) for c in merged),
        "children": children,
        "best_val": state.best_val_score,
        "best": instruction(best),
        "seed_returned": state.best_candidate_id == state.seed_candidate_id,
        "lift": test["best"].mean - test["seed"].mean,
        "worse_than_seed": against_seed.verdict == "worse",
    }


def spend_table(runs: list[dict[str, Any]]) -> str:
    """Metric calls by phase, means over the runs, with shares of all calls."""
    total = statistics.fmean(r["metric_calls"] for r in runs)
    lines = ["| phase | metric calls | share |", "| --- | --- | --- |"]
    for phase in PHASES:
        mean = statistics.fmean(r["calls"].get(phase, 0) for r in runs)
        lines.append(f"| {phase} | {mean:.1f} | {mean / total:.0%} |")
    lines.append(f"| all | {total:.1f} | 100% |")
    return "\n".join(lines)


def source_table(runs: list[dict[str, Any]]) -> str:
    """Metric calls by the source of the steps' candidates (means over the runs; the seed's
    val score before the first step is not a step's), and the candidates each judged."""
    total = statistics.fmean(r["metric_calls"] for r in runs)
    lines = [
        "| source | steps' metric calls | share | candidates judged | calls a candidate |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in SOURCES:
        mean = statistics.fmean(r.get("by_source", {}).get(name, 0) for r in runs)
        made = statistics.fmean(r.get("made", {}).get(name, 0) for r in runs)
        each = f"{mean / made:.1f}" if made else ""
        lines.append(f"| {name} | {mean:.1f} | {mean / total:.0%} | {made:.1f} | {each} |")
    return "\n".join(lines)


def children_table(runs: list[dict[str, Any]], minibatch: int = 3) -> str:
    """Children per run by truth and outcome: how many, their mean evidence n, the
    further examples their evidence took beyond the first minibatch (each costs up to two
    metric calls: the parent's and the child's), and how many stopped at the cap."""
    lines = [
        "| truth | outcome | children per run | mean n | further examples per run"
        " | at the cap per run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    everyone = [c for r in runs for c in r["children"]]
    cap = max((c["n"] for c in everyone), default=0)
    for truth in ("helps", "neutral", "hurts"):
        for verdict in OUTCOMES:
            mine = [c for c in everyone if c["truth"] == truth and c["outcome"] == verdict]
            if not mine:
                continue
            further = sum(max(0, c["n"] - minibatch) for c in mine)
            at_cap = sum(c["n"] >= cap for c in mine)
            lines.append(
                f"| {truth} | {verdict} | {len(mine) / len(runs):.1f}"
                f" | {statistics.fmean(c['n'] for c in mine):.1f} | {further / len(runs):.1f}"
                f" | {at_cap / len(runs):.1f} |"
            )
    by_source = Counter(c["source"] for c in everyone)
    kept = Counter(c["source"] for c in everyone if c["outcome"] == "accepted")
    lines.append("")
    lines.append(
        "by source, per run: "
        + ", ".join(
            f"{source} {by_source[source] / len(runs):.1f} children, {kept[source] / len(runs):.1f}"
            " accepted"
            for source in sorted(by_source)
        )
    )
    return "\n".join(lines)


def lift_line(runs: list[dict[str, Any]]) -> str:
    """Test lift and lift per 100 metric calls (means, sd over the runs), best val, the
    runs that returned the seed and those whose winner the 200 test questions show worse
    than the seed (paired, 95%), and each seed's lift."""
    lifts = [r["lift"] for r in runs]
    per_call = [100 * r["lift"] / r["metric_calls"] for r in runs]

    def sd(values: list[float]) -> float:
        return statistics.stdev(values) if len(values) > 1 else 0.0

    vals = statistics.fmean(r["best_val"] for r in runs)
    return (
        f"test lift {statistics.fmean(lifts):+.3f} (sd {sd(lifts):.3f}), per 100 calls"
        f" {statistics.fmean(per_call):+.4f} (sd {sd(per_call):.4f}), metric calls"
        f" {statistics.fmean(r['metric_calls'] for r in runs):.0f}, steps"
        f" {statistics.fmean(r['steps'] for r in runs):.1f}, best val {vals:.3f}, seed returned"
        f" {sum(r.get('seed_returned', False) for r in runs)}, shown worse than the seed"
        f" on test {sum(r.get('worse_than_seed', False) for r in runs)}; per seed"
        f" {', '.join(f'{x:+.3f}' for x in lifts)}"
    )


def paired_line(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> str:
    """The second runs' test lift minus the first's, paired by seed (95% t interval)."""
    diffs = [b["lift"] - a["lift"] for a, b in zip(first, second, strict=True)]
    mean = statistics.fmean(diffs)
    half = T95.get(len(diffs) - 1, 2.0) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]"


def setting(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    return name, json.loads(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--task", choices=sorted(mock.TASKS), default="default")
    parser.add_argument("--set", type=setting, action="append", default=[], dest="settings")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    instrument()
    settings = dict(args.settings)
    task = mock.TASKS[args.task]
    runs = [asyncio.run(one_run(task, seed, args.budget, settings)) for seed in range(args.seeds)]
    print(f"task {args.task}, budget {args.budget}, settings {settings or 'defaults'}")
    print(lift_line(runs))
    print(spend_table(runs))
    print(source_table(runs))
    print(children_table(runs))
    if args.out is not None:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "runs": runs}))


if __name__ == "__main__":
    main()
