"""How each version of a published system does on live traffic: the runs
``/systems/NAME/run`` recorded (``reports.served``: one ``run NAME`` span each, with the
version), the feedback applications sent on their traces (``POST /api/feedback``) and the
scores an alias's scorer gave them (``reports.shadow``), by version, so a split
(``reports.aliases``) can be read: runs, failed runs, runs with feedback and the mean
feedback score with its 95% interval, runs scored and the mean score with its interval.

A shadow version's runs are a row of their own (``shadow``), with its paired comparison
to the runs it shadowed on the same requests: the mean difference of the scorer's scores
(shadow minus served) with its 95% interval, and how often the two gave the same output.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel

from emery.algorithms.evidence import paired
from emery.core.search_events import Evidence
from emery.core.spans import SpanRecord
from emery.evaluation.stats import summarize
from emery.reports import published
from emery.reports.served import VERSION_ATTRIBUTE, run_span_name
from emery.reports.shadow import SCORE_ATTRIBUTE, SHADOW_OF_ATTRIBUTE, score_span_name
from emery.store.protocol import Store
from emery.store.records import SpanFilter

PAGE = 1000
OUTPUT_ATTRIBUTE = "emery.output"


class VersionScore(BaseModel):
    """One version's live traffic (served, or run as a shadow)."""

    version: int
    shadow: bool = False
    runs: int
    failed: int
    rated: int
    """Runs with feedback (the mean of a trace's feedback scores counts once)."""
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    scored: int = 0
    """Runs the alias's scorer scored."""
    score: float | None = None
    score_low: float | None = None
    score_high: float | None = None
    against_served: Evidence | None = None
    """A shadow's scores minus those of the runs it shadowed, on the same requests."""
    same_output: float | None = None
    """The share of a shadow's runs whose output equals the shadowed run's."""


@dataclass
class _Runs:
    traces: list[str] = field(default_factory=list)
    failed: int = 0
    shadowed: dict[str, str] = field(default_factory=dict)
    """A shadow run's trace -> the trace of the run it shadowed."""


def version_scores(store: Store, name: str, since: datetime | None = None) -> list[VersionScore]:
    """Each version of ``name`` that served (or shadowed) runs since ``since``."""
    published.check_name(name)
    groups: dict[tuple[int, bool], _Runs] = defaultdict(_Runs)
    outputs: dict[str, object] = {}
    for span in _spans(store, run_span_name(name), since):
        version = span.attributes.get(VERSION_ATTRIBUTE)
        if not isinstance(version, int):
            continue
        shadow_of = span.attributes.get(SHADOW_OF_ATTRIBUTE)
        group = groups[(version, isinstance(shadow_of, str))]
        group.traces.append(span.trace_id)
        group.failed += span.status == "error"
        if isinstance(shadow_of, str):
            group.shadowed[span.trace_id] = shadow_of
        if span.status != "error":
            outputs[span.trace_id] = span.attributes.get(OUTPUT_ATTRIBUTE)
    scores = {
        span.trace_id: float(span.attributes[SCORE_ATTRIBUTE])
        for span in _spans(store, score_span_name(name), since)
        if isinstance(span.attributes.get(SCORE_ATTRIBUTE), int | float)
    }
    return [
        _row(version, shadow, group, _trace_feedback(store, group), scores, outputs)
        for (version, shadow), group in sorted(groups.items())
    ]


def _row(
    version: int,
    shadow: bool,
    group: _Runs,
    rated: list[float],
    scores: dict[str, float],
    outputs: dict[str, object],
) -> VersionScore:
    feedback = summarize(rated) if rated else None
    own = [scores[t] for t in group.traces if t in scores]
    scored = summarize(own) if own else None
    row = VersionScore(
        version=version,
        shadow=shadow,
        runs=len(group.traces),
        failed=group.failed,
        rated=len(rated),
        mean=feedback.mean if feedback else None,
        low=feedback.low if feedback else None,
        high=feedback.high if feedback else None,
        scored=len(own),
        score=scored.mean if scored else None,
        score_low=scored.low if scored else None,
        score_high=scored.high if scored else None,
    )
    if shadow:
        pairs = [(s, p) for s, p in group.shadowed.items() if s in scores and p in scores]
        if pairs:
            row.against_served = paired(
                [scores[s] for s, _ in pairs], [scores[p] for _, p in pairs]
            )
        both = [(s, p) for s, p in group.shadowed.items() if s in outputs and p in outputs]
        if both:
            row.same_output = sum(outputs[s] == outputs[p] for s, p in both) / len(both)
    return row


def _spans(store: Store, name: str, since: datetime | None) -> Iterator[SpanRecord]:
    offset = 0
    while True:
        found = SpanFilter(name=name, started_after=since)
        page = store.list_spans(found, limit=PAGE, offset=offset)
        yield from page.items
        offset += len(page.items)
        if len(page.items) < PAGE:
            return


def _trace_feedback(store: Store, group: _Runs) -> list[float]:
    """The mean feedback score of each of the group's traces that has feedback."""
    by_trace: dict[str, list[float]] = defaultdict(list)
    for start in range(0, len(group.traces), PAGE):
        for record in store.list_feedback(group.traces[start : start + PAGE]):
            by_trace[record.trace_id].append(record.score)
    return [sum(values) / len(values) for values in by_trace.values()]
