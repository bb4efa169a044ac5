"""Merge: combine two candidates on the front that descend from a common ancestor.

For a pair (a, b) with a common ancestor c, neither the other's ancestor, the merged
candidate takes each component from the side that changed it relative to c; where both
changed it, from the side with the higher mean val score. A triple is only worth trying
when c scores no higher than a or b and at least one component was changed by exactly one
side. The merge is scored on a val subsample balanced between examples where a wins,
where b wins and ties, and kept only if it does at least as well as both parents there.

When and what to merge is a strategy: ``merge_policy`` names a ``MergeKind`` in
``MERGE_POLICIES`` (``core/plugins.py``): the built-in ``after_acceptance`` (one merge due
after each accepted child, up to ``max_merges`` in a job, of two front candidates found by
``find_merge``), a ``"module:attr"`` of your own, or an entry point of the
``emery.merge_policies`` group. ``use_merge = false`` turns merging off whatever the policy.

``run_merge`` is one merge iteration: propose (build the merged candidate) → score (on the
subsample) → accept (as good as both parents) → promote (all of val, into the pool).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.events import GepaMergeAccepted, GepaMergeAttempted, GepaMergeRejected
from emery.algorithms.gepa.pareto import front_weights
from emery.algorithms.gepa.pool import add_to_pool, lean
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.core.models import Candidate, Demo, Example, Lineage, candidate_id
from emery.core.plugins import PluginRegistry

if TYPE_CHECKING:
    from emery.algorithms.gepa.settings import GepaSettings

T = TypeVar("T")


@dataclass(frozen=True)
class MergePlan:
    """Two parents, their common ancestor and the merged components and demo sets."""

    first: str
    second: str
    ancestor: str
    components: dict[str, str]
    taken_from: dict[str, str]
    demos: dict[str, tuple[Demo, ...]] = field(default_factory=dict)


@runtime_checkable
class MergePolicy(Protocol):
    """When GEPA tries a merge and of which candidates (the merge itself, scored on a val
    subsample and kept when as good as both parents, is GEPA's: ``run_merge``)."""

    def due(self, state: GepaState) -> bool:
        """Whether this step tries a merge (asked before the step, and to know whether the
        budget still pays for one; ``state.last_accepted``: the last step accepted a child)."""
        ...

    def plan(self, state: GepaState, rng: random.Random) -> MergePlan | None:
        """The merge to try (``find_merge`` makes one), or None: the step reflects instead."""
        ...

    def accepted(self, state: GepaState) -> None:
        """A child joined the pool (called once for each): schedule a merge if wished."""
        ...


@dataclass(frozen=True)
class AfterAcceptance:
    """One merge due after each accepted child (``state.merges_due``), up to
    ``max_merges`` tried in a job, tried in the step after an acceptance."""

    max_merges: int = 5

    def due(self, state: GepaState) -> bool:
        return state.merges_due > 0 and state.last_accepted

    def plan(self, state: GepaState, rng: random.Random) -> MergePlan | None:
        return find_merge(state, rng)

    def accepted(self, state: GepaState) -> None:
        if state.counters.merges_attempted + state.merges_due < self.max_merges:
            state.merges_due += 1


@dataclass(frozen=True)
class MergeKind:
    """A merge policy GEPA can be told to use: ``build`` makes it from GEPA's settings
    (``max_merges``, or none of them)."""

    name: str
    build: Callable[[GepaSettings], MergePolicy]


AFTER_ACCEPTANCE = MergeKind(
    "after_acceptance", lambda settings: AfterAcceptance(settings.max_merges)
)

MERGE_POLICIES = PluginRegistry(
    what="merge policy",
    plural="merge policies",
    where="algorithm.gepa.merge_policy",
    builtins={AFTER_ACCEPTANCE.name: f"{__name__}:AFTER_ACCEPTANCE"},
    attribute="POLICY",
    group="emery.merge_policies",
    type=MergeKind,
)


def merge_policy(settings: GepaSettings) -> MergePolicy:
    """The policy ``settings.merge_policy`` names."""
    return MERGE_POLICIES.get(settings.merge_policy).build(settings)


def ancestors(state: GepaState, candidate_id: str) -> set[str]:
    """Every pool candidate ``candidate_id`` descends from (not itself)."""
    parents = {item.id: item.parents for item in state.pool}
    seen: set[str] = set()
    stack = list(parents.get(candidate_id, []))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(parents.get(current, []))
    return seen


def merged_components(
    first: PoolEntry, second: PoolEntry, ancestor: PoolEntry, rng: random.Random
) -> tuple[dict[str, str], dict[str, str], bool]:
    """The merged texts, which side each came from, and whether a component was changed by
    exactly one side (the merge is pointless otherwise).

    Every component of the three counts, so a layout choice (``stage:choice``) that one
    side added, or removed, survives the merge like a changed text."""
    a, b, c = (item.candidate.components for item in (first, second, ancestor))
    return _merged(a, b, c, first, second, rng)


def merged_demos(
    first: PoolEntry, second: PoolEntry, ancestor: PoolEntry, rng: random.Random
) -> tuple[dict[str, tuple[Demo, ...]], dict[str, str], bool]:
    """The merged demo sets per stage, the same way as ``merged_components``."""
    a, b, c = (item.candidate.demos for item in (first, second, ancestor))
    return _merged(a, b, c, first, second, rng)


def _merged(
    a: Mapping[str, T],
    b: Mapping[str, T],
    base: Mapping[str, T],
    first: PoolEntry,
    second: PoolEntry,
    rng: random.Random,
) -> tuple[dict[str, T], dict[str, str], bool]:
    """Each name's value from the side that changed it relative to ``base`` (a missing
    name is a value too: a side that dropped one drops it from the merge)."""
    values: dict[str, T] = {}
    taken: dict[str, str] = {}
    one_sided = False
    for name in [*base, *sorted((set(a) | set(b)) - set(base))]:
        old, x, y = base.get(name), a.get(name), b.get(name)
        if x == y:
            value, taken[name] = x, "both"
        elif x == old:
            value, taken[name], one_sided = y, second.id, True
        elif y == old:
            value, taken[name], one_sided = x, first.id, True
        else:
            if first.val_score != second.val_score:
                winner = first if first.val_score > second.val_score else second
            else:
                winner = rng.choice([first, second])
            value, taken[name] = (x if winner is first else y), winner.id
        if value is not None:
            values[name] = value
    return values, taken, one_sided


def find_merge(state: GepaState, rng: random.Random, attempts: int = 10) -> MergePlan | None:
    """A merge not tried before, of two non-dominated candidates, or None."""
    means = state.means()
    dominators = [c for c in front_weights(state.front, means) if c != state.seed_candidate_id]
    if len(dominators) < 2:
        return None
    tried = {tuple(item) for item in state.merges_tried}
    known = {item.id for item in state.pool}
    for _ in range(attempts):
        first, second = sorted(rng.sample(dominators, 2))
        above_first, above_second = ancestors(state, first), ancestors(state, second)
        if first in above_second or second in above_first:
            continue
        common = sorted(above_first & above_second)
        plans = []
        for ancestor in common:
            if (first, second, ancestor) in tried:
                continue
            a, b, c = state.entry(first), state.entry(second), state.entry(ancestor)
            if c.val_score > a.val_score or c.val_score > b.val_score:
                continue
            plan = _plan(a, b, c, random.Random(rng.random()))
            if plan is not None and candidate_id(plan.components, plan.demos) not in known:
                plans.append(plan)
        if plans:
            weights = [state.entry(plan.ancestor).val_score + 1e-3 for plan in plans]
            return rng.choices(plans, weights=weights, k=1)[0]
    return None


def _plan(
    first: PoolEntry, second: PoolEntry, ancestor: PoolEntry, rng: random.Random
) -> MergePlan | None:
    """The merge of ``first`` and ``second`` over ``ancestor``, or None if pointless."""
    texts, taken, one_sided = merged_components(first, second, ancestor, rng)
    demos, demos_taken, demos_one_sided = merged_demos(first, second, ancestor, rng)
    if not (one_sided or demos_one_sided):
        return None
    taken |= {f"{stage} (demos)": side for stage, side in demos_taken.items()}
    return MergePlan(first.id, second.id, ancestor.id, texts, taken, demos)


def merge_subsample(
    first: Mapping[str, float],
    second: Mapping[str, float],
    size: int,
    rng: random.Random,
) -> list[str]:
    """Val example ids balanced between first-wins, second-wins and ties."""
    examples = sorted(set(first) & set(second))
    groups = [
        [e for e in examples if first[e] > second[e]],
        [e for e in examples if second[e] > first[e]],
        [e for e in examples if first[e] == second[e]],
    ]
    for group in groups:
        rng.shuffle(group)
    chosen: list[str] = []
    while len(chosen) < min(size, len(examples)):
        for group in groups:
            if group and len(chosen) < size:
                chosen.append(group.pop())
    return chosen


async def run_merge(
    ctx: SearchContext,
    state: GepaState,
    plan: MergePlan,
    number: int,
    rng: random.Random,
    subsample_size: int,
) -> None:
    """One merge iteration: propose → score on a val subsample → accept → promote."""
    merged, subsample = _propose_merge(ctx, state, plan, number, rng, subsample_size)
    result = await ctx.evaluate(merged, subsample, "val")
    ids = [example.id for example in subsample]
    sums = {
        "first": sum(state.entry(plan.first).val_scores[e] for e in ids),
        "second": sum(state.entry(plan.second).val_scores[e] for e in ids),
        "merged": sum(result.scores),
    }
    accepted = sums["merged"] >= max(sums["first"], sums["second"])
    merged = _record_merge(ctx, state, plan, merged, ids, sums, accepted, number)
    if accepted:
        await _promote_merge(ctx, state, plan, merged, sums, number)


def _propose_merge(
    ctx: SearchContext,
    state: GepaState,
    plan: MergePlan,
    number: int,
    rng: random.Random,
    subsample_size: int,
) -> tuple[Candidate, list[Example]]:
    """The merged candidate (not yet recorded) and the val subsample that judges it."""
    first, second = state.entry(plan.first), state.entry(plan.second)
    state.merges_tried.append([plan.first, plan.second, plan.ancestor])
    state.merges_due = max(0, state.merges_due - 1)
    state.counters.merges_attempted += 1
    ids = merge_subsample(first.val_scores, second.val_scores, subsample_size, rng)
    val = {example.id: example for example in ctx.val}
    ctx.emit(
        GepaMergeAttempted(
            iteration=number,
            parents=[plan.first, plan.second],
            ancestor=plan.ancestor,
            taken_from=plan.taken_from,
            subsample=ids,
        )
    )
    generation = max(first.candidate.lineage.generation, second.candidate.lineage.generation)
    merged = Candidate(
        components=plan.components,
        demos=plan.demos,
        lineage=Lineage(
            parents=(plan.first, plan.second),
            generation=generation + 1,
            operation="merge",
            iteration=number,
        ),
    )
    return merged, [val[example_id] for example_id in ids]


def _record_merge(
    ctx: SearchContext,
    state: GepaState,
    plan: MergePlan,
    merged: Candidate,
    subsample: list[str],
    sums: dict[str, float],
    accepted: bool,
    number: int,
) -> Candidate:
    """Record the merged candidate with its verdict in its lineage, and report the verdict."""
    details = {
        "ancestor": plan.ancestor,
        "taken_from": plan.taken_from,
        "subsample": subsample,
        "subsample_scores": {
            plan.first: sums["first"],
            plan.second: sums["second"],
            "merged": sums["merged"],
        },
        "accepted": accepted,
    }
    lineage = merged.lineage.model_copy(update={"details": details})
    merged = ctx.add_candidate(merged.model_copy(update={"lineage": lineage}))
    verdict = GepaMergeAccepted if accepted else GepaMergeRejected
    ctx.emit(
        verdict(
            iteration=number,
            candidate_id=merged.id,
            parents=[plan.first, plan.second],
            scores=sums,
        )
    )
    if accepted:
        state.counters.merges_accepted += 1
    else:
        state.counters.merges_rejected += 1
    return merged


async def _promote_merge(
    ctx: SearchContext,
    state: GepaState,
    plan: MergePlan,
    merged: Candidate,
    sums: dict[str, float],
    number: int,
) -> None:
    """Score an accepted merge on all of val and add it to the pool."""
    full = await ctx.evaluate(merged, ctx.val, "val")
    changed = sorted(name for name, side in plan.taken_from.items() if side != "both")
    entry = PoolEntry(
        candidate=lean(merged),
        parents=[plan.first, plan.second],
        iteration=number,
        operation="merge",
        components_changed=changed,
        minibatch_before=max(sums["first"], sums["second"]),
        minibatch_after=sums["merged"],
    )
    add_to_pool(ctx, state, entry, full)
