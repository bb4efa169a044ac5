"""Statistical comparison of candidates on shared examples: paired evidence and racing.

A search must not keep, promote or drop a candidate on a difference its examples cannot
resolve: at p = 0.6 a 5-example score has a standard error of 0.22. ``paired`` compares
two candidates' scores on the SAME examples and says ``better``, ``worse`` or
``undecided``; ``race`` scores several candidates on a growing shared prefix of examples
and drops those the evidence shows worse than the leader, until one is left or the
examples (or the budget) run out.

The interval (``paired``) depends on the scores:

- 0/1 scores: Newcombe's hybrid score interval for a difference of paired proportions with
  continuity correction (Newcombe 1998, Stat. Med. 17:2635, method 11): the
  continuity-corrected Wilson intervals of both means, combined through the (corrected)
  correlation of the pairs. It stays inside [-1, 1], is never degenerate (two candidates
  that agree on all of 10 examples get about +/-0.19, not a point) and errs on the
  conservative side: in simulation (n = 3..40, means 0.2..0.95, correlation 0..0.9) it
  covered the true difference at least 95% of the time, where the uncorrected method 10
  fell to 90% at n = 5. It still decides a clear case early: 3 wins in 3 pairs is
  ``better``.
- Graded scores (any score strictly between 0 and 1: F1, rubric judges, partial credit):
  a paired t interval on the per-example differences, whose variance counts one more pair
  half a point apart, so equal differences on every example still give an interval (+0.25
  on each of 3 examples is undecided, on each of 10 ``better``). Treating graded scores as
  0/1 outcomes instead had almost no power: a steady +0.2 on 40 examples was shown better
  in 11% of simulated runs (the t interval: all). In simulation (smooth, quarter-step,
  mostly-equal and 0/0.5/1 judge-like scores, n = 3..40) this interval covered the true
  difference in at least 93% of runs and called an equal pair ``better`` in at most 2.8%.

The confidence level is two-sided (``CONFIDENCE`` = 0.95 by default): a verdict ``better``
or ``worse`` is wrong at most 2.5% of the time when the candidates are equally good.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Protocol

from emery.algorithms.base import SearchContext
from emery.core.models import Candidate, Example, Split
from emery.core.search_events import Evidence, Verdict

CONFIDENCE = 0.95

__all__ = [
    "CONFIDENCE",
    "ContextScorer",
    "Evidence",
    "RaceResult",
    "Scorer",
    "Verdict",
    "flipped",
    "from_table",
    "paired",
    "race",
]


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _wilson(successes: float, n: float, z: float) -> tuple[float, float]:
    """The continuity-corrected Wilson score interval of a proportion (Newcombe's method 4)."""
    p = successes / n
    spread = 2 * (n + z * z)
    low = (
        2 * n * p
        + z * z
        - 1
        - z * math.sqrt(max(0.0, z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))
    )
    high = (
        2 * n * p
        + z * z
        + 1
        + z * math.sqrt(max(0.0, z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))
    )
    return (0.0 if p <= 0 else max(0.0, low / spread)), (1.0 if p >= 1 else min(1.0, high / spread))


def paired(
    first: Sequence[float], second: Sequence[float], confidence: float = CONFIDENCE
) -> Evidence:
    """How ``first`` compares with ``second`` on the same examples (``first[i]`` and
    ``second[i]`` are the two candidates' scores, in [0, 1], on example i): the mean of
    ``first - second``, its interval at ``confidence`` (module doc) and the verdict,
    ``better`` when the whole interval is above 0, ``worse`` when below, else ``undecided``."""
    if len(first) != len(second):
        raise ValueError(f"paired scores differ in length: {len(first)} and {len(second)}")
    n = len(first)
    if n == 0:
        return Evidence(n=0, difference=0.0, low=-1.0, high=1.0, verdict="undecided")
    a = [min(1.0, max(0.0, s)) for s in first]
    b = [min(1.0, max(0.0, s)) for s in second]
    if any(0.0 < x < 1.0 for x in (*a, *b)):
        return _graded(a, b, confidence)
    both = sum(x * y for x, y in zip(a, b, strict=True))
    only_first = sum(x * (1 - y) for x, y in zip(a, b, strict=True))
    only_second = sum((1 - x) * y for x, y in zip(a, b, strict=True))
    return from_table(
        both, only_first, only_second, n - both - only_first - only_second, confidence
    )


PSEUDO_PAIR_SPREAD = 0.25
"""The squared deviation of the one extra pair a graded interval's variance counts."""


def _graded(first: Sequence[float], second: Sequence[float], confidence: float) -> Evidence:
    """``paired`` for graded scores: a t interval on the differences (module doc)."""
    differences = [x - y for x, y in zip(first, second, strict=True)]
    n = len(differences)
    mean = sum(differences) / n
    spread = sum((d - mean) ** 2 for d in differences) + PSEUDO_PAIR_SPREAD
    half = _t_quantile(0.5 + confidence / 2, max(1, n - 1)) * math.sqrt(spread / n) / math.sqrt(n)
    low, high = max(-1.0, mean - half), min(1.0, mean + half)
    verdict: Verdict = "better" if low > 0 else "worse" if high < 0 else "undecided"
    return Evidence(
        n=n, difference=mean, low=low, high=high, verdict=verdict, confidence=confidence
    )


def _t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher
    expansion around the normal quantile (within 0.003 of the exact value from 3 on)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z, v = _z(2 * p - 1), float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def from_table(
    both: float,
    only_first: float,
    only_second: float,
    neither: float,
    confidence: float = CONFIDENCE,
) -> Evidence:
    """``paired``'s evidence from the 2 x 2 table of the pairs (counts, fractional allowed):
    examples both candidates pass, only the first, only the second, neither."""
    n = both + only_first + only_second + neither
    if n <= 0:
        return Evidence(n=0, difference=0.0, low=-1.0, high=1.0, verdict="undecided")
    p1, p2 = (both + only_first) / n, (both + only_second) / n
    difference = p1 - p2
    z = _z(confidence)
    l1, u1 = _wilson(both + only_first, n, z)
    l2, u2 = _wilson(both + only_second, n, z)
    margins = (both + only_first) * (only_second + neither) * (both + only_second)
    margins *= only_first + neither
    association = both * neither - only_first * only_second
    if association > 0:  # the continuity correction of the correlation (method 11)
        association = max(0.0, association - n / 2)
    phi = association / math.sqrt(margins) if margins > 0 else 0.0
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    low, high = max(-1.0, difference - below), min(1.0, difference + above)
    verdict: Verdict = "better" if low > 0 else "worse" if high < 0 else "undecided"
    return Evidence(
        n=round(n),
        difference=difference,
        low=low,
        high=high,
        verdict=verdict,
        confidence=confidence,
    )


def flipped(evidence: Evidence) -> Evidence:
    """The same comparison seen from the other candidate."""
    opposite: dict[Verdict, Verdict] = {
        "better": "worse",
        "worse": "better",
        "undecided": "undecided",
    }
    return evidence.model_copy(
        update={
            "difference": -evidence.difference,
            "low": -evidence.high,
            "high": -evidence.low,
            "verdict": opposite[evidence.verdict],
        }
    )


# -- racing ----------------------------------------------------------------------------------


class Scorer(Protocol):
    """What a race needs from the search: scores on examples, and what new ones cost."""

    async def scores(self, candidate_id: str, example_ids: Sequence[str]) -> list[float]:
        """``candidate_id``'s score on each of ``example_ids``, in order."""
        ...

    def cost(self, candidate_id: str, example_ids: Sequence[str]) -> int:
        """Metric calls scoring ``candidate_id`` on ``example_ids`` would charge."""
        ...

    def can_afford(self, calls: int) -> bool: ...


@dataclass
class RaceResult:
    """How a race ended: the leader (best mean on the last shared prefix), the survivors
    (leader first, then by mean), each racer's evidence against the leader (a dropped one's
    from the round that dropped it), the survivors' means on the last prefix, the number
    of shared examples, and the rounds run."""

    leader: str
    survivors: list[str]
    evidence: dict[str, Evidence]
    means: dict[str, float]
    n: int
    rounds: int
    dropped: dict[str, int] = field(default_factory=dict)
    """Racer → the shared example count at which the evidence showed it worse."""

    @property
    def separated(self) -> bool:
        return len(self.survivors) == 1


async def race(
    racers: Sequence[str],
    examples: Sequence[str],
    scorer: Scorer,
    *,
    start: int,
    cap: int | None = None,
    confidence: float = CONFIDENCE,
) -> RaceResult:
    """Successive halving by evidence: score every racer on the first ``start`` examples,
    drop those whose interval against the leader lies below zero, double the shared
    prefix for the rest, and repeat until one racer is left, the prefix reaches ``cap``
    (default: all ``examples``), or the budget cannot pay for the next round.

    A tie for the lead goes to the racer listed first, so list an incumbent first. Scores
    the search already has (an incumbent's full-val scores) cost nothing."""
    if not racers:
        raise ValueError("a race needs racers")
    limit = min(len(examples), cap if cap is not None else len(examples))
    n = max(1, min(start, limit))
    alive = list(dict.fromkeys(racers))
    table: dict[str, list[float]] = {}
    dropped: dict[str, int] = {}
    evidence: dict[str, Evidence] = {}
    rounds, scored_n = 0, 0
    while True:
        prefix = list(examples[:n])
        cost = sum(scorer.cost(racer, prefix) for racer in alive)
        if cost and not scorer.can_afford(cost):
            break
        for racer in alive:
            table[racer] = await scorer.scores(racer, prefix)
        rounds, scored_n = rounds + 1, n
        leader = _leader(alive, table)
        for racer in [r for r in alive if r != leader]:
            against = paired(table[racer], table[leader], confidence)
            if against.verdict == "worse":
                alive.remove(racer)
                dropped[racer], evidence[racer] = n, against
        if len(alive) == 1 or n >= limit:
            break
        n = min(limit, 2 * n)
    if not scored_n:
        return RaceResult(alive[0], alive, {}, {}, 0, 0)
    leader = _leader(alive, table)
    for racer in alive:
        evidence[racer] = paired(table[racer], table[leader], confidence)
    means = {racer: _mean(table[racer]) for racer in alive}
    survivors = sorted(alive, key=lambda r: (r != leader, -means[r], alive.index(r)))
    return RaceResult(leader, survivors, evidence, means, scored_n, rounds, dropped)


def _mean(scores: Sequence[float]) -> float:
    return sum(scores) / len(scores) if scores else 0.0


def _leader(alive: Sequence[str], table: Mapping[str, Sequence[float]]) -> str:
    return max(alive, key=lambda r: (_mean(table[r]), -alive.index(r)))


class ContextScorer:
    """A ``Scorer`` over a search context: ``candidates`` by id, scored on ``split``
    (the evaluation cache answers what was scored before, free); ``reserve`` metric calls
    of the budget are kept for what the search does after the race."""

    def __init__(
        self,
        ctx: SearchContext,
        candidates: Mapping[str, Candidate],
        examples: Sequence[Example],
        split: Split,
        *,
        reserve: int = 0,
    ) -> None:
        self.ctx = ctx
        self.candidates = candidates
        self.examples = {example.id: example for example in examples}
        self.split = split
        self.reserve = reserve

    async def scores(self, candidate_id: str, example_ids: Sequence[str]) -> list[float]:
        batch = [self.examples[i] for i in example_ids]
        result = await self.ctx.evaluate(self.candidates[candidate_id], batch, self.split)
        return result.scores

    def cost(self, candidate_id: str, example_ids: Sequence[str]) -> int:
        candidate = self.candidates[candidate_id]
        cached = self.ctx.evaluations.cached
        return sum(
            1 for i in example_ids if cached(candidate, self.examples[i], self.split) is None
        )

    def can_afford(self, calls: int) -> bool:
        return self.ctx.budget.can_afford(calls + self.reserve)
