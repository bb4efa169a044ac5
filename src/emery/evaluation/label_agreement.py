"""How many examples carry feedback labels, and how the job's judge agrees with them.

A dataset built from traces (``emery dataset from-traces``) labels the calls that got
feedback (``meta["feedback"]``). When a job on such a dataset finishes, its verifier
scores each labeled example's recorded reply (``expected``, shown to the verifier as the
output with the reference removed) and the scores are compared with the feedback by
Spearman's rank correlation over the n examples that have both. A verifier that compares
with the recorded reply itself (``preference``, ``contrastive``, ``feedback``: it needs
``expected``) cannot score that reply fairly; its agreement is not measured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from emery.core.models import Example
from emery.evaluation.rank import spearman
from emery.verifiers.base import Verifier
from emery.verifiers.feedback_score import feedback_of

MAX_JUDGED = 200
"""The most labeled examples whose recorded reply is judged (the first in dataset order)."""
CONCURRENCY = 8


class LabelAgreement(BaseModel):
    """Examples, how many had a feedback label, and the verifier's rank agreement with the
    feedback where both exist (``rho`` over ``n``; None when not measured or undefined)."""

    examples: int
    labeled: int
    n: int = 0
    rho: float | None = None
    note: str = ""

    def line(self) -> str:
        """The report's line."""
        share = self.labeled / self.examples if self.examples else 0.0
        text = f"labels: {self.labeled} of {self.examples} examples have feedback ({share:.0%})"
        if self.rho is not None:
            return text + f"; judge vs feedback: Spearman rho {self.rho:+.2f} (n = {self.n})"
        return text + (f"; judge vs feedback: {self.note}" if self.note else "")


def from_traces(examples: Sequence[Example]) -> bool:
    """Whether a dataset was built from traces (its examples name their trace)."""
    return any("trace_id" in example.meta for example in examples)


async def label_agreement(
    verifier: Verifier, examples: Sequence[Example], *, limit: int = MAX_JUDGED
) -> LabelAgreement | None:
    """The label count and the judge–feedback agreement; None for a dataset not built
    from traces."""
    if not from_traces(examples):
        return None
    labeled = [e for e in examples if feedback_of(e) is not None and e.expected is not None]
    summary = LabelAgreement(examples=len(examples), labeled=len(labeled))
    if not labeled:
        return summary
    if getattr(verifier, "needs_expected", False):
        summary.note = "not measured (the verifier compares with the recorded reply)"
        return summary
    judged = labeled[:limit]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def judge(example: Example) -> float:
        async with gate:
            bare = example.model_copy(update={"expected": None})
            return (await verifier.verify(bare, example.expected)).score

    scores = await asyncio.gather(*(judge(example) for example in judged))
    feedback = [feedback_of(example) or 0.0 for example in judged]
    summary.n = len(judged)
    summary.rho = spearman(list(scores), feedback)
    if summary.rho is None:
        summary.note = f"undefined (n = {summary.n}: too few, or constant scores or feedback)"
    return summary
