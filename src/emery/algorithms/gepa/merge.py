"""Merge: combine two candidates on the front that descend from a common ancestor.

For a pair (a, b) with a common ancestor c, neither the other's ancestor, the merged
candidate takes each component from the side that changed it relative to c; where both
changed it, from the side with the higher mean val score. A triple is only worth trying
when c scores no higher than a or b and at least one component was changed by exactly one
side. The merge is scored on a val subsample balanced between examples where a wins,
where b wins and ties, and kept only if it does at least as well as both parents there.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from emery.algorithms.gepa.pareto import front_weights
from emery.algorithms.gepa.state import GepaState, PoolEntry


@dataclass(frozen=True)
class MergePlan:
    """Two parents, their common ancestor and the merged components."""

    first: str
    second: str
    ancestor: str
    components: dict[str, str]
    taken_from: dict[str, str]


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
    exactly one side (the merge is pointless otherwise)."""
    texts: dict[str, str] = {}
    taken: dict[str, str] = {}
    one_sided = False
    for name, base in ancestor.candidate.components.items():
        a = first.candidate.components.get(name, base)
        b = second.candidate.components.get(name, base)
        if a == b:
            texts[name], taken[name] = a, "both"
        elif a == base:
            texts[name], taken[name], one_sided = b, second.id, True
        elif b == base:
            texts[name], taken[name], one_sided = a, first.id, True
        else:
            if first.val_score != second.val_score:
                winner = first if first.val_score > second.val_score else second
            else:
                winner = rng.choice([first, second])
            texts[name], taken[name] = winner.candidate.components[name], winner.id
    return texts, taken, one_sided


def find_merge(state: GepaState, rng: random.Random, attempts: int = 10) -> MergePlan | None:
    """A merge not tried before, of two non-dominated candidates, or None."""
    means = state.means()
    dominators = [c for c in front_weights(state.front, means) if c != state.seed_candidate_id]
    if len(dominators) < 2:
        return None
    tried = {tuple(item) for item in state.merges_tried}
    known = {tuple(sorted(item.candidate.components.items())) for item in state.pool}
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
            texts, taken, one_sided = merged_components(a, b, c, random.Random(rng.random()))
            if not one_sided or tuple(sorted(texts.items())) in known:
                continue
            plans.append(MergePlan(first, second, ancestor, texts, taken))
        if plans:
            weights = [state.entry(plan.ancestor).val_score + 1e-3 for plan in plans]
            return rng.choices(plans, weights=weights, k=1)[0]
    return None


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
