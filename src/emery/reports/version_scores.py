"""How each version of a published system does on live traffic: the runs
``/systems/NAME/run`` recorded (``reports.served``: one ``run NAME`` span each, with the
version) and the feedback applications sent on their traces (``POST /api/feedback``), by
version, so a split (``reports.aliases``) can be read: runs, failed runs, runs with
feedback, and the mean feedback score with its 95% interval.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from pydantic import BaseModel

from emery.evaluation.stats import summarize
from emery.reports import published
from emery.reports.served import VERSION_ATTRIBUTE, run_span_name
from emery.store.protocol import Store
from emery.store.records import SpanFilter

PAGE = 1000


class VersionScore(BaseModel):
    """One version's live traffic."""

    version: int
    runs: int
    failed: int
    rated: int
    """Runs with feedback (the mean of a trace's feedback scores counts once)."""
    mean: float | None = None
    low: float | None = None
    high: float | None = None


def version_scores(store: Store, name: str, since: datetime | None = None) -> list[VersionScore]:
    """Each version of ``name`` that served runs (since ``since``), by version."""
    published.check_name(name)
    runs: dict[int, list[str]] = defaultdict(list)
    failed: dict[int, int] = defaultdict(int)
    offset = 0
    while True:
        found = SpanFilter(name=run_span_name(name), started_after=since)
        page = store.list_spans(found, limit=PAGE, offset=offset)
        for span in page.items:
            version = span.attributes.get(VERSION_ATTRIBUTE)
            if not isinstance(version, int):
                continue
            runs[version].append(span.trace_id)
            failed[version] += span.status == "error"
        offset += len(page.items)
        if len(page.items) < PAGE:
            break
    scores = []
    for version in sorted(runs):
        rated = _trace_scores(store, runs[version])
        summary = summarize(rated) if rated else None
        scores.append(
            VersionScore(
                version=version,
                runs=len(runs[version]),
                failed=failed[version],
                rated=len(rated),
                mean=summary.mean if summary else None,
                low=summary.low if summary else None,
                high=summary.high if summary else None,
            )
        )
    return scores


def _trace_scores(store: Store, trace_ids: list[str]) -> list[float]:
    """The mean feedback score of each of ``trace_ids`` that has feedback."""
    by_trace: dict[str, list[float]] = defaultdict(list)
    for start in range(0, len(trace_ids), PAGE):
        for record in store.list_feedback(trace_ids[start : start + PAGE]):
            by_trace[record.trace_id].append(record.score)
    return [sum(values) / len(values) for values in by_trace.values()]
