"""Reports: what a job produced, read from the store: its result (JSON), the text and HTML
reports with plots and its graph, event lines, and its candidates run on new input."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.reports.job_result import CandidateSummary, JobResult, build_result
    from emery.reports.report import render_report

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "render_report": "emery.reports.report",
        "CandidateSummary": "emery.reports.job_result",
        "JobResult": "emery.reports.job_result",
        "build_result": "emery.reports.job_result",
    },
)

__all__ = ["CandidateSummary", "JobResult", "build_result", "render_report"]
