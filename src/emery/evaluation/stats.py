"""Mean scores with 95% confidence intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

Z95 = 1.959963984540054


class ScoreSummary(BaseModel):
    """Mean of n scores and its 95% interval; how many runs failed (scored 0 for an error)
    and how many of those timed out; how many replies the parser could not read (scored 0
    as wrong answers, not failures)."""

    mean: float
    low: float
    high: float
    n: int
    failed: int = 0
    timeouts: int = 0
    unreadable: int = 0
    lm_calls: float | None = None
    """Mean LM calls per example (None where not measured)."""

    def __str__(self) -> str:
        text = f"{self.mean:.1%} (95% CI {self.low:.1%}–{self.high:.1%}, n={self.n}"
        text += failure_note(self.failed, self.timeouts, ", ")
        return text + unreadable_note(self.unreadable, ", ") + ")"


def failed_cell(failed: int, timeouts: int) -> str:
    """A table cell: ``"3 (1 timed out)"``, or ``"0"``."""
    return str(failed) + (f" ({timeouts} timed out)" if timeouts else "")


def failure_note(failed: int, timeouts: int, prefix: str = "") -> str:
    """``"3 failed (1 timed out)"`` after ``prefix``; empty when nothing failed."""
    if not failed:
        return ""
    return f"{prefix}{failed} failed" + (f" ({timeouts} timed out)" if timeouts else "")


def unreadable_note(unreadable: int, prefix: str = "") -> str:
    """``"3 unreadable"`` after ``prefix``; empty when every reply could be read."""
    return f"{prefix}{unreadable} unreadable" if unreadable else ""


def summarize(scores: Sequence[float]) -> ScoreSummary:
    """Wilson interval for 0/1 scores, normal approximation for graded scores."""
    n = len(scores)
    if n == 0:
        return ScoreSummary(mean=0.0, low=0.0, high=0.0, n=0)
    mean = sum(scores) / n
    if all(score in (0.0, 1.0) for score in scores):
        denominator = 1 + Z95**2 / n
        centre = (mean + Z95**2 / (2 * n)) / denominator
        half = Z95 * math.sqrt(mean * (1 - mean) / n + Z95**2 / (4 * n * n)) / denominator
        return ScoreSummary(
            mean=mean, low=max(0.0, centre - half), high=min(1.0, centre + half), n=n
        )
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    half = Z95 * math.sqrt(variance / n)
    return ScoreSummary(mean=mean, low=max(0.0, mean - half), high=min(1.0, mean + half), n=n)
