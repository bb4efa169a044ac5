"""``emery report JOB --html``: one self-contained HTML file (inline SVG, no network)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emery.algorithms.lineage import component_diff, lineage_tree
from emery.core.events import Event
from emery.core.models import Candidate
from emery.evaluation.stats import ScoreSummary, failed_cell, failure_note, unreadable_note
from emery.reports.front_table import HEADER as FRONT_HEADER
from emery.reports.front_table import front_rows, front_sentence
from emery.reports.graph_diagram import graph_svg
from emery.reports.graph_results import report_graph
from emery.reports.job_result import JobResult
from emery.reports.plots import lineage_plot, score_over_budget, score_points
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.systems.graph.render import graph_text
from emery.systems.graph.spec import GraphConfig

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1000px;color:#222;
padding:0 1rem}h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
.muted{color:#666}table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}pre{background:#f7f7f7;padding:.7rem;overflow-x:auto;white-space:pre-wrap}
.lift{font-size:1.3rem;font-weight:600}.add{color:#116329;background:#e6ffec}
.del{color:#82071e;background:#ffebe9}.hunk{color:#0550ae}svg{max-width:100%;height:auto}
"""


@dataclass
class ReportData:
    """What the HTML report shows, read from the store."""

    result: JobResult
    events: list[Event]
    candidates: list[Candidate]
    scores: dict[str, float | None]
    config: dict[str, Any]
    failed: dict[str, str] = field(default_factory=dict)
    """Each candidate's failed val runs as a table cell (``"3 (1 timed out)"``)."""
    graph: GraphConfig | None = None
    """The best candidate's workflow graph (a graph job only)."""


def gather(store: Store, job: JobRecord, result: JobResult) -> ReportData:
    """Read the events, candidates and val scores of ``job``."""
    records = store.list_candidates(job.id, limit=None).items
    by_order = sorted(records, key=lambda record: record.ordinal)
    return ReportData(
        result=result,
        events=store.list_events(job.id),
        candidates=[record.candidate for record in by_order],
        scores={record.id: record.score for record in records},
        config=job.resolved_config or job.config,
        failed={record.id: failed_cell(record.failed, record.timeouts) for record in records},
        graph=report_graph(store, job.id, result.best_candidate),
    )


def _e(value: object) -> str:
    return html.escape(str(value))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _summary(summary: ScoreSummary | None) -> str:
    if summary is None:
        return "–"
    interval = f"95% CI {summary.low:.1%}–{summary.high:.1%}, n={summary.n}"
    interval += failure_note(summary.failed, summary.timeouts, ", ")
    interval += unreadable_note(summary.unreadable, ", ")
    return f"{summary.mean:.1%} <span class=muted>({interval})</span>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        css = ""
        if line.startswith("+") and not line.startswith("+++"):
            css = "add"
        elif line.startswith("-") and not line.startswith("---"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        lines.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _candidate_html(candidate: Candidate) -> str:
    parts = []
    for name, text in candidate.components.items():
        parts.append(f"<h3>{_e(name)}</h3><pre>{_e(text) or '(empty)'}</pre>")
    for stage, demos in candidate.demos.items():
        if demos:
            rows = [
                [_e(json.dumps(demo.inputs, ensure_ascii=False)), f"<pre>{_e(demo.output)}</pre>"]
                for demo in demos
            ]
            parts.append(
                f"<h3>{_e(stage)}: {len(demos)} demos</h3>" + _table(["inputs", "reply"], rows)
            )
    return "".join(parts)


def render_html(data: ReportData) -> str:
    """The report as one HTML document."""
    r = data.result
    sections = [
        *_heading(r),
        *_scores(r),
        "<h2>Score over budget</h2>",
        score_over_budget(score_points(data.events), r.dataset_sizes.get("val", 0)),
        *_best(r),
        *_front(r),
        *_graph(data),
        *_lineage(data),
        *_candidates(data),
        *_usage(r),
        "<h2>Config</h2>",
        f"<pre>{_e(json.dumps(data.config, indent=2, ensure_ascii=False))}</pre>",
    ]
    body = "\n".join(sections)
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>emery · {_e(r.name)} · {_e(r.job_id)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _heading(r: JobResult) -> list[str]:
    """Name, id, algorithm, state, times and error."""
    sections = [
        f"<h1>{_e(r.name)} <span class=muted>{_e(r.job_id)}</span></h1>",
        f"<p class=muted>{_e(r.algorithm)} · {_e(r.state)}"
        + (f" ({_e(r.stop_reason)})" if r.stop_reason else "")
        + (f" · started {_e(r.created_at)}" if r.created_at else "")
        + (f" · finished {_e(r.finished_at)}" if r.finished_at else "")
        + "</p>",
    ]
    if r.error:
        sections.append(f"<p><b>error:</b> {_e(r.error)}</p>")
    sections += [f"<p><b>warning:</b> {_e(warning)}</p>" for warning in r.warnings]
    return sections


def _scores(r: JobResult) -> list[str]:
    """Baseline and best on val and test, the lift, and (a dataset from traces) how many
    examples had feedback and how the judge agreed with it."""
    sections = [
        "<h2>Scores</h2>",
        _table(
            ["split", "baseline (seed)", "best"],
            [
                ["val", _pct(r.baseline_val), _pct(r.best_val)],
                ["test", _summary(r.baseline_test), _summary(r.best_test)],
            ],
        ),
    ]
    if r.lift_abs is not None:
        relative = "" if r.lift_rel is None else f" ({r.lift_rel:+.1%} relative)"
        sections.append(
            f"<p class=lift>lift on {_e(r.lift_split)}: "
            f"{r.lift_abs * 100:+.1f} points{relative}</p>"
        )
    if r.labels is not None:
        sections.append(f"<p>{_e(r.labels.line())}</p>")
    return sections


def _front(r: JobResult) -> list[str]:
    """The front of the job's objectives and what ``select`` chose."""
    if r.front is None:
        return []
    rows = [[_e(cell) for cell in row] for row in front_rows(r.front)]
    return [
        f"<h2>Front over {_e(', '.join(r.front.objectives))} on val</h2>",
        f"<p>{_e(front_sentence(r.front))}</p>",
        _table(FRONT_HEADER, rows),
    ]


def _best(r: JobResult) -> list[str]:
    """The best candidate's texts and its diff against the seed."""
    best, seed = r.best_candidate, r.seed_candidate
    if best is None:
        return []
    sections = [
        f"<h2>Best candidate <span class=muted>{_e(best.id)}</span></h2>",
        _candidate_html(best),
    ]
    if seed is not None:
        diff = component_diff(seed, best)
        sections.append("<h3>Diff against the seed</h3>")
        sections.append(_diff_html(diff) if diff else "<p class=muted>identical to the seed</p>")
    return sections


def _graph(data: ReportData) -> list[str]:
    """The best candidate's workflow graph, drawn and as text (a graph job only)."""
    graph = data.graph
    if graph is None:
        return []
    return [
        "<h2>Graph of the best candidate</h2>",
        graph_svg(graph),
        f"<details><summary>as text</summary><pre>{_e(graph_text(graph))}</pre></details>",
    ]


def _lineage(data: ReportData) -> list[str]:
    """The lineage plot and tree."""
    best = data.result.best_candidate
    best_id = best.id if best else None
    return [
        "<h2>Lineage</h2>",
        lineage_plot(data.candidates, data.scores, best_id),
        f"<pre>{_e(lineage_tree(data.candidates, data.scores, best_id=best_id))}</pre>",
    ]


def _candidates(data: ReportData) -> list[str]:
    """Every candidate, best val score first."""
    ranked = sorted(
        data.candidates,
        key=lambda c: (data.scores.get(c.id) is None, -(data.scores.get(c.id) or 0)),
    )
    rows = [
        [
            _e(c.id),
            _pct(data.scores.get(c.id)),
            data.failed.get(c.id, "0"),
            _e(c.lineage.operation),
            str(c.lineage.generation),
            "–" if c.lineage.iteration is None else str(c.lineage.iteration),
            _e(", ".join(p[:8] for p in c.lineage.parents) or "–"),
        ]
        for c in ranked
    ]
    return [
        f"<h2>Candidates <span class=muted>({len(data.candidates)})</span></h2>",
        _table(["id", "val", "failed", "operation", "generation", "iteration", "parents"], rows),
    ]


def _usage(r: JobResult) -> list[str]:
    """LM usage by role and the budget used."""
    rows = [
        [
            _e(role),
            str(u.calls),
            str(u.cache_hits),
            str(u.prompt_tokens),
            str(u.completion_tokens),
            f"${u.cost_usd:.4f}",
            f"{u.latency_s:.1f}s",
        ]
        for role, u in sorted(r.usage.items())
    ]
    header = ["role", "calls", "cached", "prompt tokens", "completion tokens", "cost", "LM time"]
    b = r.budget
    return [
        "<h2>LM usage</h2>",
        _table(header, rows),
        f"<p>metric calls {b.metric_calls}"
        + (f" of {r.limits.metric_calls}" if r.limits.metric_calls is not None else "")
        + f" · proposals {b.proposals} · iterations {b.iterations}"
        + f" · search time {b.wall_time_s:.0f}s"
        + _lm_spent(r)
        + "</p>",
    ]


def _lm_spent(r: JobResult) -> str:
    """`` · LM tokens 1290 of 1200 · LM cost $0.0130 of $0.5``: the search's, every role
    together, cache hits at what they first took (what the LM limits count)."""
    usage = (r.search_usage or r.usage).values()
    tokens = sum(u.budget_tokens for u in usage)
    text = f" · LM tokens {tokens}" + (
        f" of {r.limits.lm_tokens}" if r.limits.lm_tokens is not None else ""
    )
    cost = sum(u.budget_cost_usd for u in usage)
    if cost or r.limits.lm_cost_usd is not None:
        limit = r.limits.lm_cost_usd
        text += f" · LM cost ${cost:.4f}" + (f" of ${limit:g}" if limit is not None else "")
    return _e(text)


def write_html(data: ReportData, path: Path) -> Path:
    """Write the report to ``path`` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path
