"""GEPA's search loop: the seed on val, then one reflective mutation (or merge) per step.

Agrawal et al. (2025), "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning". Each step picks a parent from the per-example Pareto front over val, runs it on
a train minibatch, asks the reflection LM for a new text of one component from what the
component did there and the feedback it got, and keeps the child only if it does better
on the same minibatch; kept children are scored on all of val and join the pool. After an
acceptance, the next step first tries to merge two front candidates that share an ancestor.
"""

from __future__ import annotations

import math
import random
from typing import ClassVar

from emery.algorithms.base import SearchContext, load_rng, save_rng
from emery.algorithms.gepa.batches import next_minibatch
from emery.algorithms.gepa.merge import MergePlan, find_merge, merge_subsample
from emery.algorithms.gepa.pool import add_to_pool, lean, restore_candidates
from emery.algorithms.gepa.propose import Proposal, Proposer
from emery.algorithms.gepa.selection import select_components, select_parent
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.core.errors import ConfigError
from emery.core.events import BaselineEvaluated
from emery.core.models import Candidate, Example, Lineage
from emery.evaluation.budget import BudgetExhausted


class Gepa:
    """Reflective prompt evolution with a per-example Pareto front (see the module doc)."""

    name: ClassVar[str] = "gepa"
    state_type = GepaState

    def __init__(self, settings: GepaSettings | None = None) -> None:
        self.settings = settings or GepaSettings()
        self.proposer = Proposer(self.settings)

    # -- start -----------------------------------------------------------------------------

    async def start(self, ctx: SearchContext) -> GepaState:
        """Score the seed on all of val: the baseline and the pool's first member."""
        if not ctx.val:
            raise ConfigError("GEPA needs val examples to select candidates: val is empty")
        if not ctx.train:
            raise ConfigError("GEPA needs train examples to reflect on: train is empty")
        components = self._components(ctx.seed_candidate)
        seed = ctx.add_candidate(ctx.seed_candidate)
        state = GepaState(
            seed_candidate_id=seed.id,
            components=components,
            rng_state=save_rng(random.Random(ctx.seed)),
        )
        result = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            "baseline_evaluated",
            BaselineEvaluated(
                candidate_id=seed.id, split="val", score=result.mean, n=len(result.results)
            ),
        )
        state.baseline_val_score = result.mean
        add_to_pool(ctx, state, PoolEntry(candidate=seed), result)
        self._check_done(ctx, state)
        return state

    def _components(self, seed: Candidate) -> list[str]:
        names = list(seed.components)
        wanted = self.settings.components
        if wanted is None:
            return names
        unknown = [name for name in wanted if name not in seed.components]
        if unknown:
            raise ConfigError(
                f"algorithm.gepa.components: unknown component {unknown[0]!r}"
                f" (the system has: {', '.join(names) or 'none'})"
            )
        return list(dict.fromkeys(wanted))

    # -- one step --------------------------------------------------------------------------

    async def step(self, ctx: SearchContext, state: GepaState) -> GepaState:
        """One iteration: a merge if one is due and possible, else a reflective mutation."""
        rng = load_rng(state.rng_state, ctx.seed)
        restore_candidates(ctx, state)
        number = state.iteration + 1
        paid_before = ctx.budget.usage.metric_calls
        merged = False
        if self.settings.use_merge and state.merges_due > 0 and state.last_accepted:
            state.last_accepted = False
            plan = find_merge(state, rng)
            if plan is not None:
                await self._merge(ctx, state, plan, number, rng)
                merged = True
        if not merged:
            state.last_accepted = False
            await self._reflect(ctx, state, number, rng)
        state.iteration = number
        state.rng_state = save_rng(rng)
        stale = ctx.budget.usage.metric_calls == paid_before
        state.counters.stale_in_a_row = state.counters.stale_in_a_row + 1 if stale else 0
        self._check_done(ctx, state)
        return state

    def _check_done(self, ctx: SearchContext, state: GepaState) -> None:
        settings = self.settings
        best = state.entry(state.best_candidate_id)
        per_epoch = math.ceil(len(ctx.train) / min(settings.minibatch_size, len(ctx.train)))
        stale_allowed = settings.max_stale_iterations or max(10, 2 * per_epoch)
        if not state.components:
            state.done, state.done_reason = True, "the system has no components to optimize"
        elif settings.stop_when_perfect and all(
            score >= settings.perfect_score for score in best.val_scores.values()
        ):
            state.done, state.done_reason = True, "the best candidate is perfect on val"
        elif settings.max_iterations is not None and state.iteration >= settings.max_iterations:
            state.done, state.done_reason = True, f"max_iterations: {state.iteration} done"
        elif state.counters.stale_in_a_row >= stale_allowed:
            state.done = True
            state.done_reason = (
                f"{state.counters.stale_in_a_row} iterations in a row ran no new rollout"
                " (minibatches already solved, or the same proposals again)"
            )

    # -- reflective mutation ---------------------------------------------------------------

    async def _reflect(
        self, ctx: SearchContext, state: GepaState, number: int, rng: random.Random
    ) -> None:
        settings = self.settings
        parent, weights = select_parent(
            state,
            rng,
            settings.candidate_selection,
            epsilon=settings.epsilon,
            top_k=settings.top_k,
        )
        components = select_components(parent, state.components, settings.component_selection)
        ctx.emit(
            "gepa.candidate_selected",
            iteration=number,
            candidate_id=parent.id,
            selection=settings.candidate_selection,
            val_score=parent.val_score,
            front_weights=weights,
            components=components,
        )
        train = {example.id: example for example in ctx.train}
        batch_ids = next_minibatch(state.sampler, list(train), settings.minibatch_size, rng)
        batch = [train[example_id] for example_id in batch_ids]
        ctx.emit(
            "gepa.minibatch_sampled",
            iteration=number,
            example_ids=batch_ids,
            epoch=state.sampler.epoch,
        )
        before = await ctx.evaluate(parent.candidate, batch, "train")
        if settings.skip_perfect and all(s >= settings.perfect_score for s in before.scores):
            state.counters.skipped_perfect += 1
            ctx.emit(
                "gepa.minibatch_skipped",
                iteration=number,
                candidate_id=parent.id,
                scores=before.scores,
                reason="the parent is perfect on the minibatch",
            )
            return
        self._check_affordable(ctx, batch)
        state.counters.reflections += 1
        proposals: list[Proposal] = []
        for component in components:
            proposals.append(
                await self.proposer.propose(
                    ctx,
                    rng,
                    iteration=number,
                    component=component,
                    current=parent.candidate.components[component],
                    examples=batch,
                    results=before.results,
                )
            )
        texts = {p.component: p.text for p in proposals if p.text is not None}
        if not texts:
            state.counters.invalid_proposals += 1
            return
        state.counters.proposals += 1
        child = parent.candidate.derive(
            components=texts,
            lineage=Lineage(
                parents=(parent.id,),
                generation=parent.candidate.lineage.generation + 1,
                operation="reflect",
                iteration=number,
            ),
        )
        if state.has(child.id):
            state.counters.rejected += 1
            ctx.emit(
                "gepa.minibatch_rejected",
                iteration=number,
                candidate_id=child.id,
                parent_id=parent.id,
                reason="the proposed text is already in the pool",
            )
            return
        after = await ctx.evaluate(child, batch, "train")
        before_sum, after_sum = sum(before.scores), sum(after.scores)
        accepted = after_sum > before_sum or (
            settings.accept == "improvement_or_equal" and after_sum >= before_sum
        )
        details = {
            "components": sorted(texts),
            "minibatch": batch_ids,
            "minibatch_before": before.scores,
            "minibatch_after": after.scores,
            "accepted": accepted,
            "reflection": {p.component: p.details() for p in proposals},
        }
        child = ctx.add_candidate(
            child.model_copy(
                update={"lineage": child.lineage.model_copy(update={"details": details})}
            )
        )
        verdict = "gepa.minibatch_accepted" if accepted else "gepa.minibatch_rejected"
        ctx.emit(
            verdict,
            iteration=number,
            candidate_id=child.id,
            parent_id=parent.id,
            components=sorted(texts),
            before=before_sum,
            after=after_sum,
        )
        if not accepted:
            state.counters.rejected += 1
            return
        state.counters.accepted += 1
        result = await ctx.evaluate(child, ctx.val, "val")
        add_to_pool(
            ctx,
            state,
            PoolEntry(
                candidate=lean(child),
                parents=[parent.id],
                iteration=number,
                operation="reflect",
                components_changed=sorted(texts),
                minibatch_before=before_sum,
                minibatch_after=after_sum,
                next_component=parent.next_component,
            ),
            result,
        )
        state.last_accepted = True
        if settings.use_merge and state.counters.merges_attempted + state.merges_due < (
            settings.max_merges
        ):
            state.merges_due += 1

    @staticmethod
    def _check_affordable(ctx: SearchContext, batch: list[Example]) -> None:
        """Stop before the reflection call if the budget cannot score the child afterwards."""
        if not ctx.budget.can_afford(len({example.id for example in batch})):
            raise BudgetExhausted(
                "metric_calls: the budget cannot score a new candidate on the minibatch"
            )

    # -- merge -----------------------------------------------------------------------------

    async def _merge(
        self,
        ctx: SearchContext,
        state: GepaState,
        plan: MergePlan,
        number: int,
        rng: random.Random,
    ) -> None:
        first, second = state.entry(plan.first), state.entry(plan.second)
        state.merges_tried.append([plan.first, plan.second, plan.ancestor])
        state.merges_due -= 1
        state.counters.merges_attempted += 1
        subsample_ids = merge_subsample(
            first.val_scores, second.val_scores, self.settings.merge_subsample, rng
        )
        val = {example.id: example for example in ctx.val}
        subsample = [val[example_id] for example_id in subsample_ids]
        ctx.emit(
            "gepa.merge_attempted",
            iteration=number,
            parents=[plan.first, plan.second],
            ancestor=plan.ancestor,
            taken_from=plan.taken_from,
            subsample=subsample_ids,
        )
        seed = state.entry(state.seed_candidate_id).candidate
        generation = max(first.candidate.lineage.generation, second.candidate.lineage.generation)
        merged = seed.derive(
            components=plan.components,
            lineage=Lineage(
                parents=(plan.first, plan.second),
                generation=generation + 1,
                operation="merge",
                iteration=number,
            ),
        )
        result = await ctx.evaluate(merged, subsample, "val")
        merged_sum = sum(result.scores)
        first_sum = sum(first.val_scores[e] for e in subsample_ids)
        second_sum = sum(second.val_scores[e] for e in subsample_ids)
        accepted = merged_sum >= max(first_sum, second_sum)
        merged = ctx.add_candidate(
            merged.model_copy(
                update={
                    "lineage": merged.lineage.model_copy(
                        update={
                            "details": {
                                "ancestor": plan.ancestor,
                                "taken_from": plan.taken_from,
                                "subsample": subsample_ids,
                                "subsample_scores": {
                                    plan.first: first_sum,
                                    plan.second: second_sum,
                                    "merged": merged_sum,
                                },
                                "accepted": accepted,
                            }
                        }
                    )
                }
            )
        )
        kind = "gepa.merge_accepted" if accepted else "gepa.merge_rejected"
        ctx.emit(
            kind,
            iteration=number,
            candidate_id=merged.id,
            parents=[plan.first, plan.second],
            scores={"first": first_sum, "second": second_sum, "merged": merged_sum},
        )
        if not accepted:
            state.counters.merges_rejected += 1
            return
        state.counters.merges_accepted += 1
        full = await ctx.evaluate(merged, ctx.val, "val")
        add_to_pool(
            ctx,
            state,
            PoolEntry(
                candidate=lean(merged),
                parents=[plan.first, plan.second],
                iteration=number,
                operation="merge",
                components_changed=sorted(
                    name for name, side in plan.taken_from.items() if side != "both"
                ),
                minibatch_before=max(first_sum, second_sum),
                minibatch_after=merged_sum,
            ),
            full,
        )
