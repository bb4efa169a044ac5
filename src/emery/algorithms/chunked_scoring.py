"""Candidates scored chunk by chunk against a reference's stored scores, the clear losers
stopped early.

Each candidate is scored ``CHUNK`` examples at a time (all going candidates together,
sharing the lanes of ``slots`` batches); after each chunk its results are paired with the
reference's scores on the same examples (``algorithms.evidence.paired``), and a candidate
the evidence shows worse stops there: its further examples are not paid for. A candidate
is never stopped after its last chunk, nor when its batch is scored by rank agreement (no
per-example pairs). GEPA's ``two_stage`` val gate (a child against its parent) and MIPRO's
trials (a combination against the best so far) both score this way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.algorithms.evidence import Evidence, paired
from emery.core.models import Candidate, Example, Split
from emery.evaluation.eval_result import EvalResult

CHUNK = 10
"""Examples a candidate is scored on between two looks at its evidence."""


@dataclass
class ChunkedRun:
    """One candidate on its way through the examples: the reference's scores by example
    id, its results so far, the last evidence and whether it stopped early."""

    candidate: Candidate
    reference: Mapping[str, float]
    results: EvalResult | None = None
    evidence: Evidence | None = None
    stopped: bool = False


async def score_in_chunks(
    ctx: SearchContext,
    runs: Sequence[ChunkedRun],
    examples: Sequence[Example],
    split: Split,
    *,
    confidence: float,
    slots: int = 1,
) -> None:
    """Score each of ``runs`` on ``examples`` chunk by chunk (module doc), in place."""
    for start in range(0, len(examples), CHUNK):
        going = [run for run in runs if not run.stopped]
        if not going:
            break
        chunk = list(examples[start : start + CHUNK])
        requests = [ScoreRequest(run.candidate, chunk, split) for run in going]
        results = await score_concurrently(ctx, requests, slots=slots)
        last = start + CHUNK >= len(examples)
        for run, result in zip(going, results, strict=True):
            run.results = result if run.results is None else run.results.joined(result)
            run.evidence = against(run.results, run.reference, confidence)
            worse = run.evidence is not None and run.evidence.verdict == "worse"
            run.stopped = worse and not last


def against(
    results: EvalResult, reference: Mapping[str, float], confidence: float
) -> Evidence | None:
    """``results`` paired with the reference's scores on the same examples (None where the
    reference has no score on them, or the batch is scored by rank agreement)."""
    if results.ranked:
        return None
    pairs = [
        (r.score, reference[r.example_id]) for r in results.results if r.example_id in reference
    ]
    if not pairs:
        return None
    mine, theirs = zip(*pairs, strict=True)
    return paired(list(mine), list(theirs), confidence)
