"""Merge policies that merge less, measured on the mock (README: "Where the operators' gap
goes, and merge policies that merge less"); none is GEPA's default.

Each is a ``MergeKind`` named as ``merge_policy = "merge_variants:NAME"`` (``spend.py``
puts this folder on the path):

- ``BOTH_GAINED``: ``find_merge`` with the common ancestor strictly below both parents on
  mean val (the built-in rule, GEPA's, allows equal): under additive effects a merge can
  only beat its better parent when both lines gained.
- ``BOTH_SHOWN``: each parent shown better than the ancestor on val, paired at 0.6.
- ``EVERY_SECOND``: the built-in rule, with a merge scheduled only when the count of
  accepted children is even.

    .venv/bin/python benchmarks/efficiency/spend.py --task noisy --budget 500 --seeds 40 \\
        --set acceptance='"two_stage"' --set merge_policy='"merge_variants:BOTH_GAINED"'
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from emery.algorithms.evidence import paired
from emery.algorithms.gepa import merge
from emery.algorithms.gepa.pareto import front_weights
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.core.models import candidate_id

Gained = Callable[[PoolEntry, PoolEntry], bool]
"""Whether a parent's line gained over the common ancestor."""


def above(parent: PoolEntry, ancestor: PoolEntry) -> bool:
    """The parent's mean val strictly above the ancestor's."""
    return parent.val_score > ancestor.val_score


def shown_above(parent: PoolEntry, ancestor: PoolEntry, confidence: float = 0.6) -> bool:
    """The parent shown better than the ancestor on their shared val examples, paired."""
    ids = sorted(set(parent.val_scores) & set(ancestor.val_scores))
    first = [parent.val_scores[i] for i in ids]
    second = [ancestor.val_scores[i] for i in ids]
    return paired(first, second, confidence).verdict == "better"


def find_gainful_merge(
    state: GepaState, rng: random.Random, gained: Gained, attempts: int = 10
) -> merge.MergePlan | None:
    """``merge.find_merge`` with ``gained`` required of both parents over the ancestor."""
    means = state.means()
    dominators = [c for c in front_weights(state.front, means) if c != state.seed_candidate_id]
    if len(dominators) < 2:
        return None
    tried = {tuple(item) for item in state.merges_tried}
    known = {item.id for item in state.pool}
    for _ in range(attempts):
        first, second = sorted(rng.sample(dominators, 2))
        above_first = merge.ancestors(state, first)
        above_second = merge.ancestors(state, second)
        if first in above_second or second in above_first:
            continue
        plans = []
        for ancestor in sorted(above_first & above_second):
            if (first, second, ancestor) in tried:
                continue
            a, b, c = state.entry(first), state.entry(second), state.entry(ancestor)
            if not (gained(a, c) and gained(b, c)):
                continue
            plan = merge._plan(a, b, c, random.Random(rng.random()))
            if plan is not None and candidate_id(plan.components, plan.demos) not in known:
                plans.append(plan)
        if plans:
            weights = [state.entry(plan.ancestor).val_score + 1e-3 for plan in plans]
            return rng.choices(plans, weights=weights, k=1)[0]
    return None


@dataclass(frozen=True)
class Gainful(merge.AfterAcceptance):
    """``after_acceptance`` whose merges need both lines to have gained."""

    gained: Gained = above

    def plan(self, state: GepaState, rng: random.Random) -> merge.MergePlan | None:
        return find_gainful_merge(state, rng, self.gained)


@dataclass(frozen=True)
class EverySecond(merge.AfterAcceptance):
    """``after_acceptance`` scheduling a merge only at an even count of acceptances."""

    def accepted(self, state: GepaState) -> None:
        if state.counters.accepted % 2 == 0:
            super().accepted(state)


BOTH_GAINED = merge.MergeKind("both_gained", lambda s: Gainful(s.max_merges, above))
BOTH_SHOWN = merge.MergeKind("both_shown", lambda s: Gainful(s.max_merges, shown_above))
EVERY_SECOND = merge.MergeKind("every_second", lambda s: EverySecond(s.max_merges))
