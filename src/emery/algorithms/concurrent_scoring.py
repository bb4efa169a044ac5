"""Several batches scored at once, with the same results and charges as one at a time.

A step that proposes several children scores their batches together
(``score_concurrently``): one ``ctx.evaluate`` per distinct candidate and split, on the
union of its batches, all running at once (an ``asyncio.TaskGroup``, so an error or a
budget stop cancels the others, the first error is raised as itself, and the search
loop rolls the step back whole: ``run_all``, which the proposers' LM calls use too). The charges
happen in the order of the requests, before anything runs, so they do not depend on which
batch finishes first; no rollout runs twice when two requests share a candidate and an
example. A single request is exactly one ``ctx.evaluate``.

``slots`` k > 1 says the requests stand for k batches of a step (``proposals_per_step``):
they share k x ``[runtime] concurrency`` rollouts at once, each of their evaluations
getting an equal part and never less than ``[runtime] concurrency``; so when fewer than k
evaluations are left in a step (one accepted child on val, one child's evidence round), they
run wider instead of leaving the step's other lanes idle. Only the timing changes: the
results, charges and order are the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from emery.algorithms.base import SearchContext
from emery.core.models import Candidate, Example, Split
from emery.evaluation.eval_result import EvalResult


@dataclass(frozen=True)
class ScoreRequest:
    """A candidate to score on a batch of one split."""

    candidate: Candidate
    examples: Sequence[Example]
    split: Split


async def score_concurrently(
    ctx: SearchContext, requests: Sequence[ScoreRequest], *, slots: int = 1
) -> list[EvalResult]:
    """The results of every request, in request order (see the module doc)."""
    if len(requests) == 1:
        only = requests[0]
        lanes = shared_lanes(ctx, slots, 1)
        return [await ctx.evaluate(only.candidate, only.examples, only.split, lanes)]
    unions: dict[tuple[str, Split], tuple[Candidate, dict[str, Example]]] = {}
    for request in requests:
        key = (request.candidate.id, request.split)
        _, examples = unions.setdefault(key, (request.candidate, {}))
        examples.update({example.id: example for example in request.examples})
    lanes = shared_lanes(ctx, slots, len(unions))
    await run_all(
        [
            ctx.evaluate(candidate, list(examples.values()), split, lanes)
            for (_, split), (candidate, examples) in unions.items()
        ]
    )
    return [_from_known(ctx, request) for request in requests]


def shared_lanes(ctx: SearchContext, slots: int, evaluations: int) -> int | None:
    """The rollouts at once for each of ``evaluations`` sharing ``slots`` batches' lanes
    (None: ``[runtime] concurrency``, as for one batch)."""
    if slots <= 1:
        return None
    concurrency = ctx.evaluations.evaluator.concurrency
    return max(concurrency, concurrency * slots // max(1, evaluations))


def _from_known(ctx: SearchContext, request: ScoreRequest) -> EvalResult:
    results = []
    for example in request.examples:
        result = ctx.evaluations.cached(request.candidate, example, request.split)
        if result is None:  # pragma: no cover - evaluate stored every example it was given
            raise RuntimeError(f"no result for {request.candidate.id} on {example.id}")
        results.append(result)
    return EvalResult(candidate_id=request.candidate.id, split=request.split, results=results)


T = TypeVar("T")


async def run_all(work: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Every coroutine run at once, their results in order. They start in order (so what
    each does before its first wait happens in order); the first error cancels the others
    and is raised as itself (the search loop tells a ``BudgetExhausted`` by its type)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(item) for item in work]
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None
    return [task.result() for task in tasks]
