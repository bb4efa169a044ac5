"""Choosing a parent from the pool and the components to change in it.

Parent selection is a strategy: a ``ParentSelector`` per ``candidate_selection`` setting
(``pareto``, ``top_k_pareto``, ``current_best``, ``epsilon_greedy``), built by
``parent_selector``. Each returns the parent and, for Pareto selectors, the front weights
it was drawn by.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from emery.algorithms.gepa.pareto import front_weights, per_example_front
from emery.algorithms.gepa.settings import CandidateSelection
from emery.algorithms.gepa.state import GepaState, PoolEntry

Selection = tuple[PoolEntry, dict[str, int]]


class ParentSelector(Protocol):
    def select(self, state: GepaState, rng: random.Random) -> Selection:
        """The parent for this iteration and the front weights it was drawn by ({} if none)."""
        ...


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


class ParetoSelector:
    """Draws from the per-example front, in proportion to the examples each candidate wins."""

    def select(self, state: GepaState, rng: random.Random) -> Selection:
        chosen, weights = pareto_sample(state.front, state.means(), rng)
        return state.entry(chosen), weights


@dataclass(frozen=True)
class TopKParetoSelector:
    """Pareto selection over the front of the ``top_k`` candidates by mean val score."""

    top_k: int = 3

    def select(self, state: GepaState, rng: random.Random) -> Selection:
        top = sorted(state.pool, key=lambda item: -item.val_score)[: self.top_k]
        ids = [item.id for item in state.pool if item in top]
        table = state.val_table()
        front = per_example_front({c: table[c] for c in ids}, ids)
        chosen, weights = pareto_sample(front, state.means(), rng)
        return state.entry(chosen), weights


class CurrentBestSelector:
    """Always the best candidate by mean val score."""

    def select(self, state: GepaState, rng: random.Random) -> Selection:
        return best_candidate(state), {}


@dataclass(frozen=True)
class EpsilonGreedySelector:
    """The best candidate, or with probability ``epsilon`` any pool member."""

    epsilon: float = 0.1

    def select(self, state: GepaState, rng: random.Random) -> Selection:
        if rng.random() < self.epsilon:
            return rng.choice(state.pool), {}
        return best_candidate(state), {}


def parent_selector(how: CandidateSelection, *, epsilon: float, top_k: int) -> ParentSelector:
    """The selector a ``candidate_selection`` setting names."""
    selectors: dict[CandidateSelection, ParentSelector] = {
        "pareto": ParetoSelector(),
        "top_k_pareto": TopKParetoSelector(top_k),
        "current_best": CurrentBestSelector(),
        "epsilon_greedy": EpsilonGreedySelector(epsilon),
    }
    return selectors[how]


def select_parent(
    state: GepaState,
    rng: random.Random,
    how: CandidateSelection,
    *,
    epsilon: float = 0.1,
    top_k: int = 3,
) -> Selection:
    """The parent for this iteration chosen the way ``how`` names (see ``parent_selector``)."""
    return parent_selector(how, epsilon=epsilon, top_k=top_k).select(state, rng)


def select_components(entry: PoolEntry, components: list[str], how: str) -> list[str]:
    """The components to change in ``entry``: the next in its round robin, or all.

    Advances ``entry.next_component`` (the round robin is per candidate).
    """
    if how == "all":
        return list(components)
    index = entry.next_component % len(components)
    entry.next_component = (index + 1) % len(components)
    return [components[index]]
