"""Several batches scored at once, with the same results and charges as one at a time.

A step that proposes several children scores their batches together
(``score_concurrently``): one ``ctx.evaluate`` per distinct candidate and split, on the
union of its batches, all running at once (an ``asyncio.TaskGroup``, so an error or a
budget stop cancels the others, the first error is raised as itself, and the runner
rolls the step back whole). The charges
happen in the order of the requests, before anything runs, so they do not depend on which
batch finishes first; no rollout runs twice when two requests share a candidate and an
example. A single request is exactly one ``ctx.evaluate``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.core.models import Candidate, Example, Split
from emery.evaluation.results import EvalResult


@dataclass(frozen=True)
class ScoreRequest:
    """A candidate to score on a batch of one split."""

    candidate: Candidate
    examples: Sequence[Example]
    split: Split


async def score_concurrently(
    ctx: SearchContext, requests: Sequence[ScoreRequest]
) -> list[EvalResult]:
    """The results of every request, in request order (see the module doc)."""
    if len(requests) == 1:
        only = requests[0]
        return [await ctx.evaluate(only.candidate, only.examples, only.split)]
    unions: dict[tuple[str, Split], tuple[Candidate, dict[str, Example]]] = {}
    for request in requests:
        key = (request.candidate.id, request.split)
        _, examples = unions.setdefault(key, (request.candidate, {}))
        examples.update({example.id: example for example in request.examples})
    try:
        async with asyncio.TaskGroup() as group:
            for (_, split), (candidate, examples) in unions.items():
                group.create_task(ctx.evaluate(candidate, list(examples.values()), split))
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None  # the runner handles a BudgetExhausted, say
    return [_from_known(ctx, request) for request in requests]


def _from_known(ctx: SearchContext, request: ScoreRequest) -> EvalResult:
    results = []
    for example in request.examples:
        result = ctx.evaluations.cached(request.candidate, example, request.split)
        if result is None:  # pragma: no cover - evaluate stored every example it was given
            raise RuntimeError(f"no result for {request.candidate.id} on {example.id}")
        results.append(result)
    return EvalResult(candidate_id=request.candidate.id, split=request.split, results=results)
