"""What a budget can separate: how many candidates, judged on how many shared examples,
to what precision. Every algorithm's plan sizes its judging batches from here.

A search keeps or drops a candidate on the paired evidence of ``algorithms.evidence``
(Newcombe's continuity-corrected interval at 95%). How fine a difference that evidence
resolves depends on the number of shared examples n and on how often the two candidates
disagree, which the plan cannot know before the run. The figures here assume a typical
pair (``Assumptions``): each candidate scores 0.6 (a mean of 0/1 scores) and their
per-example scores correlate at 0.5 (two prompts for the same model fail largely on the
same hard examples). The discordance that drives the interval, 2 p (1 - p) (1 - rho), is
within 4% of its largest value (p = 0.5) anywhere in 0.4..0.6 and within 16% in 0.3..0.7,
so the figures hold for most tasks; a pair that correlates more (0.7) needs about 40%
fewer examples, one that correlates less (0.3) about 40% more.

- ``half_width(n)``: the interval's half-width on n examples when the two candidates are
  equally good (the "+/- points" of a plan line).
- ``power(d, n)``: how often the evidence shows a candidate better when it is truly ``d``
  better, on n examples: the normal approximation of the interval's lower end at the
  expected 2 x 2 table (the interval evaluated there, the mean difference's spread
  around it). A quick simulation agrees within a few points (tests).
- ``detectable(n)``: the smallest difference shown better with probability
  ``Assumptions.power`` (4 times in 5).
- ``examples_for(d)``: the fewest examples on which ``d`` is detectable.

A plan picks the examples each candidate is judged on to detect ``Assumptions.target``
(20 points, a change that fixes one in five examples: smaller ones are not worth a
search's budget on tens of examples, larger ones are rare) and THEN counts how many
candidates the budget pays for at that size, rather than fitting many candidates by
judging each on fewer examples: ten candidates on 5 examples each (half-width about 0.5)
cannot separate anything, three on 40 can separate a 25-point difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from emery.algorithms.evidence import CONFIDENCE, from_table
from emery.core.plan_events import Separation

__all__ = [
    "TYPICAL",
    "Assumptions",
    "Separation",
    "detectable",
    "examples_for",
    "half_width",
    "power",
    "separation",
]


@dataclass(frozen=True)
class Assumptions:
    """The typical pair of candidates the plans size their batches for (module doc)."""

    score: float = 0.6
    """Each candidate's mean score (0/1 scores)."""
    correlation: float = 0.5
    """The correlation of the two candidates' per-example scores."""
    power: float = 0.8
    """How often a detectable difference must be shown better."""
    target: float = 0.2
    """The difference a plan sizes its judging batches to detect."""
    confidence: float = CONFIDENCE


TYPICAL = Assumptions()
MOST_EXAMPLES = 2000
"""``examples_for`` looks no further (a 3-point difference needs about this many)."""


def _table(difference: float, n: float, a: Assumptions) -> tuple[float, float, float, float]:
    """The expected 2 x 2 table of n pairs whose means are ``a.score`` +/- difference / 2
    (kept inside [0, 1]) and whose scores correlate at ``a.correlation``."""
    high = min(1.0, a.score + difference / 2)
    low = max(0.0, high - difference)
    spread = math.sqrt(high * (1 - high) * low * (1 - low))
    both = high * low + a.correlation * spread
    both = min(max(both, max(0.0, high + low - 1)), min(high, low))
    return both * n, (high - both) * n, (low - both) * n, (1 - high - low + both) * n


def half_width(n: int, a: Assumptions = TYPICAL) -> float:
    """The paired interval's half-width on ``n`` examples for two equally good candidates."""
    if n <= 0:
        return 1.0
    evidence = from_table(*_table(0.0, n, a), confidence=a.confidence)
    return (evidence.high - evidence.low) / 2


def power(difference: float, n: int, a: Assumptions = TYPICAL) -> float:
    """How often the evidence on ``n`` examples shows a candidate better that is truly
    ``difference`` better (module doc)."""
    if n <= 0 or difference <= 0:
        return 0.0
    both, first, second, neither = _table(difference, n, a)
    low = from_table(both, first, second, neither, confidence=a.confidence).low
    p1, p2 = first / n, second / n
    spread = math.sqrt(max(1e-12, (p1 + p2 - (p1 - p2) ** 2) / n))
    return NormalDist().cdf(low / spread)


def detectable(n: int, a: Assumptions = TYPICAL) -> float:
    """The smallest difference shown better with probability ``a.power`` on ``n`` examples
    (1.0 when none is: too few examples)."""
    if power(1.0 - 1e-9, n, a) < a.power:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (low, middle) if power(middle, n, a) >= a.power else (middle, high)
    return high


def examples_for(difference: float, a: Assumptions = TYPICAL, *, most: int = MOST_EXAMPLES) -> int:
    """The fewest examples (at most ``most``) on which ``difference`` is detectable."""
    low, high = 1, max(1, most)
    if power(difference, high, a) < a.power:
        return high
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if power(difference, middle, a) < a.power else (low, middle)
    return low


def separation(examples: int, candidates: int | None, a: Assumptions = TYPICAL) -> Separation:
    """The plan's figures: ``candidates`` judged on ``examples`` shared examples each."""
    return Separation(
        candidates=candidates,
        examples=examples,
        half_width=round(half_width(examples, a), 4),
        detectable=round(detectable(examples, a), 4),
        power=a.power,
        target=a.target,
        score=a.score,
        correlation=a.correlation,
        target_examples=examples_for(a.target, a),
    )
