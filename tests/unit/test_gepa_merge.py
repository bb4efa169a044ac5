"""Merge: two front candidates with a common ancestor combined component by component."""

from __future__ import annotations

import random

from events_support import payloads
from test_gepa_support import keyword_context, keyword_example, run_gepa

from emery.algorithms.base import save_rng
from emery.algorithms.gepa import Gepa, GepaSettings, GepaState, PoolEntry
from emery.algorithms.gepa.events import GepaMergeAccepted, GepaMergeRejected
from emery.algorithms.gepa.merge import (
    ancestors,
    find_merge,
    merge_subsample,
    merged_components,
)
from emery.algorithms.gepa.pareto import per_example_front
from emery.core.models import Candidate, Dataset, Lineage
from emery.evaluation.budget import BudgetConfig

K = keyword_example
DATASET = Dataset(
    train=[
        K("t1", a="alpha"),
        K("t2", b="beta"),
        K("t3", avoid={"a": "alpha"}),
        K("t4", b="beta"),
        K("t5", a="alpha"),
    ],
    val=[K("v1", a="alpha"), K("v2", b="beta"), K("v3", avoid={"a": "alpha"}), K("v4", b="beta")],
)


def entry(
    a: str,
    b: str,
    scores: dict[str, float],
    parents: list[str] | None = None,
) -> PoolEntry:
    return PoolEntry(
        candidate=Candidate(
            components={"a": a, "b": b},
            lineage=Lineage(parents=tuple(parents or ()), generation=1 if parents else 0),
        ),
        parents=parents or [],
        operation="reflect" if parents else "seed",
        val_scores=scores,
        val_score=sum(scores.values()) / len(scores),
    )


def siblings(
    first_scores: dict[str, float], second_scores: dict[str, float]
) -> tuple[GepaState, PoolEntry, PoolEntry, PoolEntry]:
    """A pool of the seed and two children that each changed a different component."""
    seed = entry("Rule A.", "Rule B.", {"v1": 0, "v2": 0, "v3": 1, "v4": 0})
    first = entry("Rule A. Say alpha.", "Rule B.", first_scores, [seed.id])
    second = entry("Rule A.", "Rule B. Say beta.", second_scores, [seed.id])
    state = GepaState(
        pool=[seed, first, second],
        seed_candidate_id=seed.id,
        best_candidate_id=second.id,
        best_val_score=second.val_score,
        components=["a", "b"],
        merges_due=1,
        last_accepted=True,
        rng_state=save_rng(random.Random(0)),
    )
    state.front = per_example_front(state.val_table(), [item.id for item in state.pool])
    return state, seed, first, second


def test_merged_components_take_each_text_from_the_side_that_changed_it() -> None:
    _state, seed, first, second = siblings(
        {"v1": 1, "v2": 0, "v3": 0, "v4": 0}, {"v1": 0, "v2": 1, "v3": 1, "v4": 1}
    )
    texts, taken, one_sided = merged_components(first, second, seed, random.Random(0))
    assert texts == {"a": "Rule A. Say alpha.", "b": "Rule B. Say beta."}
    assert taken == {"a": first.id, "b": second.id}
    assert one_sided
    # Both sides changed "a": the higher mean val score wins.
    both = entry("Rule A. Other.", "Rule B. Say beta.", {"v1": 1, "v2": 1, "v3": 1, "v4": 1})
    texts, taken, _ = merged_components(first, both, seed, random.Random(0))
    assert texts["a"] == "Rule A. Other."
    assert taken["a"] == both.id


def test_find_merge_pairs_non_dominated_siblings_through_their_common_ancestor() -> None:
    state, seed, first, second = siblings(
        {"v1": 1, "v2": 0, "v3": 0, "v4": 0}, {"v1": 0, "v2": 1, "v3": 1, "v4": 1}
    )
    assert ancestors(state, first.id) == {seed.id}
    plan = find_merge(state, random.Random(0))
    assert plan is not None
    assert {plan.first, plan.second} == {first.id, second.id}
    assert plan.ancestor == seed.id
    # A triple is tried once.
    state.merges_tried.append([plan.first, plan.second, plan.ancestor])
    assert find_merge(state, random.Random(0)) is None


def test_no_merge_between_a_candidate_and_its_descendant_or_a_better_ancestor() -> None:
    _state, seed, first, _ = siblings(
        {"v1": 1, "v2": 0, "v3": 0, "v4": 0}, {"v1": 0, "v2": 1, "v3": 1, "v4": 1}
    )
    child = entry("Rule A. Say alpha.", "Rule B. Say beta.", {"v1": 1, "v2": 1, "v3": 0, "v4": 1})
    child.parents = [first.id]
    lineal = GepaState(pool=[seed, first, child], seed_candidate_id=seed.id)
    lineal.front = {"v1": [first.id, child.id], "v3": [seed.id], "v2": [child.id]}
    assert find_merge(lineal, random.Random(0)) is None
    # The ancestor beats one of the pair: not worth merging.
    strong_seed = entry("Rule A.", "Rule B.", {"v1": 1, "v2": 1, "v3": 1, "v4": 0})
    weak = entry("Rule A. Say alpha.", "Rule B.", {"v1": 1, "v2": 0, "v3": 0, "v4": 0})
    weak.parents = [strong_seed.id]
    other = entry("Rule A.", "Rule B. Say beta.", {"v1": 0, "v2": 1, "v3": 1, "v4": 1})
    other.parents = [strong_seed.id]
    pool = GepaState(pool=[strong_seed, weak, other], seed_candidate_id=strong_seed.id)
    pool.front = {"v1": [weak.id], "v4": [other.id]}
    assert find_merge(pool, random.Random(0)) is None


def test_merge_subsample_balances_wins_losses_and_ties() -> None:
    first = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.0, "e": 1.0, "f": 0.0}
    second = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 0.0}
    chosen = merge_subsample(first, second, 3, random.Random(0))
    assert len(chosen) == 3
    assert sum(first[e] > second[e] for e in chosen) == 1
    assert sum(second[e] > first[e] for e in chosen) == 1
    assert sorted(merge_subsample(first, second, 10, random.Random(0))) == sorted(first)


async def test_merge_step_accepts_a_merge_as_good_as_both_parents() -> None:
    state, _, first, second = siblings(
        {"v1": 1, "v2": 0, "v3": 0, "v4": 0}, {"v1": 0, "v2": 1, "v3": 1, "v4": 1}
    )
    ctx = keyword_context(DATASET, budget=BudgetConfig(metric_calls=100))
    after = await Gepa(GepaSettings(merge_subsample=4)).step(ctx, state)
    kinds = [e.kind for e in ctx.log.events]
    assert "gepa.merge_attempted" in kinds
    assert "gepa.merge_accepted" in kinds
    assert "gepa.candidate_selected" not in kinds  # the merge is this iteration's work
    merged = after.pool[-1]
    assert merged.operation == "merge"
    assert sorted(merged.parents) == sorted([first.id, second.id])
    assert merged.candidate.components == {"a": "Rule A. Say alpha.", "b": "Rule B. Say beta."}
    assert merged.val_scores == {"v1": 1.0, "v2": 1.0, "v3": 0.0, "v4": 1.0}
    assert after.merges_due == 0
    assert after.counters.merges_accepted == 1
    stored = ctx.candidates[merged.id]
    assert stored.lineage.details["taken_from"] == {"a": first.id, "b": second.id}
    # The four val runs of the merged candidate were paid once: subsample then full val free.
    assert ctx.budget.usage.metric_calls == 4


async def test_merge_step_rejects_a_merge_worse_than_a_parent() -> None:
    # Recorded parent scores of 3.5 of 4 each; the merge really scores 3 of 4.
    state, _, first, second = siblings(
        {"v1": 1, "v2": 0.5, "v3": 1, "v4": 1}, {"v1": 0.5, "v2": 1, "v3": 1, "v4": 1}
    )
    ctx = keyword_context(DATASET, budget=BudgetConfig(metric_calls=100))
    after = await Gepa(GepaSettings(merge_subsample=4)).step(ctx, state)
    rejected = [
        e.payload_as(GepaMergeRejected) for e in ctx.log.events if e.kind == GepaMergeRejected.kind
    ]
    assert len(rejected) == 1
    assert rejected[0].scores == {"first": 3.5, "second": 3.5, "merged": 3.0}
    assert len(after.pool) == 3
    assert after.counters.merges_rejected == 1
    assert after.best_candidate_id == second.id
    assert not any(e.kind == "gepa.val_evaluated" for e in ctx.log.events)
    stored = next(c for c in ctx.candidates.values() if c.lineage.operation == "merge")
    assert stored.lineage.details["accepted"] is False
    assert {first.id, second.id} == set(stored.lineage.parents)


# DATASET's train four times over: five train examples cannot show a child better
RUN_DATASET = Dataset(
    train=[
        example.model_copy(update={"id": f"{example.id}-{copy}"})
        for copy in range(4)
        for example in DATASET.train
    ],
    val=DATASET.val,
)


async def test_merges_happen_only_after_an_acceptance_and_within_the_limit() -> None:
    outcome, records = await run_gepa(
        keyword_context(RUN_DATASET, budget=BudgetConfig(metric_calls=120), seed=1)
    )
    state = outcome.state
    assert isinstance(state, GepaState)
    accepted = payloads(records, GepaMergeAccepted)
    assert len(accepted) == 1
    merged = state.entry(accepted[0].candidate_id)
    assert merged.operation == "merge"
    assert len(merged.parents) == 2
    for record in records:
        if any(e.kind == "gepa.merge_attempted" for e in record.events):
            previous = records[records.index(record) - 1]
            assert any(e.kind == "gepa.minibatch_accepted" for e in previous.events)
    none, _ = await run_gepa(
        keyword_context(RUN_DATASET, budget=BudgetConfig(metric_calls=120), seed=1),
        {"use_merge": False},
    )
    assert isinstance(none.state, GepaState)
    assert none.state.counters.merges_attempted == 0
    capped, _ = await run_gepa(
        keyword_context(RUN_DATASET, budget=BudgetConfig(metric_calls=120), seed=1),
        {"max_merges": 0},
    )
    assert isinstance(capped.state, GepaState)
    assert capped.state.counters.merges_attempted == 0
