"""Choosing a parent from the pool and the components to change in it."""

from __future__ import annotations

import random

from emery.algorithms.gepa.pareto import front_weights, per_example_front
from emery.algorithms.gepa.settings import CandidateSelection
from emery.algorithms.gepa.state import GepaState, PoolEntry


def best_candidate(state: GepaState) -> PoolEntry:
    """The pool entry with the highest mean val score (the earliest on ties)."""
    return max(state.pool, key=lambda item: item.val_score)


def pareto_sample(
    front: dict[str, list[str]], means: dict[str, float], rng: random.Random
) -> tuple[str, dict[str, int]]:
    """A non-dominated candidate drawn with probability ∝ the examples it is best on."""
    weights = front_weights(front, means)
    ids = list(weights)
    chosen = rng.choices(ids, weights=[weights[c] for c in ids], k=1)[0]
    return chosen, weights


def select_parent(
    state: GepaState,
    rng: random.Random,
    how: CandidateSelection,
    *,
    epsilon: float = 0.1,
    top_k: int = 3,
) -> tuple[PoolEntry, dict[str, int]]:
    """The parent for this iteration and, for Pareto selectors, the weights it was drawn by."""
    means = state.means()
    if how == "current_best":
        return best_candidate(state), {}
    if how == "epsilon_greedy":
        if rng.random() < epsilon:
            return rng.choice(state.pool), {}
        return best_candidate(state), {}
    front = state.front
    if how == "top_k_pareto":
        top = sorted(state.pool, key=lambda item: -item.val_score)[:top_k]
        ids = [item.id for item in state.pool if item in top]
        table = state.val_table()
        front = per_example_front({c: table[c] for c in ids}, ids)
    chosen, weights = pareto_sample(front, means, rng)
    return state.entry(chosen), weights


def select_components(entry: PoolEntry, components: list[str], how: str) -> list[str]:
    """The components to change in ``entry``: the next in its round robin, or all.

    Advances ``entry.next_component`` (the round robin is per candidate).
    """
    if how == "all":
        return list(components)
    index = entry.next_component % len(components)
    entry.next_component = (index + 1) % len(components)
    return [components[index]]
