"""Rank agreement of a batch: how a verifier graph scored with ``agreement = "rank"`` is
judged (``verifiers.agreement.RankAgreement``).

Rank correlation is a property of a batch, not of one example, so the verifier does not
score it per example: each result carries its ``ranked`` pair (the graph's score, the gold
score), and ``EvalResult.mean`` of a batch whose results carry pairs is the rank agreement
computed here over the whole batch. Every place that reads a batch's score (GEPA's
minibatch acceptance through ``EvalResult.total``, val scores, the best candidate, test
reports) therefore sees the rank metric, while the per-example scores (``1 - |score -
gold|``) remain the per-example signal (Pareto fronts, feedback).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054
FIELLER = 1.06
"""Variance factor of Fisher's z for Spearman's rho (Fieller, Hartley and Pearson, 1957)."""


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of ``values``; tied values share the average of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho of two equally long sequences: Pearson's correlation of their
    average ranks (exact with ties). None when it is undefined: fewer than two values, or
    either side constant (no variance, so no order to agree with)."""
    if len(xs) != len(ys):
        raise ValueError(f"spearman needs sequences of one length, not {len(xs)} and {len(ys)}")
    if len(xs) < 2:
        return None
    rx, ry = average_ranks(xs), average_ranks(ys)
    mean = (len(xs) + 1) / 2
    dx = [r - mean for r in rx]
    dy = [r - mean for r in ry]
    sxx = sum(d * d for d in dx)
    syy = sum(d * d for d in dy)
    if sxx == 0 or syy == 0:
        return None
    rho = sum(a * b for a, b in zip(dx, dy, strict=True)) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, rho))


Pair = tuple[float, float]


def rank_agreement(pairs: Sequence[Pair | None]) -> float:
    """The batch's rank agreement in [0, 1]: ``(1 + rho) / 2`` over the (score, gold) pairs,
    times the fraction of results that have one (a run without a readable score earns
    nothing). A perfectly monotone scorer gets 1, a reversed one 0, and an undefined rho
    (fewer than two pairs, or constant scores or gold scores) counts as 0, i.e. 0.5: a
    constant scorer ranks no better than chance. An empty batch scores 0."""
    readable = [pair for pair in pairs if pair is not None]
    if not pairs or not readable:
        return 0.0
    rho = spearman([p[0] for p in readable], [p[1] for p in readable])
    return (1 + (rho or 0.0)) / 2 * len(readable) / len(pairs)


def rank_interval(pairs: Sequence[Pair | None]) -> tuple[float, float]:
    """A 95% interval for ``rank_agreement``: Fisher's z of rho with Fieller's variance
    ``1.06 / (n - 3)``, mapped like the agreement; (0, 1) with fewer than four pairs or an
    undefined rho."""
    readable = [pair for pair in pairs if pair is not None]
    rho = spearman([p[0] for p in readable], [p[1] for p in readable])
    if rho is None or len(readable) < 4:
        return 0.0, 1.0
    fraction = len(readable) / len(pairs)
    z = math.atanh(max(-0.999999, min(0.999999, rho)))
    half = Z95 * math.sqrt(FIELLER / (len(readable) - 3))
    low, high = math.tanh(z - half), math.tanh(z + half)
    return (1 + low) / 2 * fraction, (1 + high) / 2 * fraction
