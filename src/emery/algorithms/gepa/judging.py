"""The verdict evidence of a step's children: each against its parent, paired on its
minibatch, with more examples while that cannot decide.

A child's batch doubles while the evidence is undecided, the batch holds fewer than ``cap``
examples and the child is ahead (or tied, once, with ``extend_ties``); a child behind its
parent is not worth more calls. The children of one step are judged in lock step: each
round draws every still-undecided child's further examples in child order (the sampler
and the RNG advance the same way whatever finishes first), then scores all of them at once.
A child is extended only while the budget also holds all of val for it and for every
other child of the step that is shown better or extended before it. A round's evaluations
share the lanes of the step's batches (``slots``: ``concurrent_scoring``), so a round with
one child left runs wider.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.algorithms.evidence import Evidence, paired
from emery.algorithms.gepa.batches import MinibatchSampler
from emery.algorithms.gepa.mutation import Mutation, draw_extension, extended
from emery.algorithms.gepa.state import GepaState
from emery.core.models import Example
from emery.evaluation.eval_result import EvalResult


@dataclass
class Judged:
    """One child under judgement: its mutation and results so far, and the last evidence."""

    mutation: Mutation
    after: EvalResult
    evidence: Evidence
    tie_extended: bool = False
    decided: bool = False


async def judge(
    ctx: SearchContext,
    state: GepaState,
    mutation: Mutation,
    after: EvalResult,
    rng: random.Random,
    *,
    cap: int,
    confidence: float,
    extend_ties: bool,
) -> tuple[Mutation, EvalResult, Evidence]:
    """One child judged (``judge_all`` of one)."""
    (judged,) = await judge_all(
        ctx,
        state,
        [(mutation, after)],
        rng,
        cap=cap,
        confidence=confidence,
        extend_ties=extend_ties,
    )
    return judged.mutation, judged.after, judged.evidence


async def judge_all(
    ctx: SearchContext,
    state: GepaState,
    children: list[tuple[Mutation, EvalResult]],
    rng: random.Random,
    *,
    cap: int,
    confidence: float,
    extend_ties: bool,
    slots: int = 1,
    sampler: MinibatchSampler | None = None,
) -> list[Judged]:
    """Every child judged (module doc), in the order given, with the mutation and the
    results on its whole batch, and the last evidence; ``sampler`` draws the further
    examples (default: ``epoch_shuffled``)."""
    judged = [
        Judged(mutation, after, paired(after.scores, mutation.before.scores, confidence))
        for mutation, after in children
    ]
    while True:
        rounds: list[tuple[Judged, list[Example]]] = []
        shown_better = sum(item.decided and item.evidence.verdict == "better" for item in judged)
        reserved = shown_better * len(ctx.val)  # each will be scored on all of val
        for item in judged:
            if item.decided:
                continue
            item.evidence = paired(item.after.scores, item.mutation.before.scores, confidence)
            extra = _extension(ctx, state, item, rng, cap, extend_ties, reserved, sampler)
            if not extra:
                item.decided = True
                continue
            reserved += 2 * len(extra) + len(ctx.val)
            rounds.append((item, extra))
        if not rounds:
            return judged
        await _score_round(ctx, rounds, slots)


def _extension(
    ctx: SearchContext,
    state: GepaState,
    item: Judged,
    rng: random.Random,
    cap: int,
    extend_ties: bool,
    reserved: int,
    sampler: MinibatchSampler | None,
) -> list[Example]:
    """The further examples to judge ``item`` on, or none: it is decided."""
    evidence, size = item.evidence, len(item.mutation.batch)
    tied = evidence.difference == 0
    if (
        evidence.verdict != "undecided"
        or size >= cap
        or evidence.difference < 0
        or (tied and (not extend_ties or item.tie_extended))
    ):
        return []
    item.tie_extended = item.tie_extended or tied
    # the batch doubles: few rounds, each filling the rollout slots
    return draw_extension(
        ctx,
        state,
        item.mutation,
        rng,
        size=size,
        room=cap - size,
        reserved=reserved,
        sampler=sampler,
    )


async def _score_round(
    ctx: SearchContext, rounds: list[tuple[Judged, list[Example]]], slots: int
) -> None:
    """Parents and children of one round scored on their further examples, all at once
    (a lone child too: its parent's rollouts and its own overlap, charged parent first),
    sharing the lanes of the step's ``slots`` batches."""
    requests = [
        request
        for item, extra in rounds
        for request in (
            ScoreRequest(item.mutation.parent.candidate, extra, "train"),
            ScoreRequest(item.mutation.child, extra, "train"),
        )
    ]
    results = await score_concurrently(ctx, requests, slots=slots)
    for index, (item, extra) in enumerate(rounds):
        before_more, after_more = results[2 * index], results[2 * index + 1]
        item.mutation, item.after = extended(
            item.mutation, item.after, extra, before_more, after_more
        )
