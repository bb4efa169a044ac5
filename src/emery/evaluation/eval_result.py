"""What scoring one example, or a whole split, produced."""

from __future__ import annotations

from pydantic import BaseModel

from emery.core.example_result import ExampleResult
from emery.core.models import Split
from emery.evaluation.health import failure_counts, unreadable_count
from emery.evaluation.rank import rank_agreement, rank_interval
from emery.evaluation.stats import ScoreSummary, summarize


class EvalResult(BaseModel):
    """A candidate scored on a list of examples. Its score (``mean``) is the mean of the
    per-example scores, or, when the results carry rank pairs (a verifier graph with
    ``agreement = "rank"``), the batch's rank agreement (``evaluation.rank``)."""

    candidate_id: str
    split: Split | None = None
    results: list[ExampleResult]

    @property
    def scores(self) -> list[float]:
        return [result.score for result in self.results]

    @property
    def ranked(self) -> bool:
        """Whether the batch is scored by rank agreement (some result has a rank pair)."""
        return any(result.ranked is not None for result in self.results)

    @property
    def mean(self) -> float:
        """The batch's score: the mean score, or its rank agreement (class docstring)."""
        if self.ranked:
            return rank_agreement([result.ranked for result in self.results])
        return sum(self.scores) / len(self.results) if self.results else 0.0

    @property
    def total(self) -> float:
        """The batch's score times its size: the sum of the scores when the score is a mean
        (what minibatch comparisons add up)."""
        return self.mean * len(self.results) if self.ranked else sum(self.scores)

    def summary(self) -> ScoreSummary:
        """The mean with its interval, how many runs failed or timed out, how many replies
        could not be read, and the mean LM calls per example."""
        failed, timeouts = failure_counts(self.results)
        calls = sum(r.lm_calls for r in self.results) / len(self.results) if self.results else None
        update: dict[str, float | int | None] = {
            "failed": failed,
            "timeouts": timeouts,
            "unreadable": unreadable_count(self.results),
            "lm_calls": calls,
        }
        if self.ranked:
            pairs = [result.ranked for result in self.results]
            low, high = rank_interval(pairs)
            update |= {"mean": rank_agreement(pairs), "low": low, "high": high}
        return summarize(self.scores).model_copy(update=update)

    def joined(self, more: EvalResult) -> EvalResult:
        """This result with ``more``'s results after its own (the same candidate, more
        examples)."""
        return self.model_copy(update={"results": self.results + more.results})

    def failures(self) -> list[ExampleResult]:
        return [result for result in self.results if result.score < 1.0]
