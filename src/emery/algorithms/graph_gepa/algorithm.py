"""GEPA over a graph's structure as well as its node texts (``algorithm = "graph_gepa"``).

The loop is GEPA's (``gepa/algorithm.py``): select a parent from the Pareto front, score it
on a minibatch, propose one child, accept it only on strict improvement there, promote it
to val. What differs is where children come from: every ``structure_every``-th iteration
(and whenever the reflection and the edit operators give none) the child is the parent's
next structural mutation (``structure.py``), LM-free, or once those are all tried a new
graph written by the reflection model (``spec_proposal.py``), validated before any rollout.
Every candidate carries its graph as the component ``graph:spec``, so a structure is
checkpointed, diffed and reported like a text, and the round robin of a parent goes over its
own llm nodes (those a mutation added included). After each step the cost of every newly
val-scored candidate is reported (``graph.candidate_cost``).
"""

from __future__ import annotations

import random
from typing import ClassVar

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.algorithm import Gepa
from emery.algorithms.gepa.mutation import Basis, Mutation
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.graph_gepa.events import GraphCandidateCost
from emery.algorithms.graph_gepa.settings import GraphGepaSettings
from emery.algorithms.graph_gepa.structure import (
    Limits,
    proposed_structure,
    structural_child,
    structure_system,
)
from emery.core.errors import ConfigError


class GraphGepa(Gepa):
    """GEPA whose children may also be structural mutations of the graph (module doc)."""

    name: ClassVar[str] = "graph_gepa"
    settings: GraphGepaSettings

    def __init__(self, settings: GraphGepaSettings | None = None) -> None:
        super().__init__(settings or GraphGepaSettings())
        self.limits = Limits(self.settings.target_llm_calls, self.settings.vote_samples)

    async def start(self, ctx: SearchContext) -> GepaState:
        """GEPA's start, with the seed carrying its graph spec (and within the target)."""
        system = structure_system(ctx)
        ctx.seed_candidate = system.with_structure(ctx.seed_candidate)
        calls = system.lm_calls(ctx.seed_candidate)
        target = self.limits.target_llm_calls
        if target is not None and calls > target:
            raise ConfigError(
                f"algorithm.graph_gepa.target_llm_calls: the starting graph already makes"
                f" {calls} LM calls per example (target {target})"
            )
        state = await super().start(ctx)
        self._report_costs(ctx, state.pool)
        return state

    def _structure_every(self) -> int | None:
        return self.settings.structure_every

    async def step(self, ctx: SearchContext, state: GepaState) -> GepaState:
        known = len(state.pool)
        state = await super().step(ctx, state)
        self._report_costs(ctx, state.pool[known:])
        return state

    async def _child(
        self, ctx: SearchContext, state: GepaState, basis: Basis, rng: random.Random
    ) -> Mutation | None:
        """A structural child every ``structure_every``-th iteration, else GEPA's child, with
        a structural one as the last fallback."""
        every = self.settings.structure_every
        if every and basis.number % every == 0:
            mutation = await self._structure(ctx, state, basis)
            if mutation is not None:
                return mutation
        mutation = await super()._child(ctx, state, basis, rng)
        return mutation or await self._structure(ctx, state, basis)

    async def _children(
        self, ctx: SearchContext, state: GepaState, bases: list[Basis], rng: random.Random
    ) -> list[Mutation | None]:
        """One child after another (a structural child changes what the next one sees);
        with ``proposals_per_step`` above 1 the children are still scored at once."""
        return [await self._child(ctx, state, basis, rng) for basis in bases]

    async def _structure(
        self, ctx: SearchContext, state: GepaState, basis: Basis
    ) -> Mutation | None:
        """The parent's next template child, else (with ``lm_structure``) the reflection
        model's new graph."""
        mutation = structural_child(ctx, state, basis, self.limits)
        if mutation is None and self.settings.lm_structure:
            role = self.settings.reflection_role
            mutation = await proposed_structure(ctx, state, basis, self.limits, role)
        return mutation

    def _component_names(
        self, ctx: SearchContext, state: GepaState, parent: PoolEntry
    ) -> list[str]:
        """The parent's own llm nodes (unless ``components`` names the ones to rewrite)."""
        if self.settings.components is not None:
            return state.components
        return structure_system(ctx).structure_nodes(parent.candidate)

    @staticmethod
    def _report_costs(ctx: SearchContext, entries: list[PoolEntry]) -> None:
        system = structure_system(ctx)
        for entry in entries:
            ctx.emit(
                GraphCandidateCost(
                    candidate_id=entry.id,
                    llm_calls=system.lm_calls(entry.candidate),
                    llm_calls_per_example=entry.llm_calls or 0.0,
                    score=entry.val_score,
                )
            )
