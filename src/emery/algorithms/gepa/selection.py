"""Choosing a parent from the pool and the components to change in it.

Parent selection is a strategy: ``candidate_selection`` names a ``SelectorKind`` in
``PARENT_SELECTORS`` (``core/plugins.py``): a built-in (``pareto``, ``top_k_pareto``,
``current_best``, ``epsilon_greedy``), a ``"module:attr"`` of your own, or an entry point
of the ``emery.parent_selectors`` group. The kind builds a ``ParentSelector`` from GEPA's
settings; each returns the parent and, for Pareto selectors, the front weights it was
drawn by.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from emery.algorithms.gepa.pareto import front_weights, per_example_front
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.core.plugins import PluginRegistry

if TYPE_CHECKING:
    from emery.algorithms.gepa.settings import GepaSettings

Selection = tuple[PoolEntry, dict[str, int]]


@runtime_checkable
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


@dataclass(frozen=True)
class SelectorKind:
    """A parent selector GEPA can be told to use: ``build`` makes it from GEPA's settings
    (``epsilon``, ``top_k``, or none of them)."""

    name: str
    build: Callable[[GepaSettings], ParentSelector]


PARETO = SelectorKind("pareto", lambda _: ParetoSelector())
TOP_K_PARETO = SelectorKind("top_k_pareto", lambda settings: TopKParetoSelector(settings.top_k))
CURRENT_BEST = SelectorKind("current_best", lambda _: CurrentBestSelector())
EPSILON_GREEDY = SelectorKind(
    "epsilon_greedy", lambda settings: EpsilonGreedySelector(settings.epsilon)
)

PARENT_SELECTORS = PluginRegistry(
    what="parent selector",
    plural="parent selectors",
    where="algorithm.gepa.candidate_selection",
    builtins={
        kind.name: f"{__name__}:{kind.name.upper()}"
        for kind in (PARETO, TOP_K_PARETO, CURRENT_BEST, EPSILON_GREEDY)
    },
    attribute="SELECTOR",
    group="emery.parent_selectors",
    type=SelectorKind,
)


def parent_selector(settings: GepaSettings) -> ParentSelector:
    """The selector ``settings.candidate_selection`` names."""
    return PARENT_SELECTORS.get(settings.candidate_selection).build(settings)


def select_parent(
    state: GepaState,
    rng: random.Random,
    how: str,
    *,
    epsilon: float = 0.1,
    top_k: int = 3,
) -> Selection:
    """The parent for this iteration chosen the way ``how`` names (see ``parent_selector``)."""
    from emery.algorithms.gepa.settings import GepaSettings

    settings = GepaSettings(candidate_selection=how, epsilon=epsilon, top_k=top_k)
    return parent_selector(settings).select(state, rng)


def select_components(entry: PoolEntry, components: list[str], how: str) -> list[str]:
    """The components to change in ``entry``: the next in its round robin, or all.

    Advances ``entry.next_component`` (the round robin is per candidate).
    """
    if how == "all":
        return list(components)
    index = entry.next_component % len(components)
    entry.next_component = (index + 1) % len(components)
    return [components[index]]
