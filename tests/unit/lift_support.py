"""The check every scripted search test ends with: a strict lift on test."""

from __future__ import annotations

from emery.core.models import Candidate
from emery.reports.job_result import JobResult


def assert_test_lift(result: JobResult, before: float, after: float) -> Candidate:
    """The job succeeded, its seed scored ``before`` on test and its best candidate
    ``after`` (more than ``before``); the best candidate."""
    assert result.state == "succeeded"
    assert result.baseline_test is not None
    assert result.best_test is not None
    assert (result.baseline_test.mean, result.best_test.mean) == (before, after)
    assert after > before
    assert result.best_candidate is not None
    return result.best_candidate
