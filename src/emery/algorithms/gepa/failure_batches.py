"""Failure-aware reflection minibatches (``failure_share``).

A share of the minibatch the reflection is shown comes from the train examples the
parent failed (a known train score below ``perfect_score``), the rest from the others; an
example whose score for the parent is not known yet counts as one of the others. When a
pool runs short the other one fills the minibatch. Within a pool the examples shown least
often so far come first, ties in an order drawn from the search's RNG; the counts are in
the checkpointed sampler, so a resumed search draws the same minibatches.

Such a minibatch is chosen by the parent's earlier outcomes, so it favours any child on
it (the parent's reused scores there are its unlucky ones, and the examples are the hard
ones for it). GEPA therefore shows it to the reflection only and judges the child on the
uniform minibatch it draws as before (see ``Gepa._bases``).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from emery.algorithms.base import SearchContext
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.algorithms.gepa.events import GepaMinibatchSampled
from emery.algorithms.gepa.mutation import Basis, Mutation
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState, SamplerState
from emery.evaluation.eval_result import EvalResult


async def show_failures(
    ctx: SearchContext,
    state: GepaState,
    settings: GepaSettings,
    bases: list[Basis],
    rng: random.Random,
) -> list[Basis]:
    """``bases`` with the minibatch each reflection is shown (``failure_minibatch``, drawn
    in order) and the parent's results there; the parents' train scores kept."""
    assert settings.failure_share is not None
    train = {example.id: example for example in ctx.train}
    shown = []
    for basis in bases:
        ids = failure_minibatch(
            state.sampler,
            list(train),
            settings.minibatch_size,
            rng,
            known=state.entry(basis.parent.id).train_scores,
            share=settings.failure_share,
            perfect_score=settings.perfect_score,
        )
        epoch = state.sampler.epoch
        ctx.emit(GepaMinibatchSampled(iteration=basis.number, example_ids=ids, epoch=epoch))
        shown.append([train[example_id] for example_id in ids])
    requests = [
        ScoreRequest(basis.parent.candidate, batch, "train")
        for basis, batch in zip(bases, shown, strict=True)
    ]
    results = await score_concurrently(ctx, requests)
    for basis, result in zip(bases, results, strict=True):
        remember_train_scores(state, basis.parent.id, basis.before)
        remember_train_scores(state, basis.parent.id, result)
    return [
        replace(basis, shown=(batch, result))
        for basis, batch, result in zip(bases, shown, results, strict=True)
    ]


def failure_minibatch(
    sampler: SamplerState,
    train_ids: list[str],
    size: int,
    rng: random.Random,
    *,
    known: dict[str, float],
    share: float,
    perfect_score: float,
) -> list[str]:
    """``size`` train ids (fewer only if train is smaller): ``share`` of them (rounded half
    up) from the ids ``known`` below ``perfect_score``, the rest from the others."""
    size = min(size, len(train_ids))
    failed = [i for i in train_ids if known.get(i, perfect_score) < perfect_score]
    rest = [i for i in train_ids if known.get(i, perfect_score) >= perfect_score]
    from_failed = min(math.floor(share * size + 0.5), len(failed))
    from_rest = min(size - from_failed, len(rest))
    from_failed = size - from_rest
    batch = _least_shown(failed, from_failed, sampler, rng) + _least_shown(
        rest, from_rest, sampler, rng
    )
    for example in batch:
        sampler.shown[example] = sampler.shown.get(example, 0) + 1
    return batch


def _least_shown(pool: list[str], n: int, sampler: SamplerState, rng: random.Random) -> list[str]:
    """The ``n`` ids of ``pool`` shown least often, ties in a random order."""
    ties = {example: rng.random() for example in pool}
    ranked = sorted(pool, key=lambda example: (sampler.shown.get(example, 0), ties[example]))
    return ranked[:n]


def remember_judged(state: GepaState, settings: GepaSettings, judged: list[Mutation]) -> None:
    """With ``failure_share``, keep each parent's train scores on the examples its child
    was judged on."""
    if settings.failure_share is not None:
        for mutation in judged:
            remember_train_scores(state, mutation.parent.id, mutation.before)


def remember_train_scores(state: GepaState, candidate_id: str, result: EvalResult) -> None:
    """Keep a pool member's train scores in ``result`` (its ``train_scores``)."""
    state.entry(candidate_id).train_scores.update(scores_by_example(result))


def scores_by_example(result: EvalResult) -> dict[str, float]:
    """Example id → score in ``result``."""
    return {item.example_id: item.score for item in result.results}
