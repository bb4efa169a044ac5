"""The winner confirmed on train: what val cannot tell, further train examples may.

A search that guards its winner makes a candidate the best only when a guard shows it
better than the seed at ``WINNER_CONFIDENCE``: the paired interval (``interval_passes``,
GEPA's ``two_stage``), or the interval and, for 0/1 scores, the exact sign test on the
pairs that disagree (``sign_test_passes``, MIPRO's). A candidate whose mean val tops the
best's but that val cannot show better is compared with the seed on further train examples
the search chooses (never ones the candidate was shaped by), pooled with the val pairs, in
chunks of ``WINNER_CHUNK``, and is shown better once the guard passes after a chunk. It
stops when it falls behind, when the examples run out, or when the budget cannot pay the
next chunk. Each look is at the guard's level, so an equal candidate passes more often
than at one look (about 24-27% against 13-16% in simulation for the interval,
``benchmarks/efficiency/README.md``, "The winner confirmed on train"); the stop when
behind lowers that, never raises it.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.concurrent_scoring import ScoreRequest, score_concurrently
from emery.algorithms.evidence import Evidence, paired
from emery.core.models import Candidate, Example

WINNER_CONFIDENCE = 0.6
"""Two-sided confidence (one-sided 80%) at which a guarded winner is shown better, on val
and at each look on train: at the search's 0.8 GEPA's guard returned the seed in 6-9 of 10
runs on the mock tasks at 250 calls where a helpful candidate was in the pool
(``benchmarks/efficiency/README.md``, "Two-stage acceptance")."""

WINNER_CHUNK = 10
"""Further train examples a would-be winner and its reference are scored on between looks."""


def confirmation_order(
    ctx: SearchContext, candidate: Candidate, reference: Candidate, examples: Sequence[Example]
) -> list[Example]:
    """``examples`` in the order a confirmation scores them: those ``reference`` is already
    scored on first (one metric call each), then in a fixed order of a hash of (candidate,
    example), the same on every run and resume."""
    return sorted(
        examples,
        key=lambda example: (
            ctx.evaluations.cached(reference, example, "train") is None,
            zlib.crc32(f"{candidate.id}:{example.id}".encode()),
        ),
    )


def sign_test(mine: Sequence[float], theirs: Sequence[float]) -> float | None:
    """For 0/1 scores, the exact one-sided probability of at least as many wins among the
    pairs that disagree if wins and losses were equally likely (None for graded scores)."""
    if any(score not in (0.0, 1.0) for score in (*mine, *theirs)):
        return None
    wins = sum(1 for a, b in zip(mine, theirs, strict=True) if a > b)
    losses = sum(1 for a, b in zip(mine, theirs, strict=True) if a < b)
    disagree = wins + losses
    tail = sum(math.comb(disagree, k) for k in range(wins, disagree + 1))
    return float(tail / 2**disagree)


Guard = Callable[[Sequence[float], Sequence[float], float], bool]
"""Whether the first scores are shown better than the second, paired, at a confidence."""


def interval_passes(mine: Sequence[float], theirs: Sequence[float], confidence: float) -> bool:
    """The paired interval at ``confidence`` is above 0 (GEPA's ``two_stage`` guard)."""
    return bool(mine) and paired(mine, theirs, confidence).verdict == "better"


def sign_test_passes(mine: Sequence[float], theirs: Sequence[float], confidence: float) -> bool:
    """The paired interval is above 0 and, for 0/1 scores, the exact sign test on the pairs
    that disagree agrees at the same one-sided level (MIPRO's guard). With few disagreeing
    pairs the interval alone is not enough: at 0.6 it passes 2 wins and no loss among any
    number of pairs (p = 0.25 one-sided), and on CLINC15 such a winner of MIPRO's scored
    -10.0 [-15.7, -4.1] points against its seed on test. GEPA's guard keeps the interval
    alone: with the sign test its scripted +10-point case needs a second chunk (110 metric
    calls, not 90; the evidence rule needs 100), and its mock measurements are without it."""
    if not interval_passes(mine, theirs, confidence):
        return False
    p = sign_test(mine, theirs)
    return p is None or p <= (1 - confidence) / 2


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation found: the last evidence (val and train pairs pooled), the
    train examples scored and whether the guard passed on all of them."""

    evidence: Evidence
    train_examples: int
    passed: bool = False

    @property
    def shown_better(self) -> bool:
        """Better on val and at least one chunk of train examples together."""
        return self.train_examples > 0 and self.passed


async def confirm_on_train(
    ctx: SearchContext,
    candidate: Candidate,
    reference: Candidate,
    val_pairs: tuple[Sequence[float], Sequence[float]],
    further: Sequence[Example],
    *,
    confidence: float = WINNER_CONFIDENCE,
    reserve: int = 0,
    guard: Guard = interval_passes,
) -> Confirmation:
    """``candidate`` against ``reference`` on its ``val_pairs`` (its scores, the
    reference's) joined by ``further`` train examples, a chunk at a time (module doc): at
    least one chunk, so val alone never decides here. A chunk is scored only while the
    budget pays it and ``reserve`` more; a candidate behind on val is not scored at all."""
    mine, theirs = list(val_pairs[0]), list(val_pairs[1])
    evidence = paired(mine, theirs, confidence)
    scored, passed = 0, False
    if evidence.difference < 0:  # behind (a "worse" verdict is behind too)
        return Confirmation(evidence, scored)
    for start in range(0, len(further), WINNER_CHUNK):
        chunk = further[start : start + WINNER_CHUNK]
        cost = sum(
            ctx.evaluations.cached(who, example, "train") is None
            for who in (candidate, reference)
            for example in chunk
        )
        if not ctx.budget.can_afford(cost + reserve):
            break
        requests = [
            ScoreRequest(candidate, chunk, "train"),
            ScoreRequest(reference, chunk, "train"),
        ]
        mine_now, theirs_now = await score_concurrently(ctx, requests, slots=1)
        if mine_now.ranked:  # scored over a whole batch: no per-example pairs
            break
        mine, theirs = mine + mine_now.scores, theirs + theirs_now.scores
        scored += len(chunk)
        evidence = paired(mine, theirs, confidence)
        passed = guard(mine, theirs, confidence)
        if passed or evidence.difference < 0:
            break
    return Confirmation(evidence, scored, passed)
