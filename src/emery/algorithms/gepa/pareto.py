"""The per-example Pareto front over val, and the candidates that are not dominated on it.

For each val example the front holds the candidates with the best score on it. A candidate
is dominated when every example it is best on also has another (non-dominated) candidate
among its best: removing it loses no example. Dominated candidates are removed one at a
time, lowest mean first, until none is left; each remaining candidate is then weighted by
the number of examples it is best on.
"""

from __future__ import annotations

from collections.abc import Mapping

Scores = Mapping[str, Mapping[str, float]]  # candidate id -> example id -> score

TOLERANCE = 1e-9


def per_example_front(scores: Scores, order: list[str] | None = None) -> dict[str, list[str]]:
    """Example id → the candidates with the best score on it (in ``order``, default pool order)."""
    candidates = order if order is not None else list(scores)
    examples: list[str] = []
    for candidate in candidates:
        examples.extend(e for e in scores[candidate] if e not in examples)
    front: dict[str, list[str]] = {}
    for example in examples:
        present = [c for c in candidates if example in scores[c]]
        best = max(scores[c][example] for c in present)
        front[example] = [c for c in present if scores[c][example] >= best - TOLERANCE]
    return front


def _dominated(candidate: str, others: set[str], front: Mapping[str, list[str]]) -> bool:
    """True when every example ``candidate`` is best on also has one of ``others`` best."""
    return all(
        any(other in others for other in best) for best in front.values() if candidate in best
    )


def non_dominated(front: Mapping[str, list[str]], means: Mapping[str, float]) -> list[str]:
    """The candidates left after removing dominated ones, lowest mean first, one at a time.

    Order of the result: the order candidates first appear in ``front``.
    """
    on_front: list[str] = []
    for best in front.values():
        on_front.extend(c for c in best if c not in on_front)
    remaining = set(on_front)
    by_mean = sorted(on_front, key=lambda c: means.get(c, 0.0))
    removed = True
    while removed:
        removed = False
        for candidate in by_mean:
            if candidate in remaining and _dominated(candidate, remaining - {candidate}, front):
                remaining.discard(candidate)
                removed = True
                break
    return [c for c in on_front if c in remaining]


def front_weights(front: Mapping[str, list[str]], means: Mapping[str, float]) -> dict[str, int]:
    """Non-dominated candidate → number of val examples it is best on."""
    keep = non_dominated(front, means)
    weights = dict.fromkeys(keep, 0)
    for best in front.values():
        for candidate in best:
            if candidate in weights:
                weights[candidate] += 1
    return weights
