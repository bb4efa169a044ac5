"""What scoring one example, or a whole split, produced."""

from __future__ import annotations

from pydantic import BaseModel

from emery.core.models import Split
from emery.core.results import ExampleResult as ExampleResult
from emery.evaluation.health import failure_counts
from emery.evaluation.stats import ScoreSummary, summarize


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
        """The mean with its interval, how many runs failed or timed out, and the mean LM
        calls per example."""
        failed, timeouts = failure_counts(self.results)
        calls = sum(r.lm_calls for r in self.results) / len(self.results) if self.results else None
        update = {"failed": failed, "timeouts": timeouts, "lm_calls": calls}
        return summarize(self.scores).model_copy(update=update)

    def failures(self) -> list[ExampleResult]:
        return [result for result in self.results if result.score < 1.0]
