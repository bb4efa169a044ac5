"""The text report of a job result: plain text, for the terminal and for ``results/*.txt``."""

from __future__ import annotations

import textwrap

from emery.algorithms.lineage import component_diff
from emery.core.models import Candidate
from emery.evaluation.stats import ScoreSummary, failed_cell
from emery.reports.front_table import HEADER as FRONT_HEADER
from emery.reports.front_table import front_rows, front_sentence
from emery.reports.job_result import JobResult


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _summary(summary: ScoreSummary | None) -> str:
    return "-" if summary is None else str(summary)


def _calls(summary: ScoreSummary | None) -> str:
    return "-" if summary is None or summary.lm_calls is None else f"{summary.lm_calls:.2f}"


def _limit(value: float | None, unit: str = "") -> str:
    return "no limit" if value is None else f"{value:g}{unit}"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def _candidate_block(candidate: Candidate) -> list[str]:
    lines = []
    for name, text in candidate.components.items():
        lines.append(f"  [{name}]")
        body = text if text.strip() else "(empty)"
        lines.extend(textwrap.indent(body, "    ").splitlines())
    for stage, demos in candidate.demos.items():
        if not demos:
            continue
        lines.append(f"  [{stage} demos: {len(demos)}]")
        for demo in demos:
            inputs = ", ".join(f"{k}={v!r}" for k, v in demo.inputs.items())
            lines.append(
                f"    - {textwrap.shorten(inputs, 100)} → {textwrap.shorten(demo.output, 60)}"
            )
    return lines


def render_report(result: JobResult) -> str:
    """The whole report as text."""
    lines = [
        *_heading(result),
        *_scores(result),
        *_best(result),
        *_front(result),
        *_top_candidates(result),
        *_budget(result),
        *_usage(result),
    ]
    if result.files:
        lines += ["", "Files"]
        lines += [f"  {kind}: {path}" for kind, path in result.files.items()]
    return "\n".join(lines) + "\n"


def _heading(result: JobResult) -> list[str]:
    """Job, algorithm, state, error and dataset sizes."""
    head = f"Job {result.job_id} ({result.name}) · {result.algorithm} · {result.state}"
    if result.stop_reason:
        head += f" ({result.stop_reason})"
    lines = [head]
    if result.error:
        lines.append(f"error: {result.error}")
    lines += [f"warning: {warning}" for warning in result.warnings]
    if result.dataset_sizes:
        sizes = ", ".join(f"{split} {n}" for split, n in result.dataset_sizes.items())
        lines.append(f"dataset: {sizes}")
    if result.labels is not None:
        lines.append(result.labels.line())
    return lines


def _scores(result: JobResult) -> list[str]:
    """Baseline and best on val (and test), and the lift."""
    rows = [
        ["split", "baseline", "best"],
        ["val", _pct(result.baseline_val), _pct(result.best_val)],
    ]
    if result.baseline_test is not None or result.best_test is not None:
        rows.append(["test", _summary(result.baseline_test), _summary(result.best_test)])
    calls = [_calls(result.baseline_test), _calls(result.best_test)]
    if any(cell != "-" for cell in calls):
        rows.append(["LM calls per test example", *calls])
    lines = ["", "Scores", *_table(rows)]
    if result.lift_abs is not None:
        relative = "" if result.lift_rel is None else f" ({result.lift_rel:+.1%} relative)"
        lines.append(
            f"  lift on {result.lift_split}: {result.lift_abs * 100:+.1f} points{relative}"
        )
    return lines + _references(result)


def _references(result: JobResult) -> list[str]:
    """Each reference's test score and the best's lift over it."""
    lines = []
    for name, summary in result.references_test.items():
        line = f"  reference {name!r} on test: {_summary(summary)}"
        if result.best_test is not None:
            line += f"; best vs {name}: {(result.best_test.mean - summary.mean) * 100:+.1f} points"
        lines.append(line)
    return lines


def _best(result: JobResult) -> list[str]:
    """The best candidate, where it came from, and its diff against the seed."""
    best, seed = result.best_candidate, result.seed_candidate
    if best is None:
        return []
    lineage = best.lineage
    origin = lineage.operation
    if lineage.parents:
        origin += f", generation {lineage.generation}, parents {', '.join(lineage.parents)}"
    same = seed is not None and best.id == seed.id
    lines = ["", f"Best candidate {best.id} ({'the seed' if same else origin})"]
    lines += _candidate_block(best)
    if seed is not None and not same:
        diff = component_diff(seed, best)
        if diff:
            lines += ["", "Diff against the seed"]
            lines += textwrap.indent(diff, "  ").splitlines()
    return lines


def _front(result: JobResult) -> list[str]:
    """The candidates on the front of the job's objectives and what ``select`` chose."""
    if result.front is None:
        return []
    rows = [FRONT_HEADER, *front_rows(result.front)]
    title = f"Front over {', '.join(result.front.objectives)} on val (means per example)"
    return ["", title, f"  {front_sentence(result.front)}", *_table(rows)]


def _top_candidates(result: JobResult) -> list[str]:
    """The top candidates on val."""
    if not result.top_candidates:
        return []
    rows = [["id", "val", "n", "failed", "unreadable", "operation", "gen", "parents"]]
    for summary in result.top_candidates:
        rows.append(
            [
                summary.id,
                _pct(summary.score),
                str(summary.n),
                failed_cell(summary.failed, summary.timeouts),
                str(summary.unreadable),
                summary.operation,
                str(summary.generation),
                ", ".join(p[:8] for p in summary.parents) or "-",
            ]
        )
    return ["", f"Top candidates on val ({result.candidates_total} in all)", *_table(rows)]


def _budget(result: JobResult) -> list[str]:
    """The budget used against its limits."""
    budget, limits = result.budget, result.limits
    return [
        "",
        "Budget used",
        f"  metric calls {budget.metric_calls} of {_limit(limits.metric_calls)}"
        f" ({result.evaluations_paid} rollouts stored by this job)",
        f"  proposals {budget.proposals} of {_limit(limits.max_proposals)},"
        f" iterations {budget.iterations},"
        f" search time {budget.wall_time_s:.1f}s of {_limit(limits.wall_time_s, 's')}",
        *_lm_spent(result),
    ]


def _lm_spent(result: JobResult) -> list[str]:
    """LM tokens and cost against their limits, by role (every role counts against one
    limit; calls the LM cache answered count at what they took when first made)."""
    usage, limits = sorted((result.search_usage or result.usage).items()), result.limits
    if not usage and limits.lm_tokens is None and limits.lm_cost_usd is None:
        return []
    tokens = sum(u.budget_tokens for _, u in usage)
    cached = sum(u.cached_tokens for _, u in usage)
    by_role = ", ".join(f"{role} {u.budget_tokens}" for role, u in usage)
    from_cache = f"; {cached} answered from the cache" if cached else ""
    in_all = sum(u.budget_tokens for u in result.usage.values())
    tests = f"; {in_all} with the test scoring" if result.search_usage and in_all != tokens else ""
    lines = [
        f"  LM tokens {tokens} of {_limit(limits.lm_tokens)} in the search, all roles together"
        f" ({by_role or 'no calls'}{from_cache}){tests}"
    ]
    cost = sum(u.budget_cost_usd for _, u in usage)
    if cost or limits.lm_cost_usd is not None:
        costs = ", ".join(f"{role} ${u.budget_cost_usd:.4f}" for role, u in usage)
        limit = "no limit" if limits.lm_cost_usd is None else f"${limits.lm_cost_usd:g}"
        lines.append(
            f"  LM cost ${cost:.4f} of {limit} in the search, all roles together ({costs})"
        )
    return lines


def _usage(result: JobResult) -> list[str]:
    """LM usage by role."""
    if not result.usage:
        return []
    rows = [["role", "calls", "cached", "prompt tok", "completion tok", "cost", "LM time"]]
    for role, usage in sorted(result.usage.items()):
        rows.append(
            [
                role,
                str(usage.calls),
                str(usage.cache_hits),
                str(usage.prompt_tokens),
                str(usage.completion_tokens),
                f"${usage.cost_usd:.4f}",
                f"{usage.latency_s:.1f}s",
            ]
        )
    return ["", "LM usage", *_table(rows)]
