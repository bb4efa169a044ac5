"""What scoring one example, or a whole split, produced."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from emery.core.models import Split
from emery.evaluation.stats import ScoreSummary, summarize
from emery.lm.base import TokenUsage
from emery.systems.base import ComponentCall


class ExampleResult(BaseModel):
    """One scored run: output, score, feedback, error, the calls behind it, usage and latency."""

    candidate_id: str
    example_id: str
    split: Split | None = None
    output: Any = None
    score: float = 0.0
    feedback: str = ""
    error: str | None = None
    calls: list[ComponentCall] = Field(default_factory=list)
    usage: TokenUsage = TokenUsage()
    lm_calls: int = 0
    latency_s: float = 0.0
    rollout_id: str | None = None
    rollout_status: str | None = None
    attempts: int = 0
    span_count: int = 0
    trace: str = ""
    """An excerpt of the last attempt's spans (LM calls, tool calls, emitted messages,
    rewards, errors) for reflection; empty when the attempt recorded nothing but the run."""


class EvalResult(BaseModel):
    """A candidate scored on a list of examples."""

    candidate_id: str
    split: Split | None = None
    results: list[ExampleResult]

    @property
    def scores(self) -> list[float]:
        return [result.score for result in self.results]

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.results) if self.results else 0.0

    def summary(self) -> ScoreSummary:
        return summarize(self.scores)

    def failures(self) -> list[ExampleResult]:
        return [result for result in self.results if result.score < 1.0]
